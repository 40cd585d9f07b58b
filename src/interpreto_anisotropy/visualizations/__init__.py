# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Figures and the self-contained HTML report of a sweep."""
