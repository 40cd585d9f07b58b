# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""interpreto-anisotropy: the geometry of language-model learning dynamics, as an Interpreto plugin.

Fit low-rank tangent subspaces of the activation manifold with Interpreto's concept methods, probe the
model's true training-loss gradients at the same split point, and compare the gradient energy and
anisotropy held by the tangent subspace with matched-rank normal controls, checkpoint after checkpoint.
"""

from __future__ import annotations

from . import errors
from .errors import AnisotropyError

__version__ = "0.1.0"

__all__ = ["AnisotropyError", "errors", "__version__"]
