# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Isotropy measures (`isotropy`) and the manifold analyses behind the paper's theory (`manifold`).

Inputs are (n, d) torch tensors or NumPy arrays; results are plain floats, NumPy arrays and dataclasses.

Examples:
    >>> import torch
    >>> from interpreto_anisotropy import metrics
    >>> X = torch.randn(500, 16, generator=torch.Generator().manual_seed(0))
    >>> metrics.isoscore(X) > metrics.isoscore(X * torch.linspace(0.1, 3.0, 16))  # stretched: less isotropic
    True
"""

from __future__ import annotations

from . import isotropy, manifold
from .isotropy import *  # noqa: F403
from .manifold import *  # noqa: F403

__all__ = [*isotropy.__all__, *manifold.__all__]
