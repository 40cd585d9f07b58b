# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tangent subspaces: the Subspace value, tangent explainers (Interpreto concept methods), matched-rank normal controls."""
