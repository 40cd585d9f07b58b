# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Matched-rank normal controls and the null statistics they feed.

A normal control of a rank-k tangent subspace Q_T is a uniformly random k-dimensional subspace of the
orthogonal complement of Q_T. Comparing the tangent's gradient energy with R such controls gives an exact
permutation-style p-value, and the expected energy of a control is known in closed form.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float

from ..errors import InvalidInputError
from .subspace import Subspace

__all__ = ["normal_controls", "normal_control_bases", "p_value", "analytic_null"]


def _check_room(subspace: Subspace, n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"The number of controls must be a positive integer, got {n!r}.")
    d, k = subspace.dim, subspace.rank
    if n * d * k * 8 > MAX_CONTROL_BYTES:
        raise InvalidInputError(
            f"n_controls={n} rank-{k} controls in R^{d} need {n * d * k * 8 / 2**30:.1f} GiB (float64 draws); the "
            f"limit is {MAX_CONTROL_BYTES / 2**30:.0f} GiB. Use fewer controls (the paper uses 20)."
        )
    if 2 * k > d:
        raise InvalidInputError(
            f"A rank-{k} subspace of R^{d} leaves a {d - k}-dimensional complement, too small for a matched-rank "
            f"control of rank {k}. Use nb_concepts <= d / 2 (here <= {d // 2})."
        )


MAX_CONTROL_BYTES = 2 * 2**30  # the float64 draws of all controls of one tangent
_CONTROL_STREAM = 0xC0A7_5EED


def _control_stream_seed(seed: int) -> int:
    """A generator seed for the controls that differs from `seed` itself.

    `Subspace.random(d, k, seed=s)` orthonormalises the first d*k Gaussians of `manual_seed(s)`; drawing the
    controls from the same stream would make the first control's draw lie inside the tangent, so its projection
    onto the complement would be rounding noise and the "control" would not be orthogonal to the tangent.
    """
    return int(np.random.SeedSequence([int(seed) & 0xFFFF_FFFF_FFFF_FFFF, _CONTROL_STREAM]).generate_state(1)[0])


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
        InvalidInputError: If n < 1 or 2k > d (the complement has no room for a rank-k control).
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


def normal_controls(subspace: Subspace, n: int = 20, *, seed: int = 0) -> list[Subspace]:
    """Matched-rank normal controls: `n` random k-dimensional subspaces orthogonal to `subspace`.

    Args:
        subspace: The tangent subspace Q_T.
        n: Number of controls (the paper uses 20, so the smallest p-value is 1/21).
        seed: Random seed; the same seed gives the same controls.

    Returns:
        A list of `n` `Subspace`s, each with |Q_T^T Q_N| ~ 0 and Q_N^T Q_N = I.

    Raises:
        InvalidInputError: If n < 1 or 2k > d.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> tangent = ia.Subspace.random(64, 4, seed=0)
        >>> controls = ia.normal_controls(tangent, n=20, seed=0)
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

    With R = 20 controls the smallest attainable value is 1/21 ~= 0.048.

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
