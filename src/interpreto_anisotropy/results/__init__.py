# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Results shared by a checkpoint sweep, a live probe and the report: the row schema, the results directory (its
store and the records beside its rows), the table (`SweepResult`), the verdict and what training added."""
