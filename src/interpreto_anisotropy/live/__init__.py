# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe: anisotropy measured on the training step's own gradients, while the model trains."""
