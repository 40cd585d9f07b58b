# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Plumbing with no model in it: atomic files, tensor validation, float64 moments, torch.distributed helpers, lagged device reads."""
