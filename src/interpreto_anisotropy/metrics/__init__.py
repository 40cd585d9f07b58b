# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Isotropy measures and the manifold analyses behind the paper's theory.

`isotropy`: mean cosine similarity, IsoScore, IsoScore* (also from a covariance), partition isotropy I(W),
effective rank, rogue and outlier dimensions, and `summary` of them all. `manifold`: k-NN entropy, the
frequency / distance-to-centroid correlation, curvature visibility per frequency stratum, token counting.
Inputs are (n, d) torch tensors or NumPy arrays; results are plain floats, NumPy arrays and dataclasses.

Examples:
    >>> import torch
    >>> from interpreto_anisotropy import metrics
    >>> X = torch.randn(500, 16, generator=torch.Generator().manual_seed(0))
    >>> metrics.isoscore(X) > metrics.isoscore(X * torch.linspace(0.1, 3.0, 16))  # stretched: less isotropic
    True
"""

from __future__ import annotations

from .isotropy import (
    DEFAULT_ZETA,
    OutlierDimensions,
    RogueDimensions,
    effective_rank,
    isoscore,
    isoscore_from_covariance,
    isoscore_star,
    isoscore_star_from_covariance,
    isoscore_star_from_trace_and_norm,
    mean_cosine_similarity,
    oas_shrinkage,
    outlier_dimensions,
    partition_isotropy,
    rogue_dimensions,
    summary,
)
from .manifold import (
    CurvatureVisibility,
    FrequencyDistanceCorrelation,
    count_token_frequencies,
    curvature_visibility,
    frequency_distance_correlation,
    knn_entropy,
)

__all__ = [
    "DEFAULT_ZETA",
    "mean_cosine_similarity",
    "isoscore",
    "isoscore_from_covariance",
    "isoscore_star",
    "isoscore_star_from_covariance",
    "isoscore_star_from_trace_and_norm",
    "oas_shrinkage",
    "partition_isotropy",
    "effective_rank",
    "RogueDimensions",
    "rogue_dimensions",
    "OutlierDimensions",
    "outlier_dimensions",
    "summary",
    "knn_entropy",
    "FrequencyDistanceCorrelation",
    "frequency_distance_correlation",
    "CurvatureVisibility",
    "curvature_visibility",
    "count_token_frequencies",
]
