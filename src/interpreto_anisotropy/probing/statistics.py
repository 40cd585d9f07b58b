# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""From the probe's sums to its results: energy shares, controls, p-values, confidence intervals, IsoScore*.

`GradientProbe.run` draws the subspaces it scores (`SubspaceColumns`), accumulates `ProbeSums` batch by batch,
reduces them across ranks and hands them to `build_results`; `sums_from_gradients` makes the same sums from
gradients in hand, so the statistics can be checked without a model (docs/architecture.md: the data flow).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int

from ..commons.accumulators import MomentAccumulator, top_eigenvalues
from ..errors import InvalidInputError
from ..tangents.controls import (
    analytic_null,
    chance_std,
    normal_control_bases,
    p_value,
    random_subspace_bases,
    warn_if_anti_conservative,
)
from ..tangents.subspace import Subspace
from .anisotropy import IsoScoreSettings
from .intervals import share_intervals
from .objectives import Objective
from .result import ProbeResult

__all__ = ["ProbeSums", "Tally", "SubspaceColumns", "TangentBlock", "build_results", "sums_from_gradients"]


@dataclass
class Tally:
    """What one pass over the inputs counted on this shard (filled by `GradientSteps`).

    Attributes:
        usable_sequences: Sequences long enough for the objective.
        skipped_sequences: Sequences too short for it.
        skipped_batches: Batches with non-finite values.
        nonfinite_sequences: Sequences in those batches (dropped with them).
        first_nonfinite: (batch index, sequence ids) of the first non-finite batch, if any.
    """

    usable_sequences: int = 0
    skipped_sequences: int = 0
    skipped_batches: int = 0
    first_nonfinite: tuple[int, torch.Tensor] | None = None
    nonfinite_sequences: int = 0


@dataclass
class ProbeSums:
    """The sums `GradientProbe.run` accumulates, reduces across ranks and builds results from (float64).

    Attributes:
        sequence_energy: Each probed sequence's energy in each subspace, (n_seq, S); with `column_energy`, in each
            tangent only, (n_seq, T).
        sequence_total: Each probed sequence's squared gradient norm, (n_seq,).
        sequence_id: Index of each probed sequence in the inputs, (n_seq,).
        moments: Moments of the probed gradient rows.
        loss_sum: Sum of the loss terms (a 0-dim tensor before the reduction, a float after).
        loss_count: Number of loss terms (likewise).
        tally: The pass's counts (this shard's, then every rank's).
        n_sequences: Probed sequences over every rank (after the reduction).
        column_energy: Every row's energy in each subspace, (S,), when read from G^T G; None: `sequence_energy`'s sum.
    """

    sequence_energy: Float[torch.Tensor, "n S"]
    sequence_total: Float[torch.Tensor, " n"]
    sequence_id: Int[torch.Tensor, " n"]
    moments: MomentAccumulator
    loss_sum: Any
    loss_count: Any
    tally: Tally
    n_sequences: int = 0
    column_energy: Float[torch.Tensor, " S"] | None = None

    def energy_per_column(self) -> Float[torch.Tensor, " S"]:
        """The energy of all the rows in each subspace, (S,)."""
        return self.column_energy if self.column_energy is not None else self.sequence_energy.sum(0)

    def tangent_sequence_energy(self, tangent_columns: list[int]) -> Float[torch.Tensor, "n T"]:
        """Each sequence's energy in each tangent, (n_seq, T) (what the interval's bootstrap resamples)."""
        return self.sequence_energy if self.column_energy is not None else self.sequence_energy[:, tangent_columns]


@dataclass
class SubspaceColumns:
    """Every subspace a probe scores, their bases side by side for one projection per batch.

    The S energy columns: each tangent then its R normal controls, in order; then the R' random k-subspaces of R^d,
    one draw per key of `randoms` (per distinct rank with one seed, per tangent with a seed each), in a block of
    their own so that the tangents' and controls' float32 products stay bit for bit. A random block wider than d is
    read from the scatter G^T G instead of projected (`from_scatter`; docs/statistics.md#the-scatter-path).

    Attributes:
        tangents: {name: Subspace}, as probed.
        controls: {name: (R, d, k) normal controls of that tangent}.
        randoms: {k or tangent name: (R', d, k) random subspaces of R^d}.
        blocks: [(bases (d, K_b), membership (K_b, S_b))]: energies (rows @ bases).square() @ membership.
        random_key: {tangent name: its key in `randoms`}; empty: the tangent's rank.

    Examples:
        >>> tangent = ia.Subspace.random(64, 8, seed=0)
        >>> columns = SubspaceColumns.draw({"tangent": tangent}, n_controls=20, n_random=20, seed=0)
        >>> columns.n_columns  # the tangent, 20 controls, 20 random subspaces
        41
    """

    tangents: dict[str, Subspace]
    controls: dict[str, torch.Tensor]
    randoms: dict[int | str, torch.Tensor]
    blocks: list[tuple[torch.Tensor, torch.Tensor]]
    random_key: dict[str, int | str] = field(default_factory=dict)

    @classmethod
    def draw(
        cls, tangents: dict[str, Subspace], *, n_controls: int, n_random: int, seed: int | Mapping[str, int]
    ) -> SubspaceColumns:
        """Draw R = `n_controls` normal controls per tangent and R' = `n_random` random subspaces per rank (one
        `seed` for both draws, each its own stream) or per tangent (`seed` = {tangent name: seed})."""
        seeds = _seeds_of(tangents, seed)
        first = next(iter(tangents.values()))
        controls = {
            name: normal_control_bases(tangent, n_controls, seed=seeds[name]) for name, tangent in tangents.items()
        }
        key = {name: name if isinstance(seed, Mapping) else tangent.rank for name, tangent in tangents.items()}
        randoms: dict[int | str, torch.Tensor] = {}
        for name, tangent in tangents.items():
            if key[name] not in randoms:
                randoms[key[name]] = random_subspace_bases(
                    first.dim, tangent.rank, n_random, seed=seeds[name], device=first.device, dtype=first.basis.dtype
                )
        named = [basis for name, tangent in tangents.items() for basis in [tangent.basis, *controls[name]]]
        blocks = [_block(named), _block([basis for bases in randoms.values() for basis in bases])]
        return cls(tangents, controls, randoms, blocks, key)

    @property
    def n_controls(self) -> int:
        """R, the normal controls of each tangent."""
        return next(iter(self.controls.values())).shape[0]

    @property
    def n_random(self) -> int:
        """R', the random subspaces of each rank."""
        return next(iter(self.randoms.values())).shape[0]

    @property
    def n_columns(self) -> int:
        """S, the number of energy columns."""
        return sum(membership.shape[1] for _, membership in self.blocks)

    def energies(self, rows: Float[torch.Tensor, "N d"]) -> Float[torch.Tensor, "N S"]:
        """Each row's squared norm in each subspace, in the rows' dtype (the probe gives float32 rows)."""
        return torch.cat([(rows @ bases).square() @ membership for bases, membership in self.blocks], dim=1)

    def energies_of_scatter(self, scatter: Float[torch.Tensor, "d d"]) -> Float[torch.Tensor, " S"]:
        """The energy of rows with scatter G^T G in each subspace, tr(Q^T G^T G Q) = ||G Q||_F^2, float64 (S,)."""
        return torch.cat([_scatter_energies(scatter, *block) for block in self.blocks])

    @functools.cached_property
    def tangent_block(self) -> TangentBlock:
        """The tangents' bases alone, side by side (one product per batch gives each row's energy in each tangent)."""
        return TangentBlock(*_block([tangent.basis for tangent in self.tangents.values()]))

    def tangent_column(self, name: str) -> int:
        """The energy column of tangent `name`."""
        return list(self.tangents).index(name) * (1 + self.n_controls)

    def control_columns(self, name: str) -> slice:
        """The energy columns of the controls of tangent `name`."""
        start = self.tangent_column(name) + 1
        return slice(start, start + self.n_controls)

    def randoms_of(self, name: str) -> int | str:
        """The key in `randoms` of the random subspaces tangent `name` is ranked among."""
        return self.random_key.get(name, self.tangents[name].rank)

    def random_columns(self, name: str) -> slice:
        """The energy columns of the random subspaces of tangent `name` (`randoms_of`)."""
        key = self.randoms_of(name)
        start = len(self.tangents) * (1 + self.n_controls) + list(self.randoms).index(key) * self.n_random
        return slice(start, start + self.n_random)

    @property
    def from_scatter(self) -> bool:
        """Whether the random block is wider than d (R' k > d), so read from G^T G (d^2 R' k products, not n d R' k)."""
        return len(self.blocks) > 1 and self.blocks[1][0].shape[1] > self.blocks[1][0].shape[0]

    @property
    def per_row(self) -> SubspaceColumns:
        """The columns a batch's rows are projected on: all of them, or without the random block `from_scatter`."""
        return dataclasses.replace(self, blocks=self.blocks[:1]) if self.from_scatter else self

    def complete(self, sums: ProbeSums) -> ProbeSums:
        """The reduced `sums` of `per_row`'s columns, completed when `from_scatter`: `column_energy` (S,) then holds every
        column, the random ones read from the scatter, and `sequence_energy` the tangents' (n_seq, T)."""
        if not self.from_scatter:
            return sums
        scatter = sums.moments.second_moment() * sums.moments.count
        randoms = _scatter_energies(scatter, *self.blocks[1])
        projected = sums.sequence_energy.sum(0).to(scatter)
        tangents = [self.tangent_column(name) for name in self.tangents]
        return dataclasses.replace(
            sums, sequence_energy=sums.sequence_energy[:, tangents], column_energy=torch.cat([projected, randoms])
        )


@dataclass(frozen=True)
class TangentBlock:
    """The tangents of a `SubspaceColumns` without their controls: each row's energy in each tangent, in one product.

    Attributes:
        bases: The tangents' bases side by side, float32 (d, K).
        membership: Column -> tangent, (K, T).
    """

    bases: Float[torch.Tensor, "d K"]
    membership: Float[torch.Tensor, "K T"]

    def energies(self, rows: Float[torch.Tensor, "N d"]) -> Float[torch.Tensor, "N T"]:
        """Each row's squared norm in each tangent, in the rows' dtype (float32 products, as `SubspaceColumns`)."""
        return (rows @ self.bases).square() @ self.membership


def _seeds_of(tangents: dict[str, Subspace], seed: int | Mapping[str, int]) -> dict[str, int]:
    """{tangent name: the seed of its draws}, from one seed or a mapping that covers every tangent."""
    if isinstance(seed, Mapping):
        missing = [name for name in tangents if name not in seed]
        if missing:
            raise InvalidInputError(f"The draw seeds name no seed for tangent(s) {missing}: give one for each.")
        return {name: int(seed[name]) for name in tangents}
    return dict.fromkeys(tangents, seed)


def _scatter_energies(scatter: torch.Tensor, bases: torch.Tensor, membership: torch.Tensor) -> torch.Tensor:
    """tr(Q^T G^T G Q) of each subspace of a block, from the scatter G^T G (float64)."""
    basis = bases.to(scatter)
    return ((scatter @ basis) * basis).sum(0) @ membership.to(scatter)


def _block(bases: list[torch.Tensor]) -> tuple[Float[torch.Tensor, "d K"], Float[torch.Tensor, "K S"]]:
    """The bases side by side, (d, K), and the column -> subspace membership, (K, S)."""
    stacked = torch.cat(bases, dim=1).float()
    owners = torch.cat([torch.full((basis.shape[1],), index) for index, basis in enumerate(bases)])
    membership = torch.zeros(len(owners), len(bases), device=stacked.device)
    membership[torch.arange(len(owners)), owners] = 1.0
    return stacked, membership


def sums_from_gradients(
    gradients: Float[torch.Tensor, "n d"], sequence_ids: Int[torch.Tensor, " n"], columns: SubspaceColumns
) -> ProbeSums:
    """The `ProbeSums` a probe would accumulate from gradients G (n, d) of sequences `sequence_ids` (n,), projected
    on `columns` as it projects them (no loss), over the distinct sequences by increasing id."""
    if gradients.dim() != 2 or sequence_ids.shape != gradients.shape[:1] or gradients.shape[0] == 0:
        raise InvalidInputError(
            f"gradients (n, d) and sequence_ids (n,) must describe the same n > 0 rows, got shapes "
            f"{tuple(gradients.shape)} and {tuple(sequence_ids.shape)}."
        )
    rows = gradients.float()
    ids, inverse = torch.unique(sequence_ids.cpu(), return_inverse=True)
    inverse = inverse.to(rows.device)
    energy = torch.zeros(len(ids), columns.n_columns, dtype=torch.float64, device=rows.device)
    energy.index_add_(0, inverse, columns.energies(rows).double())
    total = torch.zeros(len(ids), dtype=torch.float64, device=rows.device)
    total.index_add_(0, inverse, rows.square().sum(1).double())
    moments = MomentAccumulator(rows.shape[1], device=rows.device).update(rows)
    return ProbeSums(energy, total, ids, moments, 0.0, 0.0, Tally(usable_sequences=len(ids)), n_sequences=len(ids))


def build_results(
    sums: ProbeSums,
    columns: SubspaceColumns,
    seed: int,
    n_bootstrap: int,
    confidence: float,
    objective: Objective,
    split_point: str | None,
    isoscore: IsoScoreSettings | None = None,
) -> dict[str, ProbeResult]:
    """{name: ProbeResult} of each tangent from the `sums` reduced over every rank, scored on `columns`.

    `seed` seeds the interval's bootstrap (and is recorded as the draws'); `isoscore` None takes the defaults. Warns
    as `share_intervals` and `warn_if_anti_conservative`.
    """
    isoscore = isoscore or IsoScoreSettings()
    tangents = columns.tangents
    dim = next(iter(tangents.values())).dim
    shares = (sums.energy_per_column() / sums.sequence_total.sum()).cpu().numpy()
    second_moment = sums.moments.second_moment()
    covariance = isoscore.covariance(sums.moments)
    max_rank = max(subspace.rank for subspace in tangents.values())
    top_values = top_eigenvalues(second_moment, max_rank).clamp(min=0)
    total_energy = float(torch.trace(second_moment))
    tangent_columns = [columns.tangent_column(name) for name in tangents]
    ci_low, ci_high = share_intervals(
        sums.tangent_sequence_energy(tangent_columns),
        sums.sequence_total,
        n_resamples=n_bootstrap,
        confidence=confidence,
        generator=torch.Generator().manual_seed(seed),
    )
    common = _shared_fields(sums, objective, split_point, seed, isoscore, covariance, dim)
    # one batched pass per key of `randoms`, shared by the tangents ranked among them
    without_random = {key: isoscore.score_without(covariance, bases) for key, bases in columns.randoms.items()}
    for k in sorted({tangent.rank for tangent in tangents.values()}):
        warn_if_anti_conservative(k, dim, stacklevel=3)
    results: dict[str, ProbeResult] = {}
    for tangent_index, (name, tangent) in enumerate(tangents.items()):
        k = tangent.rank
        energy_share = float(shares[columns.tangent_column(name)])
        control_shares = shares[columns.control_columns(name)].astype(np.float64)
        oracle = float(top_values[:k].sum()) / total_energy if total_energy > 0 else 0.0
        results[name] = ProbeResult.build(
            name=name,
            method=tangent.method,
            rank=k,
            energy_share=energy_share,
            control_energy_shares=control_shares,
            random_energy_shares=shares[columns.random_columns(name)].astype(np.float64),
            chance_std=_chance_std(second_moment, k),
            analytic_null=analytic_null(min(max(energy_share, 0.0), 1.0), dim, k),
            p_value=p_value(energy_share, control_shares),
            ci_low=float(ci_low[tangent_index]),
            ci_high=float(ci_high[tangent_index]),
            confidence=confidence,
            oracle_energy_share=oracle,
            isoscore_star_without_tangent=float(isoscore.score_without(covariance, tangent.basis[None])[0]),
            isoscore_star_without_controls=isoscore.score_without(covariance, columns.controls[name]),
            isoscore_star_without_random=without_random[columns.randoms_of(name)],
            **common,
        )
    return results


def _shared_fields(
    sums: ProbeSums,
    objective: Objective,
    split_point: str | None,
    seed: int,
    isoscore: IsoScoreSettings,
    covariance: Float[torch.Tensor, "d d"],
    dim: int,
) -> dict[str, Any]:
    """The `ProbeResult` fields every tangent of a probe shares: counts, loss, objective, IsoScore* of G."""
    return {
        "n_tokens": sums.moments.count,
        "n_sequences": sums.n_sequences,
        "dim": dim,
        "loss": sums.loss_sum / max(sums.loss_count, 1),
        "objective": objective.name,
        "reduction": objective.reduction.value,
        "split_point": split_point,
        "seed": seed,
        "n_skipped_batches": sums.tally.skipped_batches,
        "n_skipped_sequences": sums.tally.skipped_sequences + sums.tally.nonfinite_sequences,
        "isoscore_star": isoscore.score(covariance, sums.moments.count),
        "isoscore_convention": isoscore.convention.value,
        "isoscore_zeta": isoscore.zeta,
        "isoscore_c0": isoscore.target_name,
    }


def _chance_std(second_moment: torch.Tensor, k: int) -> float:
    """`chance_std` of the gradients, NaN when they are all zero (no share is defined then)."""
    return chance_std(second_moment, k) if bool(torch.trace(second_moment) > 0) else float("nan")
