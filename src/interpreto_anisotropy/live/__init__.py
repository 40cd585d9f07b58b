# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe: anisotropy measured on the training step's own gradients, while the model trains.

`TrainingProbe` watches the user's forwards and backwards at split points (through the seam's `TrainingCapture`),
pools each logging window's gradients and scores the tangent against its normal controls with the statistics of
`GradientProbe`; its rows have the schema of `CheckpointSweep`'s (source "live"), so `SweepResult`, its plots and
its report read them unchanged. `callback.AnisotropyCallback` does the same inside a Hugging Face `Trainer`.
"""
