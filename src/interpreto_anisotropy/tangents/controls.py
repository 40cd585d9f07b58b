# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Matched-rank normal controls, uniformly random subspaces, and the null statistics they feed.

Why ranking a tangent among its normal controls gives an approximate p-value, and among uniformly random subspaces of
R^d an exact one: docs/statistics.md.

Examples:
    >>> ia.controls.p_value(0.9, [0.1, 0.2, 0.3])
    0.25
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from jaxtyping import Float

from ..commons.options import check_positive_int
from ..commons.tensors import copied_to
from ..errors import DegenerateStatisticsWarning, InvalidInputError
from .subspace import Subspace, haar_orthonormal

__all__ = [
    "normal_controls",
    "normal_control_bases",
    "check_control_room",
    "largest_control_rank",
    "warn_if_anti_conservative",
    "random_subspace_bases",
    "random_subspace_chunks",
    "random_chunk_sizes",
    "p_value",
    "analytic_null",
    "chance_std",
]

MAX_CONTROL_BYTES = 2 * 2**30  # the float64 draws of all controls of one tangent
_CONTROL_STREAM = 0xC0A7_5EED
_RANDOM_STREAM = 0x5A4D_0E55


def _check_memory(n: int, d: int, k: int, option: str, what: str, advice: str) -> None:
    """Refuse `n` (d, k) draws whose float64 values would exceed `MAX_CONTROL_BYTES`."""
    if n * d * k * 8 > MAX_CONTROL_BYTES:
        raise InvalidInputError(f"{option}={n} {what} need {n * d * k * 8 / 2**30:.1f} GiB over 2 GiB: {advice}")


def largest_control_rank(d: int) -> int:
    """The largest rank k whose normal controls are random in R^d: 2k < d, so k <= (d - 1) // 2."""
    return (d - 1) // 2


def check_control_room(k: int, d: int, *, option: str = "nb_concepts") -> None:
    """Refuse (naming `option`) a rank k whose normal controls in R^d would not be random: 2k >= d."""
    if k > largest_control_rank(d):
        raise InvalidInputError(f"{option}={k} in R^{d} (d={d}): controls need 2k < d, so {option} <= {(d - 1) // 2}.")


#: P(p <= 0.05) in % under the null for the normal-control p-value (`p_value`, R = 20 controls; exact: 4.76 %), as
#: `benchmarks/calibration.py` measured it (2000 random tangents, d = 64, and d = 32 for the last row), by k / d:
#: ((k / d, %), ...). The anisotropy share's (`anisotropy_share_p_value`) is within a point or two of it.
NORMAL_CONTROL_NULL_RATES = ((1 / 32, 5.3), (1 / 16, 6.7), (1 / 8, 8.4), (1 / 4, 11.6), (3 / 8, 21.5), (15 / 32, 37.9))
#: From this k / d on (where the measured rate reaches 1.5 times the exact one), a probe warns.
ANTI_CONSERVATIVE_FROM = 0.1


def warn_if_anti_conservative(k: int, d: int, *, stacklevel: int = 2) -> None:
    """Warn from k / d >= `ANTI_CONSERVATIVE_FROM`, quoting the rate measured nearest below it."""
    if k / d < ANTI_CONSERVATIVE_FROM:
        return
    ratio, rate = max(row for row in NORMAL_CONTROL_NULL_RATES if row[0] <= k / d)
    message = f"At k/d = {k}/{d} = {k / d:.3f} the normal-control p-values are anti-conservative (P(p <= 0.05) = {rate:.1f} % at k/d = {ratio:.3f} under the null): test with p_value_exact (docs/statistics.md), or a smaller nb_concepts."
    warnings.warn(message, DegenerateStatisticsWarning, stacklevel=stacklevel + 1)


def _generator(seed: int, stream: int) -> torch.Generator:
    """A CPU generator seeded from `seed` and a stream tag."""
    derived = int(np.random.SeedSequence([int(seed) & 0xFFFF_FFFF_FFFF_FFFF, stream]).generate_state(1)[0])
    return torch.Generator().manual_seed(derived)


def normal_control_bases(subspace: Subspace, n: int = 20, *, seed: int = 0) -> Float[torch.Tensor, "n d k"]:
    """Bases (n, d, k) of `n` Haar-random rank-k subspaces of the complement of `subspace`, CPU-drawn from `seed`."""
    d, k = subspace.dim, subspace.rank
    check_positive_int("n_controls", n)
    _check_memory(n, d, k, "n_controls", f"rank-{k} controls in R^{d}", "use fewer controls (the paper uses 20).")
    check_control_room(k, d)
    basis = subspace.basis.detach().double()
    gaussians = torch.randn(n, d, k, generator=_generator(seed, _CONTROL_STREAM), dtype=torch.float64)  # on the CPU
    draws = copied_to(gaussians, basis.device)
    for _ in range(2):
        draws = draws - basis @ (basis.T @ draws)
    return haar_orthonormal(draws).to(subspace.basis.dtype)


#: The bytes of one chunk of random subspaces drawn and scored at once: the exact p-value's memory, whatever R'.
RANDOM_CHUNK_BYTES = 64 * 2**20
#: A chunk holds a multiple of this many subspaces: torch's CPU normals come in runs of 16 values, so chunks of
#: 16 m draws continue one stream exactly as a single draw of all of them would.
_CHUNK_MULTIPLE = 16


def random_chunk_sizes(d: int, k: int, n: int, max_bytes: int | None = None) -> list[int]:
    """How `random_subspace_chunks` splits `n` draws: multiples of 16 subspaces of at most `max_bytes` each."""
    check_positive_int("n_random", n)
    if not (isinstance(d, int) and isinstance(k, int)) or not 1 <= k <= d:
        raise InvalidInputError(f"Random subspaces need integers 1 <= k <= d, got d={d}, k={k}.")
    per_subspace = 4 * d * k * 8  # float64 draw, basis and products
    max_bytes = RANDOM_CHUNK_BYTES if max_bytes is None else max_bytes
    size = max(_CHUNK_MULTIPLE, max_bytes // per_subspace // _CHUNK_MULTIPLE * _CHUNK_MULTIPLE)
    sizes = [size] * (n // size) or [0]
    sizes[-1] += n - size * (n // size)  # a short last chunk would draw its normals another way (fewer than 16 values)
    return sizes


def random_subspace_chunks(
    d: int, k: int, n: int, *, seed: int = 0, device: torch.device | str = "cpu", max_bytes: int | None = None
) -> Iterator[Float[torch.Tensor, "c d k"]]:
    """The float64 bases of `random_subspace_bases(d, k, n, seed=seed)`, one chunk (c, d, k) at a time on `device`."""
    generator = _generator(seed, _RANDOM_STREAM)  # one CPU stream, whatever the chunks (`random_chunk_sizes`)
    for size in random_chunk_sizes(d, k, n, max_bytes):
        yield haar_orthonormal(copied_to(torch.randn(size, d, k, generator=generator, dtype=torch.float64), device))


def random_subspace_bases(
    d: int,
    k: int,
    n: int = 20,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Float[torch.Tensor, "n d k"]:
    """Stacked orthonormal bases of `n` uniformly random (Haar) k-subspaces of R^d: the exact p-value's reference.

    Drawn on the CPU from `seed` (the same on every device), independently of `Subspace.random` and of the controls.

    Args:
        d: Ambient dimension.
        k: Rank of each subspace, 1 <= k <= d.
        n: Number of subspaces R'.
        seed: Random seed, an integer in [0, 2**32).
        device: Where the bases are returned.
        dtype: Their dtype (the QR runs in float64).

    Returns:
        Tensor of shape (n, d, k) with orthonormal columns.

    Raises:
        InvalidInputError: n < 1, k not in [1, d], or float64 draws over 2 GiB.

    Examples:
        >>> bases = ia.controls.random_subspace_bases(64, 8, 20, seed=0)
        >>> tuple(bases.shape)
        (20, 64, 8)
    """
    random_chunk_sizes(d, k, n)  # checks n, d and k
    _check_memory(n, d, k, "n_random", f"random rank-{k} subspaces of R^{d}", "use fewer random subspaces.")
    chunks = random_subspace_chunks(d, k, n, seed=seed, device=device)
    return torch.cat([chunk.to(dtype) for chunk in chunks])


def normal_controls(subspace: Subspace, n: int = 20, *, seed: int = 0) -> list[Subspace]:
    """Matched-rank normal controls: `n` random k-dimensional subspaces orthogonal to `subspace`.

    Args:
        subspace: The tangent subspace Q_T.
        n: Number of controls (the paper uses 20, so the smallest p-value is 1/21).
        seed: Random seed; the same seed gives the same controls.

    Returns:
        A list of `n` `Subspace`s, each with |Q_T^T Q_N| ~ 0 and Q_N^T Q_N = I.

    Examples:
        >>> tangent = ia.Subspace.random(64, 4, seed=0)
        >>> controls = ia.controls.normal_controls(tangent, n=20, seed=0)
        >>> len(controls), controls[0].rank
        (20, 4)
    """
    shared = {"method": "normal_control", "split_point": subspace.split_point, "step": subspace.step, "check": False}
    bases = enumerate(normal_control_bases(subspace, n, seed=seed))
    return [Subspace(basis, name=f"control-{i}", info={"seed": seed, "index": i}, **shared) for i, basis in bases]


def p_value(observed: float, controls: Sequence[float] | np.ndarray) -> float:
    """One-sided Monte-Carlo p-value (1 + #{controls >= observed}) / (R + 1); ties count against `observed`.

    Exact only when `observed` and the controls are exchangeable under the null (docs/statistics.md).

    Args:
        observed: The tangent's statistic (e.g. its energy share).
        controls: The same statistic for each of the R controls.

    Returns:
        A float in [1 / (R + 1), 1].

    Raises:
        InvalidInputError: No controls, or a value that is not finite.

    Examples:
        >>> p_value(0.5, [0.1, 0.2, 0.6])
        0.5
    """
    values = np.asarray(controls, dtype=np.float64).ravel()
    if values.size == 0:
        raise InvalidInputError("A p-value needs at least one control statistic.")  # errors.py's example prints it
    if not (np.isfinite(values).all() and np.isfinite(observed)):
        raise InvalidInputError("p_value got a non-finite statistic.")
    return float((1 + np.count_nonzero(values >= observed)) / (values.size + 1))


def analytic_null(energy_share: float, d: int, k: int) -> float:
    """Expected energy share (1 - E) k / (d - k) of a uniformly random rank-k control in the complement.

    Args:
        energy_share: The tangent's energy share E in [0, 1].
        d: Ambient dimension.
        k: Rank of the tangent (and of each control).

    Returns:
        The expected control energy share.

    Raises:
        InvalidInputError: Not 1 <= k < d, or E outside [0, 1].

    Examples:
        >>> analytic_null(0.5, 64, 4)
        0.03333333333333333
    """
    if not (1 <= k < d and 0.0 <= energy_share <= 1.0 + 1e-9):
        raise InvalidInputError(f"analytic_null needs 1 <= k < d and E in [0, 1], got d={d}, k={k}, E={energy_share}.")
    return (1.0 - energy_share) * k / (d - k)


def chance_std(second_moment: Float[torch.Tensor, "d d"] | np.ndarray, k: int) -> float:
    """Standard deviation of the energy share of a uniformly random rank-k subspace, for fixed gradients.

    With M = S / tr(S): Var[tr(P M)] = 2 k (d - k) / (d (d - 1) (d + 2)) (tr(M^2) - 1 / d); derivation and checks in
    docs/statistics.md#the-z-score.

    Args:
        second_moment: S, shape (d, d), symmetric PSD (its symmetric part; any positive multiple gives the same).
        k: Rank of the random subspace, 1 <= k <= d.

    Returns:
        The standard deviation, >= 0; 0.0 for k = d or isotropic gradients.

    Raises:
        InvalidInputError: `second_moment` not square, its trace not positive, or k not in [1, d].

    Examples:
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
        raise InvalidInputError(f"second_moment has trace {float(trace):.3g} (all zero gradients): probe other texts.")
    if d == 1:
        return 0.0
    normalised = (matrix + matrix.T) / (2 * trace)
    # tr(M^2) - 1/d = ||M - I/d||_F^2 when tr(M) = 1: no cancellation, exactly 0 for isotropic gradients
    spread = float((normalised - torch.eye(d, dtype=torch.float64, device=matrix.device) / d).square().sum())
    variance = 2.0 * k * (d - k) / (d * (d - 1) * (d + 2)) * spread
    return variance**0.5
