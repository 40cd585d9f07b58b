# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Reading a model at a split point: the seam (SplitPoint), position ids per family, token batches and the token policy, the activation reader."""
