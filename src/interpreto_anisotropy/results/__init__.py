# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Results shared by a sweep, a live probe and the report: schema, store, records, table, verdict, change."""
