# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Isotropy measures of a point cloud: cosine, IsoScore, IsoScore*, partition I(W), effective rank, rogue dimensions.

Every function takes an (n, d) torch tensor or NumPy array (rows are points), computes in float64 on the
input's device and returns plain Python floats, NumPy arrays or frozen dataclasses. The `*_from_covariance`
functions work from a (d, d) covariance instead (e.g. one accumulated by streaming) and return 0-d float64
tensors, so that they stay differentiable and on the device.

Degenerate input never gives a silent NaN: an empty or 1-D input, NaN or infinity, or a cloud whose value is
undefined raises an error of `interpreto_anisotropy.errors`; each function documents what it does with
zero vectors, constant columns and d = 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ..commons.tensors import as_real_tensor, check_finite, scaled_by_power_of_two
from ..errors import EmptyInputError, InvalidInputError

__all__ = [
    "mean_cosine_similarity",
    "isoscore",
    "isoscore_from_covariance",
    "isoscore_star",
    "isoscore_star_from_covariance",
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


# ---------------------------------------------------------------------------------------------- validation
def _as_points(x: Any, *, name: str = "X", min_points: int = 1) -> Float[torch.Tensor, "n d"]:
    """Validate an (n, d) point cloud and return it as float64 on its own device.

    Raises:
        InvalidInputError: If `x` is not 2-D or has fewer than `min_points` rows.
        EmptyInputError: If `x` has no row or no column.
        NonFiniteError: If `x` holds NaN or infinity.
    """
    points = as_real_tensor(x, name=name, dtype=torch.float64)
    if points.dim() != 2:
        raise InvalidInputError(
            f"{name} must be a 2-D (n points, d dimensions) array, got shape {tuple(points.shape)}."
        )
    n, d = points.shape
    if n == 0 or d == 0:
        raise EmptyInputError(f"{name} is empty (shape {(n, d)}); pass at least {max(min_points, 1)} point(s).")
    if n < min_points:
        raise InvalidInputError(f"{name} has {n} point(s) but this measure needs at least {min_points}.")
    check_finite(points, name=name)
    return points


def _as_covariance(cov: Any, *, name: str = "cov") -> Float[torch.Tensor, "d d"]:
    """Validate a (d, d) covariance, return its symmetric part as float64 on its own device."""
    matrix = as_real_tensor(cov, name=name, dtype=torch.float64)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise InvalidInputError(f"{name} must be a square (d, d) matrix, got shape {tuple(matrix.shape)}.")
    if matrix.shape[0] == 0:
        raise EmptyInputError(f"{name} is empty (shape {tuple(matrix.shape)}).")
    check_finite(matrix, name=name)
    return (matrix + matrix.T) / 2


def _sample_covariance(points: Float[torch.Tensor, "n d"]) -> Float[torch.Tensor, "d d"]:
    """Unbiased sample covariance (divides by n - 1), as `torch.cov(points.T)` and the `isoscore` package."""
    centred = points - points.mean(dim=0, keepdim=True)
    return centred.T @ centred / (points.shape[0] - 1)


def _inverse_row_norms(points: Float[torch.Tensor, "n d"], *, name: str) -> Float[torch.Tensor, " n"]:
    norms = torch.linalg.vector_norm(points, dim=1)
    n_zero = int((norms == 0).sum())
    if n_zero:
        raise InvalidInputError(
            f"{name} has {n_zero} zero vector(s), whose cosine similarity is undefined; drop them first "
            "(e.g. X[X.norm(dim=1) > 0])."
        )
    return 1.0 / norms


# ---------------------------------------------------------------------------------------------- cosine
def mean_cosine_similarity(X: Points, *, center: bool = False) -> float:
    """Exact average cosine similarity over all distinct pairs of rows, in O(n d) time and memory.

    With unit rows u_i = x_i / ||x_i|| and s = sum_i u_i (one matrix-vector product), the sum over ordered pairs
    i != j of u_i . u_j is ||s||^2 - n, so the mean is (||s||^2 - n) / (n (n - 1)): no n x n matrix is formed.

    Args:
        X: Points, shape (n, d).
        center: Subtract the mean point before normalising (the cosine of the centred cloud).

    Returns:
        The mean cosine similarity, in [-1/(n-1), 1]. Identical directions give 1.

    Raises:
        InvalidInputError: If `X` has fewer than 2 rows, or a zero row (after centring if `center`).
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> metrics.mean_cosine_similarity(torch.ones(5, 3))
        1.0
    """
    points = _as_points(X, min_points=2)
    if center:
        points = points - points.mean(dim=0, keepdim=True)
    points = scaled_by_power_of_two(points, dim=1)  # cosines ignore each row's scale; squares stay in range
    inverse_norms = _inverse_row_norms(points, name="X (centred)" if center else "X")
    n = points.shape[0]
    sum_of_units = inverse_norms @ points  # a mat-vec: the unit rows are never materialised
    mean = (sum_of_units @ sum_of_units - n) / (n * (n - 1))
    return float(mean.clamp(-1.0, 1.0))


# ---------------------------------------------------------------------------------------------- IsoScore
def isoscore_from_covariance(cov: Covariance) -> Float[torch.Tensor, ""]:
    """IsoScore (Rudman et al., 2022) of a distribution given its (d, d) covariance.

    IsoScore normalises the eigenvalues lambda of the covariance to the norm of (1, ..., 1), measures their
    distance to it (the isotropy defect) and rescales it to [0, 1]. The algorithm simplifies exactly to

        IsoScore = (PR - 1) / (d - 1),    PR = (sum_i lambda_i)^2 / sum_i lambda_i^2 = tr(C)^2 / ||C||_F^2,

    the participation ratio PR of the spectrum, which we compute from the trace and the Frobenius norm (no
    eigendecomposition, differentiable everywhere the trace is positive). This equals the eigenvalue formula of
    the PyPI `isoscore` package for any symmetric positive semi-definite `cov`. 1 means isotropic (all variances
    equal); 0 means all variance on one direction.

    IsoScore is defined on a covariance, i.e. on centred data; an uncentred second moment gives the IsoScore of
    the second moment instead. Only the symmetric part of `cov` is used.

    Args:
        cov: Covariance matrix, shape (d, d), symmetric positive semi-definite.

    Returns:
        A 0-d float64 tensor on `cov`'s device (`float(...)` for a number). By convention 1.0 when d = 1.

    Raises:
        InvalidInputError: If `cov` is not square, or its trace is not positive (zero variance: undefined).
        EmptyInputError: If `cov` is empty.
        NonFiniteError: If `cov` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> float(metrics.isoscore_from_covariance(torch.eye(4)))
        1.0
    """
    matrix = _as_covariance(cov)
    return _isoscore_of_symmetric(matrix)


def _isoscore_of_symmetric(matrix: Float[torch.Tensor, "d d"]) -> Float[torch.Tensor, ""]:
    return _isoscore_of_trace_and_norm(torch.diagonal(matrix).sum(), (matrix * matrix).sum(), matrix.shape[0])


def _isoscore_of_trace_and_norm(
    trace: Float[torch.Tensor, "*r"], frobenius_squared: Float[torch.Tensor, "*r"], d: int
) -> Float[torch.Tensor, "*r"]:
    """(PR - 1) / (d - 1) with PR = tr(C)^2 / ||C||_F^2; 1 when d = 1. Elementwise over traces and norms of any shape."""
    if not bool((trace > 0).all()):
        raise InvalidInputError(
            f"the covariance has trace {float(trace.min()):.3g}: the cloud has no variance (all points equal?), "
            "so its isotropy is undefined."
        )
    if d == 1:
        return torch.ones(trace.shape, dtype=torch.float64, device=trace.device)
    participation_ratio = trace**2 / frobenius_squared
    return (participation_ratio - 1) / (d - 1)


def isoscore(X: Points) -> float:
    """IsoScore (Rudman et al., 2022) of a point cloud: how uniformly its variance fills all d dimensions.

    Rows are points, as in the PyPI `isoscore` 2.0.1 (`IsoScore.IsoScore(X)`; releases before 2.0 took the
    transpose). Computed as `isoscore_from_covariance` of the unbiased sample covariance; see there for the
    formula. With n <= d the covariance has rank at most n - 1, which caps IsoScore at (n - 2) / (d - 1): use
    `isoscore_star` for small samples.

    Args:
        X: Points, shape (n, d). Constant columns are fine (they are zero-variance directions).

    Returns:
        IsoScore in [0, 1]: about 1 for an isotropic Gaussian with n >> d, 0 for points on a line. 1.0 when d = 1.

    Raises:
        InvalidInputError: If `X` has fewer than 2 rows, or all its rows are equal (no variance).
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(2000, 3, generator=torch.Generator().manual_seed(0))
        >>> metrics.isoscore(X) > 0.99
        True
    """
    points = scaled_by_power_of_two(_as_points(X, min_points=2))  # scale-free; squares stay in range
    return float(_isoscore_of_symmetric(_sample_covariance(points)))


# ---------------------------------------------------------------------------------------------- IsoScore*
def oas_shrinkage(cov: Covariance, *, n: int) -> float:
    """Oracle Approximating Shrinkage intensity (Chen et al., 2010) toward the scaled identity.

    The shrinkage rho in [0, 1] that approximately minimises the expected squared error of
    (1 - rho) cov + rho (tr(cov) / d) I for Gaussian data, from the covariance and the sample size alone (as
    `sklearn.covariance.OAS`). Close to 0 when n >> d, larger when n is small next to d.

    Args:
        cov: Sample covariance, shape (d, d). Its scale does not matter.
        n: Number of points the covariance was estimated from.

    Returns:
        The shrinkage intensity, a float in [0, 1] (1.0 when the covariance is already a scaled identity).

    Raises:
        InvalidInputError: If `n` < 2 or `cov` is not square.
        NonFiniteError: If `cov` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> metrics.oas_shrinkage(torch.eye(4), n=100)  # already a scaled identity: shrink all the way
        1.0
        >>> cov = torch.diag(torch.tensor([4.0, 1.0, 0.5, 0.1]))
        >>> metrics.oas_shrinkage(cov, n=10_000) < 0.01 < metrics.oas_shrinkage(cov, n=5)
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
    cov: Covariance,
    *,
    n: int,
    zeta: float | str = DEFAULT_ZETA,
    C0: Covariance | None = None,
) -> Float[torch.Tensor, ""]:
    """IsoScore* (Rudman & Eickhoff, 2024, "Stable Anisotropic Regularization") from a sample covariance.

    IsoScore* is IsoScore computed on the shrunk covariance (RDA-style shrinkage)

        C_zeta = (1 - zeta) * cov + zeta * C0,

    which is full rank, hence meaningful, even when the n points are fewer than the d dimensions. zeta = 0 gives
    plain IsoScore. As in the reference code (`I-STAR/regularizers.py` of bcbi-edu/p_eickhoff_isoscore), `cov`
    should be the unbiased sample covariance (`torch.cov(X.T)`) when you pass your own `C0`, since the two are
    mixed as they are.

    Our choices, where the paper leaves one to the user:

    - `C0=None` shrinks toward the scaled identity (tr(cov) / d) I: the identity recommended by the reference
      code when no larger sample is available, scaled to the cloud's mean variance so that IsoScore* stays scale
      invariant (with the bare identity it would depend on the units). The trace is preserved by the shrinkage.
      The authors' own C0 is the covariance of a large sample of the same representations (250k points); pass
      that if you have it.
    - `zeta=0.2` (`DEFAULT_ZETA`) is the shrinkage of the authors' I-STAR example run; their evaluation script
      uses 0.75 with a data covariance as C0. Toward the scaled identity a large zeta pulls every cloud toward
      IsoScore* = 1, so we keep the smaller value. `zeta="oas"` picks zeta from the data with `oas_shrinkage`
      (near 0 when n >> d; treated as a constant by autograd); this is why `n` is needed.

    Computed, as `isoscore_from_covariance`, from tr(C_zeta) and ||C_zeta||_F: differentiable with respect to
    `cov` (and to the points behind it).

    Args:
        cov: Sample covariance, shape (d, d). Only its symmetric part is used.
        n: Number of points the covariance was estimated from (>= 2).
        zeta: Shrinkage in [0, 1], or "oas" for the Oracle Approximating Shrinkage intensity.
        C0: Shrinkage target, shape (d, d), symmetric positive semi-definite; None for (tr(cov) / d) I.

    Returns:
        A 0-d float64 tensor on `cov`'s device, in [0, 1]. 1.0 when d = 1.

    Raises:
        InvalidInputError: If zeta is outside [0, 1] or an unknown string, n < 2, `C0` has another shape than
            `cov`, or the shrunk covariance has no variance (trace 0).
        EmptyInputError: If `cov` is empty.
        NonFiniteError: If `cov` or `C0` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(10, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        >>> score = metrics.isoscore_star_from_covariance(torch.cov(X.T), n=10)
        >>> 0.0 < float(score) < 1.0
        True
    """
    matrix = _as_covariance(cov)
    _check_sample_size(n)
    d = matrix.shape[0]
    shrinkage = _resolve_zeta(zeta, matrix, n)
    if C0 is None:
        trace = torch.diagonal(matrix).sum()
        return isoscore_star_from_trace_and_norm(trace, (matrix * matrix).sum(), d, zeta=shrinkage)
    else:
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
    """IsoScore* toward the scaled identity from tr(C) and ||C||_F^2 alone (the default `C0=None` case).

    With C_zeta = (1 - zeta) C + zeta (tr(C) / d) I, tr(C_zeta) = tr(C) and
    ||C_zeta||_F^2 = (1 - zeta)^2 ||C||_F^2 + (2 zeta (1 - zeta) + zeta^2) tr(C)^2 / d, so IsoScore* =
    (PR - 1) / (d - 1) with PR = tr(C)^2 / ||C_zeta||_F^2 needs no matrix. `isoscore_star_from_covariance`
    uses this; so does the gradient probe, which gets the trace and norm of a covariance restricted to a
    subspace's complement in closed form (tr(P^T C P) = tr C - tr(Q^T C Q), ||P^T C P||^2 =
    ||C||^2 - 2 ||C Q||^2 + ||Q^T C Q||^2) instead of forming it.

    Args:
        trace: tr(C), > 0; or a tensor of traces (of several matrices of the same d, scored elementwise).
        frobenius_squared: ||C||_F^2 (of the same shape).
        dim: d, the dimension of C.
        zeta: Shrinkage in [0, 1].

    Returns:
        A float64 tensor in [0, 1] of the traces' shape (0-d for one matrix); 1.0 when d = 1.

    Raises:
        InvalidInputError: If the trace is not positive or d < 1.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> C = torch.diag(torch.tensor([3.0, 1.0, 1.0], dtype=torch.float64))
        >>> a = metrics.isoscore_star_from_trace_and_norm(C.trace(), (C * C).sum(), 3, zeta=0.2)
        >>> b = metrics.isoscore_star_from_covariance(C, n=10, zeta=0.2)
        >>> bool(torch.isclose(a, b))
        True
    """
    trace = torch.as_tensor(trace, dtype=torch.float64)
    frobenius_squared = torch.as_tensor(frobenius_squared, dtype=torch.float64, device=trace.device)
    if dim < 1:
        raise InvalidInputError(f"dim must be >= 1, got {dim}.")
    shrunk = (1 - zeta) ** 2 * frobenius_squared + (2 * zeta * (1 - zeta) + zeta**2) * trace**2 / dim
    return _isoscore_of_trace_and_norm(trace, shrunk, dim)


def _resolve_zeta(zeta: float | str, matrix: Float[torch.Tensor, "d d"], n: int) -> float | torch.Tensor:
    if isinstance(zeta, str):
        if zeta.lower() != "oas":
            raise InvalidInputError(f'zeta must be a float in [0, 1] or "oas", got {zeta!r}.')
        return _oas_of_symmetric(matrix.detach(), n)
    if isinstance(zeta, bool) or not isinstance(zeta, int | float) or not 0.0 <= float(zeta) <= 1.0:
        raise InvalidInputError(f'zeta must be a float in [0, 1] or "oas", got {zeta!r}.')
    return float(zeta)


def isoscore_star(
    X: Points,
    *,
    zeta: float | str = DEFAULT_ZETA,
    C0: Covariance | None = None,
    as_tensor: bool = False,
) -> float | Float[torch.Tensor, ""]:
    """IsoScore* (Rudman & Eickhoff, 2024): IsoScore of the shrunk sample covariance, stable when n < d.

    `isoscore_star_from_covariance` of the unbiased sample covariance of `X`; see there for the definition
    and for the defaults (zeta = 0.2, C0 = None meaning the scaled identity (tr(cov) / d) I: our choices).

    Args:
        X: Points, shape (n, d), n >= 2 (n may be smaller than d).
        zeta: Shrinkage in [0, 1], or "oas" for a data-driven intensity. 0 gives plain IsoScore.
        C0: Shrinkage target covariance, shape (d, d); None for the scaled identity.
        as_tensor: Return a 0-d float64 tensor that keeps the autograd graph of `X` (for a regulariser or a
            gradient check) instead of a float.

    Returns:
        IsoScore* in [0, 1] as a float, or a 0-d tensor if `as_tensor`. 1.0 when d = 1.

    Raises:
        InvalidInputError: If `X` has fewer than 2 rows, zeta is invalid, `C0` has the wrong shape, or the shrunk
            covariance has no variance.
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` or `C0` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(20, 100, generator=torch.Generator().manual_seed(0))
        >>> metrics.isoscore(X) < metrics.isoscore_star(X)
        True
    """
    points = _as_points(X, min_points=2)
    if C0 is None:  # then scale-free: squares kept in range (a given C0 is in the units of X)
        points = scaled_by_power_of_two(points)
    score = isoscore_star_from_covariance(_sample_covariance(points), n=points.shape[0], zeta=zeta, C0=C0)
    return score if as_tensor else float(score)


# ---------------------------------------------------------------------------------------------- partition I(W)
def partition_isotropy(X: Points, *, center: bool = True) -> float:
    """Partition-function isotropy I(W) of Mu & Viswanath (2018, "All-but-the-Top").

    With Z(c) = sum_i exp(c . x_i), I(W) = min_c Z(c) / max_c Z(c) over unit directions c, approximated (as in
    the paper) by the eigenvectors of X^T X. Computed in log space (log Z = logsumexp), so large activations do
    not overflow. Eigenvectors have no sign, so we take both c and -c for each (our choice: the value does not
    depend on the sign LAPACK returns).

    Centring dominates the value (a common mean vector makes Z huge in its direction), so report both: `summary`
    does. I(W) is 1 for an isotropic cloud in the paper's sense and near 0 for an anisotropic one; unlike
    IsoScore it depends on the scale of `X`.

    Args:
        X: Points, shape (n, d).
        center: Subtract the mean point first (I(W) of the centred cloud), and take the eigenvectors of the
            centred X^T X. False gives the uncentred value.

    Returns:
        I(W) in (0, 1]. An all-zero (centred) cloud gives 1.0 (Z is n in every direction).

    Raises:
        InvalidInputError: If `X` has fewer than 2 rows.
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(500, 4, generator=torch.Generator().manual_seed(0))
        >>> metrics.partition_isotropy(X + 10.0, center=False) < metrics.partition_isotropy(X + 10.0)
        True
    """
    points = _as_points(X, min_points=2)
    if center:
        points = points - points.mean(dim=0, keepdim=True)
    scaled = scaled_by_power_of_two(points)  # the same eigenvectors, without overflow in X^T X
    return _partition_isotropy_of(points, scaled.T @ scaled)


def _partition_isotropy_of(points: Float[torch.Tensor, "n d"], gram: Float[torch.Tensor, "d d"]) -> float:
    """I(W) of `points` along the eigenvectors c of `gram` (their X^T X, to any power-of-two scale) and -c.

    One (n, d) projection: Z(-c) sums exp(-c . x_i), the same projections negated.
    """
    _, eigenvectors = torch.linalg.eigh(gram)
    projections = points @ eigenvectors
    log_partition = torch.cat([torch.logsumexp(projections, dim=0), torch.logsumexp(-projections, dim=0)])
    return float(torch.exp(log_partition.min() - log_partition.max()))


# ---------------------------------------------------------------------------------------------- effective rank
def effective_rank(X: Points, *, center: bool = False) -> float:
    """Effective rank (Roy & Vetterli, 2007), a.k.a. RankMe (Garrido et al., 2023), from singular values.

    exp of the Shannon entropy of the normalised **singular values** sigma_i / sum_j sigma_j of `X` (not of the
    eigenvalues of its covariance, which are the squared singular values and give a smaller number). Ranges from
    1 (rank one) to min(n, d) (flat spectrum). Invariant to rotations and to the scale of `X`.

    The singular values are the square roots of the eigenvalues of the smaller Gram matrix (X^T X, or X X^T when
    n < d), in float64: a (min(n, d))^2 eigenvalue problem instead of an SVD of the n x d rows. Eigenvalues below
    the Gram's rounding (min(n, d) * eps * the largest) count as zero, the rank an SVD would show.

    Args:
        X: Points, shape (n, d).
        center: Subtract the mean point first. RankMe does not centre (the default).

    Returns:
        The effective rank, a float in [1, min(n, d)]; 0.0 for an all-zero matrix (its rank).

    Raises:
        EmptyInputError: If `X` is empty.
        InvalidInputError: If `X` is not 2-D.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> round(metrics.effective_rank(torch.eye(8)), 6)
        8.0
    """
    points = _as_points(X)
    if center:
        points = points - points.mean(dim=0, keepdim=True)
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


# ---------------------------------------------------------------------------------------------- rogue / outlier dims
@dataclass(frozen=True)
class RogueDimensions:
    """Per-dimension contributions to the mean cosine similarity (Timkey & van Schijndel, 2021).

    Attributes:
        contributions: (d,) array; entry i is the mean over distinct pairs of u_i v_i / (||u|| ||v||). They sum to
            `mean_cosine`.
        mean_cosine: The exact mean pairwise cosine similarity.
        top_indices: The `top` dimensions with the largest contributions, largest first.
        top_contributions: Their contributions.
        top_share: sum(top contributions) / sum(|contributions|), in [-1, 1]; close to Timkey & van Schijndel's
            share of the expected cosine when the contributions are mostly positive, and still defined when the
            mean cosine is about 0. 0.0 if every contribution is 0.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
        >>> X[:, 5] += 20.0  # one dimension shared by every point dominates the cosine similarity
        >>> rogue = metrics.rogue_dimensions(X, top=1)
        >>> int(rogue.top_indices[0]), rogue.top_share > 0.9
        (5, True)
    """

    contributions: np.ndarray
    mean_cosine: float
    top_indices: np.ndarray
    top_contributions: np.ndarray
    top_share: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (arrays become lists)."""
        return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in asdict(self).items()}


def rogue_dimensions(X: Points, *, top: int = 3, center: bool = False) -> RogueDimensions:
    """Dimensions that dominate cosine similarity ("rogue dimensions", Timkey & van Schijndel, 2021).

    The cosine of two points splits over dimensions: cos(u, v) = sum_i u_i v_i / (||u|| ||v||). The expected
    contribution of dimension i over random pairs is computed exactly over all distinct pairs in O(n d), as in
    `mean_cosine_similarity` (the paper samples pairs).

    Args:
        X: Points, shape (n, d).
        top: How many leading dimensions to report (capped at d).
        center: Subtract the mean point first.

    Returns:
        A `RogueDimensions`.

    Raises:
        InvalidInputError: If `X` has fewer than 2 rows or a zero row, or `top` < 1.
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
        >>> X[:, 5] += 20.0
        >>> int(metrics.rogue_dimensions(X, top=1).top_indices[0])
        5
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidInputError(f"top must be a positive integer, got {top!r}.")
    points = _as_points(X, min_points=2)
    if center:
        points = points - points.mean(dim=0, keepdim=True)
    points = scaled_by_power_of_two(points, dim=1)  # contributions ignore each row's scale; squares stay in range
    inverse_norms = _inverse_row_norms(points, name="X")
    n = points.shape[0]
    sum_of_units = inverse_norms @ points
    squares_of_units = inverse_norms**2 @ points**2
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
class OutlierDimensions:
    """Magnitude outlier dimensions.

    Attributes:
        indices: Outlier dimensions, by decreasing magnitude.
        magnitudes: (d,) array of each dimension's mean absolute value over the points.
        threshold: The magnitude above which a dimension is an outlier: mean + n_std * std of `magnitudes`.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(100, 64, generator=torch.Generator().manual_seed(0))
        >>> X[:, 7] *= 50.0
        >>> outliers = metrics.outlier_dimensions(X)
        >>> outliers.indices.tolist(), bool(outliers.magnitudes[7] > outliers.threshold)
        ([7], True)
    """

    indices: np.ndarray
    magnitudes: np.ndarray
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (arrays become lists)."""
        return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in asdict(self).items()}


def outlier_dimensions(X: Points, *, n_std: float = 3.0) -> OutlierDimensions:
    """Dimensions of unusually large magnitude (outlier dimensions, Kovaleva et al., 2021; Puccetti et al., 2022).

    A dimension is an outlier when its mean absolute value over the points exceeds the mean of that statistic
    over dimensions by more than `n_std` standard deviations (the 3-sigma rule of those papers, applied here to
    the activations' mean magnitude).

    Args:
        X: Points, shape (n, d).
        n_std: How many standard deviations above the mean makes an outlier.

    Returns:
        An `OutlierDimensions`; `indices` is empty when no dimension stands out (e.g. all magnitudes equal).

    Raises:
        InvalidInputError: If `n_std` is not a positive number.
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(100, 64, generator=torch.Generator().manual_seed(0))
        >>> X[:, 7] *= 50.0
        >>> metrics.outlier_dimensions(X).indices.tolist()
        [7]
    """
    if isinstance(n_std, bool) or not isinstance(n_std, int | float) or not n_std > 0:
        raise InvalidInputError(f"n_std must be a positive number, got {n_std!r}.")
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


# ---------------------------------------------------------------------------------------------- summary
def summary(X: Points, *, zeta: float | str = DEFAULT_ZETA, top: int = 3) -> dict[str, float]:
    """Every isotropy measure of this module on one point cloud, as a dict of plain floats.

    Keys: n, d, mean_cosine, mean_cosine_centered, isoscore, isoscore_star, partition_isotropy (centred),
    partition_isotropy_uncentered, effective_rank, rogue_top_share, n_outlier_dimensions.

    Args:
        X: Points, shape (n, d), n >= 2, no zero row.
        zeta: IsoScore* shrinkage (see `isoscore_star_from_covariance`).
        top: Number of rogue dimensions whose share is reported.

    Returns:
        A dict of floats (n, d and n_outlier_dimensions are whole numbers).

    Raises:
        InvalidInputError: As the individual measures (fewer than 2 points, zero rows, no variance).
        EmptyInputError: If `X` is empty.
        NonFiniteError: If `X` holds NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> X = torch.randn(300, 8, generator=torch.Generator().manual_seed(0))
        >>> sorted(metrics.summary(X))[:3]
        ['d', 'effective_rank', 'isoscore']
    """
    points = _as_points(X, min_points=2)
    n, d = points.shape
    scaled = scaled_by_power_of_two(points)  # what isoscore, isoscore_star and the uncentred I(W) each scale
    covariance = _sample_covariance(scaled)
    gram = scaled.T @ scaled  # the uncentred I(W)'s, and effective_rank's when n >= d
    centred = points - points.mean(dim=0, keepdim=True)
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
