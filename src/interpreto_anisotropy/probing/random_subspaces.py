# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The exact p-values' R' random k-subspaces, scored from the probe's gradient moments a chunk at a time.

Their energies are only ever needed summed over every token, ||G Q||_F^2 = tr(Q^T G^T G Q), and their ΔIsoScore*
from the covariance Sigma, Sigma Q and Q^T Sigma Q (`IsoScoreSettings.score_without`). With G^T G = a Sigma + n mu mu^T
(a = n or n - 1, as the covariance divides), one product Sigma Q per subspace gives both:
tr(Q^T G^T G Q) = a tr(Q^T Sigma Q) + n ||Q^T mu||^2. The subspaces are drawn, scored and dropped chunk by chunk
(`controls.random_subspace_chunks`): time linear in R', memory one chunk whatever R' (docs/statistics.md#the-scatter-path).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float

from ..commons.accumulators import MomentAccumulator
from ..tangents.controls import random_chunk_sizes, random_subspace_chunks
from .anisotropy import IsoScoreSettings

__all__ = ["RandomSubspaces"]


@dataclass(frozen=True)
class RandomSubspaces:
    """R' = `count` uniformly random k-subspaces of R^d drawn from `seed` (`ia.controls.random_subspace_bases`'s),
    never all in memory.

    Attributes:
        dim: d.
        rank: k.
        count: R'.
        seed: The seed of their stream.

    Examples:
        >>> randoms = RandomSubspaces(64, 8, 20, seed=0)
        >>> torch.equal(randoms.bases(), ia.controls.random_subspace_bases(64, 8, 20, seed=0, dtype=torch.float64))
        True
    """

    dim: int
    rank: int
    count: int
    seed: int

    def __post_init__(self) -> None:
        random_chunk_sizes(self.dim, self.rank, self.count)  # refuses a bad count or rank now, not at the end

    def chunks(self, device: torch.device | str = "cpu") -> Iterator[Float[torch.Tensor, "c d k"]]:
        """Their float64 bases (c, d, k), a chunk at a time on `device`."""
        return random_subspace_chunks(self.dim, self.rank, self.count, seed=self.seed, device=device)

    def bases(self, device: torch.device | str = "cpu") -> Float[torch.Tensor, "R d k"]:
        """Every float64 basis at once, (R', d, k) (checks and small R')."""
        return torch.cat(list(self.chunks(device)))

    def scores(
        self, moments: MomentAccumulator, covariance: Float[torch.Tensor, "d d"], isoscore: IsoScoreSettings
    ) -> tuple[Float[np.ndarray, " R"], Float[np.ndarray, " R"]]:
        """Each subspace's energy tr(Q^T G^T G Q) in the rows of `moments`, and IsoScore* of the cloud without it.

        Args:
            moments: The probed gradient rows' moments.
            covariance: Their covariance as `isoscore.covariance(moments)` gives it, float64 (d, d).
            isoscore: The IsoScore* settings.

        Returns:
            (energies (R',), IsoScore* without each subspace (R',)), float64, read back once.
        """
        count = moments.count
        scale = count - 1 if isoscore.unbiased(count) else count
        mean = moments.mean.to(covariance)
        energies, without = [], []
        for bases in self.chunks(covariance.device):
            products = covariance @ bases  # Sigma Q: the one d^2 k product of each subspace
            inside = (bases * products).sum((-2, -1))
            energies.append(scale * inside + count * (mean @ bases).square().sum(-1))
            without.append(isoscore.scores_without(covariance, bases, products))
        return torch.cat(energies).cpu().numpy(), torch.cat(without).cpu().numpy()
