# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Isotropy measures of a point cloud: cosine, IsoScore, IsoScore*, partition I(W), effective rank, rogue dimensions."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ..commons.options import check_number, check_positive_int
from ..commons.tensors import as_real_tensor, check_finite, scaled_by_power_of_two
from ..errors import InvalidInputError

__all__ = [
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
    "DEFAULT_ZETA",
]

DEFAULT_ZETA = 0.2
"""Default shrinkage of IsoScore*: the value of the authors' I-STAR example run (Rudman & Eickhoff, 2024)."""

Points = Float[torch.Tensor, "n d"] | np.ndarray
Covariance = Float[torch.Tensor, "d d"] | np.ndarray


class _JsonReady:
    """Mixin of the result dataclasses: `to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (arrays become lists)."""
        return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in asdict(self).items()}


def _as_points(x: Any, *, name: str = "X", min_points: int = 1) -> Float[torch.Tensor, "n d"]:
    """Validate an (n, d) point cloud and return it as float64 on its own device."""
    points = as_real_tensor(x, name=name, dtype=torch.float64)
    if points.dim() != 2 or points.shape[0] < max(min_points, 1) or points.shape[1] == 0:
        needs = f"n >= {max(min_points, 1)} points of d >= 1 dimensions"
        raise InvalidInputError(f"{name} must be a 2-D (n, d) array of {needs}, got shape {tuple(points.shape)}.")
    check_finite(points, name=name)
    return points


def _as_covariance(cov: Any, *, name: str = "cov") -> Float[torch.Tensor, "d d"]:
    """Validate a (d, d) covariance, return its symmetric part as float64 on its own device."""
    matrix = as_real_tensor(cov, name=name, dtype=torch.float64)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise InvalidInputError(f"{name} must be a non-empty square (d, d) matrix, got shape {tuple(matrix.shape)}.")
    check_finite(matrix, name=name)
    return (matrix + matrix.T) / 2


def _centred(points: Float[torch.Tensor, "n d"], center: bool = True) -> Float[torch.Tensor, "n d"]:
    return points - points.mean(dim=0, keepdim=True) if center else points


def _sample_covariance(points: Float[torch.Tensor, "n d"]) -> Float[torch.Tensor, "d d"]:
    """Unbiased sample covariance (divides by n - 1), as `torch.cov(points.T)` and the `isoscore` package."""
    centred = _centred(points)
    return centred.T @ centred / (points.shape[0] - 1)


def _unit_sums(X: Points, center: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """sum_i u_i and sum_i u_i^2 (elementwise) of the unit rows u_i of X (centred), (d,) each, not formed; and n."""
    points = _centred(_as_points(X, min_points=2), center)
    points = scaled_by_power_of_two(points, dim=1)  # cosines ignore each row's scale; squares stay in range
    norms = torch.linalg.vector_norm(points, dim=1)
    if n_zero := int((norms == 0).sum()):
        name = "X (centred)" if center else "X"
        raise InvalidInputError(f"{name} has {n_zero} zero row(s), of no cosine: drop them (X[X.norm(dim=1) > 0]).")
    inverse_norms = 1.0 / norms
    return inverse_norms @ points, inverse_norms**2 @ points**2, points.shape[0]


def mean_cosine_similarity(X: Points, *, center: bool = False) -> float:
    """Exact mean cosine similarity over all distinct pairs of rows, in O(n d): (||sum_i u_i||^2 - n) / (n (n - 1)).

    Args:
        X: Points, shape (n, d), n >= 2, no zero row.
        center: Subtract the mean point before normalising.

    Returns:
        The mean cosine similarity, in [-1/(n-1), 1].

    Examples:
        >>> ia.metrics.mean_cosine_similarity(torch.ones(5, 3))
        1.0
    """
    sum_of_units, _, n = _unit_sums(X, center)
    mean = (sum_of_units @ sum_of_units - n) / (n * (n - 1))
    return float(mean.clamp(-1.0, 1.0))


def isoscore_from_covariance(cov: Covariance) -> Float[torch.Tensor, ""]:
    """IsoScore (Rudman et al., 2022) of a covariance: (PR - 1) / (d - 1), PR = tr(C)^2 / ||C||_F^2.

    Args:
        cov: Covariance, shape (d, d) (its symmetric part).

    Returns:
        A 0-d float64 tensor on `cov`'s device; 1.0 when d = 1.

    Examples:
        >>> float(ia.metrics.isoscore_from_covariance(torch.eye(4)))
        1.0
    """
    return _isoscore_of_symmetric(_as_covariance(cov))


def _isoscore_of_symmetric(matrix: Float[torch.Tensor, "d d"]) -> Float[torch.Tensor, ""]:
    return _isoscore_of_trace_and_norm(torch.diagonal(matrix).sum(), (matrix * matrix).sum(), matrix.shape[0])


def _isoscore_of_trace_and_norm(
    trace: Float[torch.Tensor, "*r"], frobenius_squared: Float[torch.Tensor, "*r"], d: int
) -> Float[torch.Tensor, "*r"]:
    """(PR - 1) / (d - 1) with PR = tr(C)^2 / ||C||_F^2; 1 when d = 1. Elementwise over traces and norms of any shape."""
    if not bool((trace > 0).all()):
        raise InvalidInputError(f"the covariance has trace {float(trace.min()):.3g}: give points not all equal.")
    if d == 1:
        return torch.ones(trace.shape, dtype=torch.float64, device=trace.device)
    participation_ratio = trace**2 / frobenius_squared
    return (participation_ratio - 1) / (d - 1)


def isoscore(X: Points) -> float:
    """IsoScore (Rudman et al., 2022) of a point cloud: `isoscore_from_covariance` of its unbiased sample covariance.

    Args:
        X: Points, shape (n, d), n >= 2 (constant columns are fine).

    Returns:
        IsoScore in [0, 1]; 1.0 when d = 1.

    Examples:
        >>> X = torch.randn(2000, 3, generator=torch.Generator().manual_seed(0))
        >>> ia.metrics.isoscore(X) > 0.99
        True
    """
    points = scaled_by_power_of_two(_as_points(X, min_points=2))  # scale-free; squares stay in range
    return float(_isoscore_of_symmetric(_sample_covariance(points)))


def oas_shrinkage(cov: Covariance, *, n: int) -> float:
    """Oracle Approximating Shrinkage intensity (Chen et al., 2010) toward the scaled identity, as `sklearn`'s `OAS`.

    Args:
        cov: Sample covariance, shape (d, d) (its scale does not matter).
        n: Number of points behind it, >= 2.

    Returns:
        The intensity in [0, 1]: near 0 when n >> d; 1.0 for a scaled identity.

    Examples:
        >>> ia.metrics.oas_shrinkage(torch.eye(4), n=100)  # already a scaled identity: shrink all the way
        1.0
        >>> cov = torch.diag(torch.tensor([4.0, 1.0, 0.5, 0.1]))
        >>> ia.metrics.oas_shrinkage(cov, n=10_000) < 0.01 < ia.metrics.oas_shrinkage(cov, n=5)
        True
    """
    matrix = _as_covariance(cov)
    _check_sample_size(n)
    return float(_oas_of_symmetric(matrix, n))


def _oas_of_symmetric(matrix: Float[torch.Tensor, "d d"], n: int) -> Float[torch.Tensor, ""]:
    d = matrix.shape[0]
    mu = torch.diagonal(matrix).sum() / d
    alpha = (matrix * matrix).sum() / d**2
    numerator = alpha + mu**2
    denominator = (n + 1) * (alpha - mu**2 / d)
    if not bool(denominator > 0):
        return torch.ones((), dtype=torch.float64, device=matrix.device)
    return torch.clamp(numerator / denominator, max=1.0)


def _check_sample_size(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise InvalidInputError(f"n (the number of points behind the covariance) must be an integer >= 2, got {n!r}.")


def isoscore_star_from_covariance(
    cov: Covariance, *, n: int, zeta: float | str = DEFAULT_ZETA, C0: Covariance | None = None
) -> Float[torch.Tensor, ""]:
    """IsoScore* (Rudman & Eickhoff, 2024): IsoScore of the shrunk covariance C_zeta = (1 - zeta) cov + zeta C0.

    Args:
        cov: Sample covariance, shape (d, d) (its symmetric part).
        n: Number of points behind it, >= 2.
        zeta: Shrinkage in [0, 1] (0: IsoScore), or "oas" (`oas_shrinkage`).
        C0: Target, shape (d, d), symmetric PSD; None for (tr(cov) / d) I.

    Returns:
        A 0-d float64 tensor in [0, 1] on `cov`'s device, differentiable in `cov`; 1.0 when d = 1.

    Raises:
        InvalidInputError: Bad zeta or n, `C0` of another shape, or no variance.

    Examples:
        >>> X = torch.randn(10, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        >>> score = ia.metrics.isoscore_star_from_covariance(torch.cov(X.T), n=10)
        >>> 0.0 < float(score) < 1.0
        True
    """
    matrix = _as_covariance(cov)
    _check_sample_size(n)
    if isinstance(zeta, str) and zeta.lower() == "oas":
        shrinkage = _oas_of_symmetric(matrix.detach(), n)
    elif isinstance(zeta, bool | str) or not isinstance(zeta, int | float) or not 0.0 <= float(zeta) <= 1.0:
        raise InvalidInputError(f'zeta must be a float in [0, 1] or "oas", got {zeta!r}.')
    else:
        shrinkage = float(zeta)
    if C0 is None:
        trace = torch.diagonal(matrix).sum()
        return isoscore_star_from_trace_and_norm(trace, (matrix * matrix).sum(), matrix.shape[0], zeta=shrinkage)
    target = _as_covariance(C0, name="C0").to(matrix.device)
    if target.shape != matrix.shape:
        raise InvalidInputError(f"C0 has shape {tuple(target.shape)} but cov has shape {tuple(matrix.shape)}.")
    return _isoscore_of_symmetric((1 - shrinkage) * matrix + shrinkage * target)


def isoscore_star_from_trace_and_norm(
    trace: float | Float[torch.Tensor, "*r"],
    frobenius_squared: float | Float[torch.Tensor, "*r"],
    dim: int,
    *,
    zeta: float | Float[torch.Tensor, ""] = DEFAULT_ZETA,
) -> Float[torch.Tensor, "*r"]:
    """IsoScore* toward the scaled identity from tr(C) and ||C||_F^2 alone (no matrix; what the probe uses).

    Args:
        trace: tr(C) > 0, or a tensor of traces (scored elementwise).
        frobenius_squared: ||C||_F^2, of the same shape.
        dim: d.
        zeta: Shrinkage in [0, 1].

    Returns:
        A float64 tensor in [0, 1] of the traces' shape; 1.0 when d = 1.

    Raises:
        InvalidInputError: A trace not positive, or d < 1.

    Examples:
        >>> C = torch.diag(torch.tensor([3.0, 1.0, 1.0], dtype=torch.float64))
        >>> a = ia.metrics.isoscore_star_from_trace_and_norm(C.trace(), (C * C).sum(), 3, zeta=0.2)
        >>> b = ia.metrics.isoscore_star_from_covariance(C, n=10, zeta=0.2)
        >>> bool(torch.isclose(a, b))
        True
    """
    trace = torch.as_tensor(trace, dtype=torch.float64)
    frobenius_squared = torch.as_tensor(frobenius_squared, dtype=torch.float64, device=trace.device)
    if dim < 1:
        raise InvalidInputError(f"dim must be >= 1, got {dim}.")
    shrunk = (1 - zeta) ** 2 * frobenius_squared + (2 * zeta * (1 - zeta) + zeta**2) * trace**2 / dim
    return _isoscore_of_trace_and_norm(trace, shrunk, dim)


def isoscore_star(
    X: Points, *, zeta: float | str = DEFAULT_ZETA, C0: Covariance | None = None, as_tensor: bool = False
) -> float | Float[torch.Tensor, ""]:
    """IsoScore* of a point cloud: `isoscore_star_from_covariance` of its unbiased sample covariance (n < d is fine).

    Args:
        X: Points, shape (n, d), n >= 2.
        zeta: Shrinkage in [0, 1], or "oas".
        C0: Target covariance, shape (d, d); None for the scaled identity.
        as_tensor: Return a 0-d float64 tensor that keeps the autograd graph of `X`.

    Returns:
        IsoScore* in [0, 1], a float (or a 0-d tensor); 1.0 when d = 1.

    Examples:
        >>> X = torch.randn(20, 100, generator=torch.Generator().manual_seed(0))
        >>> ia.metrics.isoscore(X) < ia.metrics.isoscore_star(X)
        True
    """
    points = _as_points(X, min_points=2)
    if C0 is None:  # then scale-free: squares kept in range (a given C0 is in the units of X)
        points = scaled_by_power_of_two(points)
    score = isoscore_star_from_covariance(_sample_covariance(points), n=points.shape[0], zeta=zeta, C0=C0)
    return score if as_tensor else float(score)


def partition_isotropy(X: Points, *, center: bool = True) -> float:
    """Partition-function isotropy I(W) = min_c Z(c) / max_c Z(c), Z(c) = sum_i exp(c . x_i) (Mu & Viswanath, 2018).

    Args:
        X: Points, shape (n, d), n >= 2.
        center: Subtract the mean point first (and take the centred X^T X).

    Returns:
        I(W) in (0, 1]; 1.0 for an all-zero (centred) cloud.

    Examples:
        >>> X = torch.randn(500, 4, generator=torch.Generator().manual_seed(0))
        >>> ia.metrics.partition_isotropy(X + 10.0, center=False) < ia.metrics.partition_isotropy(X + 10.0)
        True
    """
    points = _centred(_as_points(X, min_points=2), center)
    scaled = scaled_by_power_of_two(points)  # the same eigenvectors, without overflow in X^T X
    return _partition_isotropy_of(points, scaled.T @ scaled)


def _partition_isotropy_of(points: Float[torch.Tensor, "n d"], gram: Float[torch.Tensor, "d d"]) -> float:
    """I(W) of `points` along the eigenvectors c of `gram` (their X^T X, to any power-of-two scale) and -c."""
    _, eigenvectors = torch.linalg.eigh(gram)
    projections = points @ eigenvectors
    log_partition = torch.cat([torch.logsumexp(projections, dim=0), torch.logsumexp(-projections, dim=0)])
    return float(torch.exp(log_partition.min() - log_partition.max()))


def effective_rank(X: Points, *, center: bool = False) -> float:
    """Effective rank (Roy & Vetterli, 2007; RankMe): exp of the entropy of the normalised singular values of `X`.

    Args:
        X: Points, shape (n, d).
        center: Subtract the mean point first (RankMe does not).

    Returns:
        A float in [1, min(n, d)]; 0.0 for an all-zero matrix.

    Examples:
        >>> round(ia.metrics.effective_rank(torch.eye(8)), 6)
        8.0
    """
    points = _centred(_as_points(X), center)
    return _effective_rank_of(_smaller_gram(scaled_by_power_of_two(points)))


def _smaller_gram(scaled: Float[torch.Tensor, "n d"]) -> Float[torch.Tensor, "m m"]:
    """X^T X (d x d) when n >= d, else X X^T (n x n): the same non-zero eigenvalues."""
    return scaled.T @ scaled if scaled.shape[0] >= scaled.shape[1] else scaled @ scaled.T


def _effective_rank_of(gram: Float[torch.Tensor, "m m"]) -> float:
    """exp of the entropy of the normalised square roots of `gram`'s eigenvalues (a Gram's: its singular values)."""
    eigenvalues = torch.linalg.eigvalsh(gram)
    floor = gram.shape[0] * torch.finfo(gram.dtype).eps * eigenvalues[-1]
    singular_values = eigenvalues[eigenvalues > floor].sqrt()
    total = singular_values.sum()
    if not bool(total > 0):
        return 0.0
    p = singular_values / total
    return float(torch.exp(-(p * torch.log(p)).sum()))


@dataclass(frozen=True)
class RogueDimensions(_JsonReady):
    """Per-dimension contributions to the mean cosine similarity (Timkey & van Schijndel, 2021).

    Attributes:
        contributions: (d,), the mean over distinct pairs of u_i v_i / (||u|| ||v||); they sum to `mean_cosine`.
        mean_cosine: The exact mean pairwise cosine similarity.
        top_indices: The `top` dimensions of largest contribution, largest first.
        top_contributions: Their contributions.
        top_share: sum(top contributions) / sum(|contributions|), in [-1, 1]; 0.0 if every contribution is 0.

    Examples:
        >>> rogue = ia.metrics.rogue_dimensions(torch.tensor([[1.0, 0.1], [1.0, -0.1]]), top=1)
        >>> int(rogue.top_indices[0]), round(rogue.mean_cosine, 4)
        (0, 0.9802)
    """

    contributions: np.ndarray
    mean_cosine: float
    top_indices: np.ndarray
    top_contributions: np.ndarray
    top_share: float


def rogue_dimensions(X: Points, *, top: int = 3, center: bool = False) -> RogueDimensions:
    """Dimensions that dominate cosine similarity (Timkey & van Schijndel, 2021), exact over all pairs in O(n d).

    Args:
        X: Points, shape (n, d), n >= 2, no zero row.
        top: How many leading dimensions to report (capped at d).
        center: Subtract the mean point first.

    Returns:
        A `RogueDimensions`.

    Raises:
        InvalidInputError: `top` < 1 (and as `mean_cosine_similarity`).

    Examples:
        >>> X = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
        >>> X[:, 5] += 20.0  # one dimension shared by every point dominates the cosine similarity
        >>> rogue = ia.metrics.rogue_dimensions(X, top=1)
        >>> int(rogue.top_indices[0]), rogue.top_share > 0.9
        (5, True)
    """
    check_positive_int("top", top)
    sum_of_units, squares_of_units, n = _unit_sums(X, center)
    contributions = (sum_of_units**2 - squares_of_units) / (n * (n - 1))
    order = torch.argsort(contributions, descending=True)[: min(top, contributions.shape[0])]
    absolute_total = contributions.abs().sum()
    top_share = contributions[order].sum() / absolute_total if bool(absolute_total > 0) else absolute_total
    return RogueDimensions(
        contributions=contributions.cpu().numpy(),
        mean_cosine=float(contributions.sum()),
        top_indices=order.cpu().numpy(),
        top_contributions=contributions[order].cpu().numpy(),
        top_share=float(top_share),
    )


@dataclass(frozen=True)
class OutlierDimensions(_JsonReady):
    """Magnitude outlier dimensions.

    Attributes:
        indices: Outlier dimensions, by decreasing magnitude.
        magnitudes: (d,), each dimension's mean absolute value over the points.
        threshold: mean + n_std * std of `magnitudes`, above which a dimension is an outlier.

    Examples:
        >>> ia.metrics.outlier_dimensions(torch.ones(4, 3)).indices.tolist()  # all magnitudes equal: none
        []
    """

    indices: np.ndarray
    magnitudes: np.ndarray
    threshold: float


def outlier_dimensions(X: Points, *, n_std: float = 3.0) -> OutlierDimensions:
    """Dimensions whose mean |value| exceeds the mean over dimensions by `n_std` std (Kovaleva et al., 2021).

    Args:
        X: Points, shape (n, d).
        n_std: Standard deviations above the mean that make an outlier (3: the papers' 3-sigma rule).

    Returns:
        An `OutlierDimensions` (`indices` empty when none stands out).

    Raises:
        InvalidInputError: `n_std` not a positive number.

    Examples:
        >>> X = torch.randn(100, 64, generator=torch.Generator().manual_seed(0))
        >>> X[:, 7] *= 50.0
        >>> outliers = ia.metrics.outlier_dimensions(X)
        >>> outliers.indices.tolist(), bool(outliers.magnitudes[7] > outliers.threshold)
        ([7], True)
    """
    check_number("n_std", n_std, above=0)
    points = _as_points(X)
    magnitudes = points.abs().mean(dim=0)
    unit = scaled_by_power_of_two(magnitudes)  # the same test, with the std's squares in range
    unit_threshold = unit.mean() + n_std * unit.std(unbiased=False)
    candidates = torch.nonzero(unit > unit_threshold).flatten()
    threshold = unit_threshold * (magnitudes.max() / unit.max()) if bool(unit.max() > 0) else unit_threshold
    indices = candidates[torch.argsort(magnitudes[candidates], descending=True)]
    return OutlierDimensions(
        indices=indices.cpu().numpy(), magnitudes=magnitudes.cpu().numpy(), threshold=float(threshold)
    )


def summary(X: Points, *, zeta: float | str = DEFAULT_ZETA, top: int = 3) -> dict[str, float]:
    """Every measure of this module on one cloud (keys: the activation_* columns of docs/columns.md, unprefixed).

    Args:
        X: Points, shape (n, d), n >= 2, no zero row.
        zeta: IsoScore* shrinkage.
        top: Rogue dimensions whose share is reported.

    Returns:
        A dict of floats.

    Examples:
        >>> X = torch.randn(300, 8, generator=torch.Generator().manual_seed(0))
        >>> sorted(ia.metrics.summary(X))[:3]
        ['d', 'effective_rank', 'isoscore']
    """
    points = _as_points(X, min_points=2)
    n, d = points.shape
    scaled = scaled_by_power_of_two(points)  # what isoscore, isoscore_star and the uncentred I(W) each scale
    covariance = _sample_covariance(scaled)
    gram = scaled.T @ scaled  # the uncentred I(W)'s, and effective_rank's when n >= d
    centred = _centred(points)
    centred_scaled = scaled_by_power_of_two(centred)
    return {
        "n": float(n),
        "d": float(d),
        "mean_cosine": mean_cosine_similarity(points),
        "mean_cosine_centered": mean_cosine_similarity(points, center=True),
        "isoscore": float(_isoscore_of_symmetric(covariance)),
        "isoscore_star": float(isoscore_star_from_covariance(covariance, n=n, zeta=zeta)),
        "partition_isotropy": _partition_isotropy_of(centred, centred_scaled.T @ centred_scaled),
        "partition_isotropy_uncentered": _partition_isotropy_of(points, gram),
        "effective_rank": _effective_rank_of(gram if n >= d else _smaller_gram(scaled)),
        "rogue_top_share": rogue_dimensions(points, top=top).top_share,
        "n_outlier_dimensions": float(len(outlier_dimensions(points).indices)),
    }
