# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The gradient probe: training objectives, masked-LM corruption, GradientProbe and its ProbeResult."""
