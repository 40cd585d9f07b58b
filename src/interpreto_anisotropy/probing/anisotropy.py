# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""ΔIsoScore* of the gradient cloud when a subspace is removed: where it is computed and what it shrinks toward."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ..commons.accumulators import MomentAccumulator
from ..commons.options import UNIT_INTERVAL
from ..commons.tensors import as_real_tensor, check_finite
from ..errors import InvalidInputError
from ..metrics.isotropy import DEFAULT_ZETA, isoscore_star_from_covariance, isoscore_star_from_trace_and_norm

__all__ = ["IsoScoreConvention", "IsoScoreTarget", "IsoScoreSettings"]


class IsoScoreConvention(str, Enum):
    """Where IsoScore* of the gradient cloud with a rank-k subspace removed is computed.

    Attributes:
        COMPLEMENT: In the (d - k)-dimensional complement, P^T Sigma P (the default; a random subspace's Δ is > 0).
        AMBIENT: In R^d, G (I - Q Q^T), the k removed directions counted as empty (a random subspace's Δ is < 0).

    Examples:
        >>> IsoScoreConvention("ambient") is IsoScoreConvention.AMBIENT
        True
    """

    COMPLEMENT = "complement"
    AMBIENT = "ambient"


class IsoScoreTarget(str, Enum):
    """The shrinkage target C0 of IsoScore*, by name (a (d, d) tensor may be given instead).

    Attributes:
        SCALED_IDENTITY: (tr(C) / m) I_m in the m dimensions the cloud is scored in (the default; scale invariant).
        IDENTITY: I_m (depends on the gradients' units).
        POOLED: The probe's own gradient covariance, projected like the cloud: IsoScore* is then plain IsoScore.

    Examples:
        >>> IsoScoreTarget("pooled").value
        'pooled'
    """

    SCALED_IDENTITY = "scaled_identity"
    IDENTITY = "identity"
    POOLED = "pooled"


@dataclass(frozen=True, eq=False)
class IsoScoreSettings:
    """The validated IsoScore* options of a probe."""

    convention: IsoScoreConvention = IsoScoreConvention.COMPLEMENT
    zeta: float = DEFAULT_ZETA
    target: IsoScoreTarget | torch.Tensor = IsoScoreTarget.SCALED_IDENTITY

    @classmethod
    def make(
        cls,
        *,
        convention: str | IsoScoreConvention = IsoScoreConvention.COMPLEMENT,
        zeta: float = DEFAULT_ZETA,
        c0: str | IsoScoreTarget | torch.Tensor | np.ndarray = IsoScoreTarget.SCALED_IDENTITY,
    ) -> IsoScoreSettings:
        """Check the options a user gave (`GradientProbe.run`'s `isoscore_*`), with errors naming them."""
        convention = member_of(IsoScoreConvention, convention, "isoscore_convention")
        return cls(convention, float(UNIT_INTERVAL.check("isoscore_zeta", zeta)), _target(c0))

    @property
    def target_name(self) -> str:
        """The target's name as a result records it: an `IsoScoreTarget` value, or "given" for a tensor."""
        return self.target.value if isinstance(self.target, IsoScoreTarget) else "given"

    def check_dim(self, dim: int) -> None:
        """Refuse (`InvalidInputError`) a given C0 whose size is not the gradients' d."""
        if isinstance(self.target, torch.Tensor) and self.target.shape[0] != dim:
            raise InvalidInputError(
                f"isoscore_c0 is a {self.target.shape[0]} x {self.target.shape[0]} matrix but the gradients live in R^{dim}: pass the covariance of gradients taken at this split point, or a target name."
            )

    def unbiased(self, count: int) -> bool:
        """Whether the covariance of `count` rows divides by n - 1 (as `torch.cov`, when C0 has a scale), not n."""
        scaled = self.target is IsoScoreTarget.IDENTITY or isinstance(self.target, torch.Tensor)
        return scaled and count > 1

    def covariance(self, moments: MomentAccumulator) -> Float[torch.Tensor, "d d"]:
        """The gradient covariance the scores use: divided by n, or by n - 1 (as `torch.cov`) when C0 has a scale."""
        return moments.covariance(unbiased=self.unbiased(moments.count))

    def score(self, covariance: Float[torch.Tensor, "d d"], n: int) -> float:
        """IsoScore* of the whole gradient cloud, from its float64 (d, d) covariance and its n >= 2 rows."""
        target = self._data_target(covariance)  # None for the scaled identity
        if self.target is IsoScoreTarget.IDENTITY:
            target = torch.eye(covariance.shape[0], dtype=covariance.dtype, device=covariance.device)
        return float(isoscore_star_from_covariance(covariance, n=n, zeta=self.zeta, C0=target))

    def score_without(
        self, covariance: Float[torch.Tensor, "d d"], bases: Float[torch.Tensor, "R d k"]
    ) -> Float[np.ndarray, " R"]:
        """(R,) IsoScore* of the cloud of float64 covariance (d, d) with each subspace of `bases` (R, d, k) removed."""
        return self.scores_without(covariance, bases.to(covariance)).cpu().numpy()

    def scores_without(
        self,
        covariance: Float[torch.Tensor, "d d"],
        bases: Float[torch.Tensor, "R d k"],
        products: Float[torch.Tensor, "R d k"] | None = None,
    ) -> Float[torch.Tensor, " R"]:
        """`score_without` on the device, float64 `bases`, with Sigma Q (`products`) when already computed."""
        d, k = bases.shape[-2], bases.shape[-1]
        dim = d - k if self.convention is IsoScoreConvention.COMPLEMENT else d
        products = covariance @ bases if products is None else products
        target = self._data_target(covariance)
        if target is None:  # an identity of the scored space: scaled (one elementwise pass), or c I_dim
            traces, norms = _projected_trace_and_norm(covariance, bases, products)
            if self.target is IsoScoreTarget.SCALED_IDENTITY:
                return isoscore_star_from_trace_and_norm(traces, norms, dim, zeta=self.zeta)
            zeta = self.zeta  # (1 - zeta) C + zeta I_dim, from the trace and squared norm of C
            traces, norms = (
                (1 - zeta) * traces + zeta * dim,
                (1 - zeta) ** 2 * norms + 2 * zeta * (1 - zeta) * traces + zeta**2 * dim,
            )
        else:  # a covariance of the same gradients, projected like them
            mixture = (1 - self.zeta) * covariance + self.zeta * target
            target_products = products if self.target is IsoScoreTarget.POOLED else target @ bases
            mixed = (1 - self.zeta) * products + self.zeta * target_products
            traces, norms = _projected_trace_and_norm(mixture, bases, mixed)
        return isoscore_star_from_trace_and_norm(traces, norms, dim, zeta=0.0)

    def _data_target(self, covariance: torch.Tensor) -> torch.Tensor | None:
        """C0 when it is a covariance of the gradients (pooled or given), else None (an identity)."""
        if self.target is IsoScoreTarget.POOLED:
            return covariance
        if isinstance(self.target, torch.Tensor):
            return self.target.to(covariance)
        return None


def _projected_trace_and_norm(
    matrix: Float[torch.Tensor, "d d"], bases: Float[torch.Tensor, "R d k"], a_q: Float[torch.Tensor, "R d k"]
) -> tuple[Float[torch.Tensor, " R"], Float[torch.Tensor, " R"]]:
    """tr(R A R) = tr A - tr(Q^T A Q) and ||R A R||^2 = ||A||^2 - 2 ||A Q||^2 + ||Q^T A Q||^2 for each Q of `bases`
    (R = I - Q Q^T, A symmetric), from `a_q` = A Q."""
    inner = bases.transpose(-1, -2) @ a_q
    traces = torch.trace(matrix) - torch.diagonal(inner, dim1=-2, dim2=-1).sum(-1)
    norms = matrix.square().sum() - 2 * a_q.square().sum((-2, -1)) + inner.square().sum((-2, -1))
    return traces, norms


def member_of(kind: type[Enum], value: Any, name: str, besides: str = "") -> Any:
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(repr(member.value) for member in kind)
        raise InvalidInputError(f"{name} must be one of {names}{besides}, got {value!r}.") from None


def _target(value: Any) -> IsoScoreTarget | torch.Tensor:
    if isinstance(value, IsoScoreTarget | str):
        return member_of(IsoScoreTarget, value, "isoscore_c0", " or a (d, d) covariance matrix")
    if not isinstance(value, torch.Tensor | np.ndarray):
        raise InvalidInputError(
            f"isoscore_c0 must be a target name or a (d, d) covariance tensor, got {type(value).__name__}."
        )
    matrix = as_real_tensor(value, name="isoscore_c0", dtype=torch.float64).detach().cpu()
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise InvalidInputError(f"isoscore_c0 must be a square (d, d) matrix, got shape {tuple(matrix.shape)}.")
    check_finite(matrix, name="isoscore_c0")
    trace = float(torch.trace(matrix))
    if not (math.isfinite(trace) and trace > 0):
        raise InvalidInputError(
            f"isoscore_c0 has trace {trace:.3g}: a shrinkage target must be a covariance with some variance."
        )
    return (matrix + matrix.T) / 2
