# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checkpoint sweeps: where checkpoints are and how they load, the sweep's settings, its results store, the runner, its table."""
