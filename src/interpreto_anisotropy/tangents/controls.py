# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Matched-rank normal controls, uniformly random subspaces, and the null statistics they feed.

A normal control of a rank-k tangent subspace Q_T is a uniformly random k-dimensional subspace of the
orthogonal complement of Q_T (the paper's control). Ranking the tangent's gradient energy among R such controls
gives a Monte-Carlo p-value that is only approximate: the controls all lie in Q_T's complement, so under the null
(a tangent uniformly random and independent of the gradients) they are not exchangeable with Q_T, and the p-value
is anti-conservative when k / d is not small. Ranking it among R uniformly random k-subspaces of the whole of R^d
(`random_subspace_bases`) gives an exact p-value instead: under that null the tangent and the random subspaces
are exchangeable. The expected energy of a control, and the mean and standard deviation of the energy share of a
random subspace (`chance_std`), are known in closed form.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> ia.controls.p_value(0.9, [0.1, 0.2, 0.3])
    0.25
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float

from ..errors import DegenerateStatisticsWarning, InvalidInputError
from .subspace import Subspace

__all__ = [
    "normal_controls",
    "normal_control_bases",
    "check_control_room",
    "largest_control_rank",
    "warn_if_anti_conservative",
    "random_subspace_bases",
    "p_value",
    "analytic_null",
    "chance_std",
]


def _check_room(subspace: Subspace, n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"The number of controls must be a positive integer, got {n!r}.")
    d, k = subspace.dim, subspace.rank
    if n * d * k * 8 > MAX_CONTROL_BYTES:
        raise InvalidInputError(
            f"n_controls={n} rank-{k} controls in R^{d} need {n * d * k * 8 / 2**30:.1f} GiB (float64 draws); the "
            f"limit is {MAX_CONTROL_BYTES / 2**30:.0f} GiB. Use fewer controls (the paper uses 20)."
        )
    check_control_room(k, d)


def largest_control_rank(d: int) -> int:
    """The largest rank k whose normal controls are random in R^d: 2k < d, so k <= (d - 1) // 2.

    Examples:
        >>> largest_control_rank(64), largest_control_rank(65)
        (31, 32)
    """
    return (d - 1) // 2


def check_control_room(k: int, d: int, *, option: str = "nb_concepts") -> None:
    """Refuse a rank k whose normal controls in R^d would not be random: 2k >= d.

    The complement of a rank-k tangent has d - k dimensions. With 2k > d it holds no rank-k subspace; with 2k = d it
    holds exactly one, itself, so every "random" control would be the whole complement and the R controls one
    subspace (under the null, the normal-control p-values fall at or below 0.05 about half the time at d = 32).

    Args:
        k: The tangent's rank.
        d: The dimension of the space it lives in.
        option: The option that set k, named in the message.

    Raises:
        InvalidInputError: 2k >= d, naming k, d and the largest allowed k.

    Examples:
        >>> check_control_room(16, 32)
        Traceback (most recent call last):
        ...
        interpreto_anisotropy.errors.InvalidInputError: nb_concepts=16 in R^32 (d=32): ...
    """
    if 2 * k >= d:
        raise InvalidInputError(
            f"{option}={k} in R^{d} (d={d}): matched-rank normal controls need 2k < d, since the {d - k}-dimensional "
            f"complement of a rank-{k} tangent must hold more than one rank-{k} subspace. Use {option} <= "
            f"{largest_control_rank(d)} (the largest k with 2k < d)."
        )


#: P(p <= 0.05) in % under the null for the normal-control p-value (`p_value`, R = 20 controls; exact: 4.76 %), as
#: `benchmarks/calibration.py` measured it (2000 random tangents, d = 64, and d = 32 for the last row), by k / d:
#: ((k / d, %), ...). The anisotropy share's (`anisotropy_share_p_value`) is within a point or two of it.
NORMAL_CONTROL_NULL_RATES = ((1 / 32, 5.3), (1 / 16, 6.7), (1 / 8, 8.4), (1 / 4, 11.6), (3 / 8, 21.5), (15 / 32, 37.9))
#: From this k / d on (where the measured rate reaches 1.5 times the exact one), a probe warns.
ANTI_CONSERVATIVE_FROM = 0.1


def warn_if_anti_conservative(k: int, d: int, *, stacklevel: int = 2) -> None:
    """Warn when the normal-control p-values of a rank-k tangent in R^d are known anti-conservative.

    Args:
        k: The tangent's rank.
        d: The dimension.
        stacklevel: Passed to `warnings.warn`.

    Warns:
        DegenerateStatisticsWarning: k / d >= `ANTI_CONSERVATIVE_FROM`, quoting the rate measured at the nearest
            tabulated k / d at or below it (`NORMAL_CONTROL_NULL_RATES`).
    """
    if k / d < ANTI_CONSERVATIVE_FROM:
        return
    ratio, rate = max(row for row in NORMAL_CONTROL_NULL_RATES if row[0] <= k / d)
    warnings.warn(
        f"At k/d = {k}/{d} = {k / d:.3f} the normal-control p-values (p_value, anisotropy_share_p_value: the "
        f"paper's) are anti-conservative: for a random tangent under the null, P(p <= 0.05) was measured at "
        f"{rate:.1f} % at k/d = {ratio:.3f}, and more at larger k/d (with 20 controls, where an exact p-value gives "
        "4.8 %). Test with p_value_exact and anisotropy_p_value_exact (docs/statistics.md), or use a smaller "
        "nb_concepts.",
        DegenerateStatisticsWarning,
        stacklevel=stacklevel + 1,
    )


MAX_CONTROL_BYTES = 2 * 2**30  # the float64 draws of all controls of one tangent
_CONTROL_STREAM = 0xC0A7_5EED
_RANDOM_STREAM = 0x5A4D_0E55


def _stream_seed(seed: int, stream: int) -> int:
    """A generator seed derived from `seed` and a stream tag: the streams differ from each other and from `seed`.

    `Subspace.random(d, k, seed=s)` orthonormalises the first d*k Gaussians of `manual_seed(s)`; drawing the
    controls from the same stream would make the first control's draw lie inside the tangent, so its projection
    onto the complement would be rounding noise and the "control" would not be orthogonal to the tangent. Likewise
    the first random subspace would be the tangent itself, and the random subspaces would repeat the controls' draws.
    """
    return int(np.random.SeedSequence([int(seed) & 0xFFFF_FFFF_FFFF_FFFF, stream]).generate_state(1)[0])


def _control_stream_seed(seed: int) -> int:
    """The controls' generator seed (see `_stream_seed`)."""
    return _stream_seed(seed, _CONTROL_STREAM)


def normal_control_bases(subspace: Subspace, n: int = 20, *, seed: int = 0) -> Float[torch.Tensor, "n d k"]:
    """Stacked orthonormal bases of `n` random rank-k subspaces inside the complement of `subspace`.

    Each basis is a Gaussian (d, k) draw projected onto the orthogonal complement (twice, for float
    accuracy) and orthonormalised by QR with a sign fix, which makes it Haar-uniform within the complement.
    The Gaussian draw is made on the CPU from `seed`, so it is the same on every device; the projection and QR
    run in float64 on the subspace's device, and the bases come back in the subspace's dtype.

    Args:
        subspace: The tangent subspace Q_T, shape (d, k).
        n: Number of controls R.
        seed: Random seed.

    Returns:
        Tensor of shape (n, d, k).

    Raises:
        InvalidInputError: If n < 1 or 2k >= d (the complement has no room for random rank-k controls).
    """
    _check_room(subspace, n)
    d, k = subspace.dim, subspace.rank
    basis = subspace.basis.detach().double()
    generator = torch.Generator().manual_seed(_control_stream_seed(seed))
    draws = torch.randn(n, d, k, generator=generator, dtype=torch.float64).to(basis.device)
    for _ in range(2):
        draws = draws - basis @ (basis.T @ draws)
    bases, triangular = torch.linalg.qr(draws)
    bases = bases * torch.sign(torch.diagonal(triangular, dim1=-2, dim2=-1)).unsqueeze(-2)
    return bases.to(subspace.basis.dtype)


def random_subspace_bases(
    d: int,
    k: int,
    n: int = 20,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Float[torch.Tensor, "n d k"]:
    """Stacked orthonormal bases of `n` uniformly random (Haar) k-dimensional subspaces of the whole of R^d.

    The reference set of the exact p-value (`ProbeResult.p_value_exact`): under the null that the tangent is a
    uniformly random k-subspace independent of the gradients, the tangent and these subspaces are independent
    draws of one distribution, hence exchangeable, so the rank of the tangent's energy among theirs is exactly
    uniform. Each basis is a Gaussian (d, k) draw orthonormalised by QR with a sign fix. The draws come from a CPU
    generator seeded from a stream derived from `seed` (not `seed` itself, nor the controls' stream), so they are
    the same on every device and independent of `Subspace.random(d, k, seed=seed)` and of the normal controls.

    Args:
        d: Ambient dimension.
        k: Rank of each subspace, 1 <= k <= d.
        n: Number of subspaces R.
        seed: Random seed, an integer in [0, 2**32).
        device: Where the bases are returned.
        dtype: Their dtype (the QR runs in float64).

    Returns:
        Tensor of shape (n, d, k) with orthonormal columns.

    Raises:
        InvalidInputError: If n < 1, k is not in [1, d], or the float64 draws would exceed 2 GiB.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> bases = ia.controls.random_subspace_bases(64, 8, 20, seed=0)
        >>> tuple(bases.shape)
        (20, 64, 8)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"n_random (the number of random subspaces) must be a positive integer, got {n!r}.")
    if not (isinstance(d, int) and isinstance(k, int)) or not 1 <= k <= d:
        raise InvalidInputError(f"Random subspaces need integers 1 <= k <= d, got d={d}, k={k}.")
    if n * d * k * 8 > MAX_CONTROL_BYTES:
        raise InvalidInputError(
            f"n_random={n} random rank-{k} subspaces of R^{d} need {n * d * k * 8 / 2**30:.1f} GiB (float64 draws); "
            f"the limit is {MAX_CONTROL_BYTES / 2**30:.0f} GiB. Use fewer random subspaces."
        )
    generator = torch.Generator().manual_seed(_stream_seed(seed, _RANDOM_STREAM))
    draws = torch.randn(n, d, k, generator=generator, dtype=torch.float64)
    bases, triangular = torch.linalg.qr(draws)
    bases = bases * torch.sign(torch.diagonal(triangular, dim1=-2, dim2=-1)).unsqueeze(-2)
    return bases.to(device=device, dtype=dtype)


def normal_controls(subspace: Subspace, n: int = 20, *, seed: int = 0) -> list[Subspace]:
    """Matched-rank normal controls: `n` random k-dimensional subspaces orthogonal to `subspace`.

    Args:
        subspace: The tangent subspace Q_T.
        n: Number of controls (the paper uses 20, so the smallest p-value is 1/21).
        seed: Random seed; the same seed gives the same controls.

    Returns:
        A list of `n` `Subspace`s, each with |Q_T^T Q_N| ~ 0 and Q_N^T Q_N = I.

    Raises:
        InvalidInputError: If n < 1 or 2k >= d.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> tangent = ia.Subspace.random(64, 4, seed=0)
        >>> controls = ia.controls.normal_controls(tangent, n=20, seed=0)
        >>> len(controls), controls[0].rank
        (20, 4)
    """
    bases = normal_control_bases(subspace, n, seed=seed)
    return [
        Subspace(
            basis,
            name=f"control-{index}",
            method="normal_control",
            split_point=subspace.split_point,
            step=subspace.step,
            info={"seed": seed, "index": index},
            check=False,
        )
        for index, basis in enumerate(bases)
    ]


def p_value(observed: float, controls: Sequence[float] | np.ndarray) -> float:
    """One-sided Monte-Carlo p-value: (1 + #{controls >= observed}) / (R + 1).

    With R = 20 controls the smallest attainable value is 1/21 ~= 0.048. Ties count against the observed value.
    The p-value is exact (P(p <= j / (R + 1)) = j / (R + 1) under the null) only when the observed statistic and
    the R reference statistics are exchangeable under the null: true of uniformly random subspaces of R^d
    (`ProbeResult.p_value_exact`), not of the normal controls, which all lie in the tangent's complement
    (`ProbeResult.p_value` is approximate, and anti-conservative when k / d is not small).

    Args:
        observed: The tangent's statistic (e.g. its energy share).
        controls: The same statistic for each of the R controls.

    Returns:
        A float in [1 / (R + 1), 1].

    Raises:
        InvalidInputError: If there are no controls or a value is not finite.

    Examples:
        >>> p_value(0.5, [0.1, 0.2, 0.6])
        0.5
    """
    values = np.asarray(controls, dtype=np.float64).ravel()
    if values.size == 0:
        raise InvalidInputError("A p-value needs at least one control statistic.")
    if not (np.isfinite(values).all() and np.isfinite(observed)):
        raise InvalidInputError("p_value got a non-finite statistic.")
    return float((1 + np.count_nonzero(values >= observed)) / (values.size + 1))


def analytic_null(energy_share: float, d: int, k: int) -> float:
    """Expected energy share of a uniformly random rank-k control in the complement: (1 - E) k / (d - k).

    The energy outside the tangent, 1 - E, is spread over a (d - k)-dimensional complement, of which a random
    k-dimensional subspace holds on average a fraction k / (d - k).

    Args:
        energy_share: The tangent's energy share E in [0, 1].
        d: Ambient dimension.
        k: Rank of the tangent (and of each control).

    Returns:
        The expected control energy share.

    Raises:
        InvalidInputError: If not 1 <= k < d or E is outside [0, 1].

    Examples:
        >>> analytic_null(0.5, 64, 4)
        0.03333333333333333
    """
    if not 1 <= k < d:
        raise InvalidInputError(f"Need 1 <= k < d, got d={d}, k={k}.")
    if not 0.0 <= energy_share <= 1.0 + 1e-9:
        raise InvalidInputError(f"An energy share lies in [0, 1], got {energy_share}.")
    return (1.0 - energy_share) * k / (d - k)


def chance_std(second_moment: Float[torch.Tensor, "d d"] | np.ndarray, k: int) -> float:
    """Standard deviation of the energy share of a uniformly random rank-k subspace, for fixed gradients.

    The energy share of a subspace with orthogonal projector P is sum_i ||P g_i||^2 / sum_i ||g_i||^2
    = tr(P S) / tr(S), with S = sum_i g_i g_i^T / n the uncentred second moment of the gradient rows. For P a
    uniformly random rank-k projector of R^d and M = S / tr(S) (so tr(M) = 1),

        E[tr(P M)] = k / d,    Var[tr(P M)] = 2 k (d - k) / (d (d - 1) (d + 2)) * (tr(M^2) - 1 / d).

    (In the eigenbasis of M, tr(P M) = sum_i lambda_i P_ii; each P_ii follows Beta(k/2, (d-k)/2), of variance
    v = 2 k (d - k) / (d^2 (d + 2)), and sum_i P_ii = k fixes their covariance at -v / (d - 1).) The tests check
    both moments by Monte Carlo. tr(M^2) - 1/d is 0 for isotropic gradients (every subspace then holds exactly
    k / d) and at most 1 - 1/d (rank-one gradients).

    Args:
        second_moment: S, shape (d, d), symmetric positive semi-definite (only its symmetric part is used;
            any positive multiple gives the same value).
        k: Rank of the random subspace, 1 <= k <= d.

    Returns:
        The standard deviation, a float >= 0; 0.0 for k = d or isotropic gradients.

    Raises:
        InvalidInputError: If `second_moment` is not square, its trace is not positive, or k is not in [1, d].

    Examples:
        >>> import torch
        >>> round(chance_std(torch.eye(8), 2), 12)  # isotropic gradients: every subspace holds exactly k/d
        0.0
        >>> S = torch.diag(torch.tensor([1.0, 0.0]))  # one direction, d = 2, k = 1: Var(cos^2 theta) = 1/8
        >>> round(chance_std(S, 1) ** 2, 12)
        0.125
    """
    matrix = torch.as_tensor(second_moment).detach().to(torch.float64)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise InvalidInputError(f"second_moment must be a square (d, d) matrix, got shape {tuple(matrix.shape)}.")
    d = matrix.shape[0]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d:
        raise InvalidInputError(f"Need an integer rank 1 <= k <= d, got d={d}, k={k!r}.")
    trace = torch.trace(matrix)
    if not bool(trace > 0):
        raise InvalidInputError(
            f"second_moment has trace {float(trace):.3g}: the gradients are all zero, so their energy shares are "
            "undefined. Probe texts whose loss has a gradient at this split point."
        )
    if d == 1:
        return 0.0
    normalised = (matrix + matrix.T) / (2 * trace)
    # tr(M^2) - 1/d = ||M - I/d||_F^2 when tr(M) = 1: no cancellation, exactly 0 for isotropic gradients
    spread = float((normalised - torch.eye(d, dtype=torch.float64, device=matrix.device) / d).square().sum())
    variance = 2.0 * k * (d - k) / (d * (d - 1) * (d + 2)) * spread
    return variance**0.5
