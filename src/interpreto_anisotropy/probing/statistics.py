# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""From the probe's sums to its results: energy shares, controls, p-values, intervals, IsoScore*, the breakdowns."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int

from ..commons.accumulators import MomentAccumulator, top_eigenvalues
from ..errors import InvalidInputError
from ..tangents.controls import (
    analytic_null,
    chance_std,
    normal_control_bases,
    p_value,
    random_chunk_sizes,
    random_subspace_chunks,
    warn_if_anti_conservative,
)
from ..tangents.subspace import Subspace
from .anisotropy import IsoScoreSettings
from .intervals import share_intervals
from .objectives import Objective
from .result import ProbeResult


@dataclass(frozen=True)
class RandomSubspaces:
    """R' = `count` uniformly random k-subspaces of R^d drawn from `seed`, a chunk at a time (never all in memory)."""

    dim: int
    rank: int
    count: int
    seed: int

    def __post_init__(self) -> None:
        random_chunk_sizes(self.dim, self.rank, self.count)  # refuses a bad count or rank now, not at the end

    def scores(
        self, moments: MomentAccumulator, covariance: Float[torch.Tensor, "d d"], isoscore: IsoScoreSettings
    ) -> tuple[Float[np.ndarray, " R"], Float[np.ndarray, " R"]]:
        """Each subspace's energy tr(Q^T G^T G Q) in the rows of `moments`, and IsoScore* of the cloud without it."""
        count = moments.count
        scale = count - 1 if isoscore.unbiased(count) else count
        mean = moments.mean.to(covariance)
        energies, without = [], []
        for bases in random_subspace_chunks(self.dim, self.rank, self.count, seed=self.seed, device=covariance.device):
            products = covariance @ bases  # Sigma Q: the one d^2 k product of each subspace
            inside = (bases * products).sum((-2, -1))
            energies.append(scale * inside + count * (mean @ bases).square().sum(-1))
            without.append(isoscore.scores_without(covariance, bases, products))
        return torch.cat(energies).cpu().numpy(), torch.cat(without).cpu().numpy()


@dataclass
class Tally:
    """What one pass over the inputs counted on this shard (filled by `GradientSteps`)."""

    usable_sequences: int = 0
    skipped_sequences: int = 0
    skipped_batches: int = 0
    first_nonfinite: tuple[int, torch.Tensor] | None = None
    nonfinite_sequences: int = 0


@dataclass
class ProbeSums:
    """The sums `GradientProbe.run` accumulates, reduces across ranks and builds results from (float64)."""

    sequence_energy: Float[torch.Tensor, "n S"]
    sequence_total: Float[torch.Tensor, " n"]
    sequence_id: Int[torch.Tensor, " n"]
    moments: MomentAccumulator
    loss_sum: Any
    loss_count: Any
    tally: Tally
    n_sequences: int = 0
    column_energy: Float[torch.Tensor, " S"] | None = None
    sequence_control_energy: Float[torch.Tensor, "n T"] | None = None

    def tangent_sequence_energy(self, tangent_columns: list[int]) -> Float[torch.Tensor, "n T"]:
        """Each sequence's energy in each tangent, (n_seq, T) (what the interval's bootstrap resamples)."""
        return self.sequence_energy if self.column_energy is not None else self.sequence_energy[:, tangent_columns]

    def control_sequence_energy(self, columns: SubspaceColumns) -> Float[torch.Tensor, "n T"] | None:
        """Each sequence's mean energy in each tangent's controls, (n_seq, T); None for a live window's sums."""
        if self.sequence_control_energy is not None or self.column_energy is not None:
            return self.sequence_control_energy
        means = [self.sequence_energy[:, columns.control_columns(name)].mean(1) for name in columns.tangents]
        return torch.stack(means, dim=1)


@dataclass
class TangentBlock:
    """Subspaces side by side, (d, K), with the rank of each: each row's energy in each, in one product."""

    bases: Float[torch.Tensor, "d K"]
    widths: tuple[int, ...]

    @staticmethod
    def stacked(bases: list[torch.Tensor]) -> tuple[Float[torch.Tensor, "d K"], tuple[int, ...]]:
        """The bases side by side, float32, and the rank of each."""
        return torch.cat(bases, dim=1).float(), tuple(int(basis.shape[1]) for basis in bases)

    def energies(self, rows: Float[torch.Tensor, "N d"]) -> Float[torch.Tensor, "N S"]:
        """Each row's squared norm in each subspace, in the rows' dtype (the probe gives float32 rows)."""
        return _segment_sums((rows @ self.bases).square(), self.widths)

    @property
    def n_tangents(self) -> int:
        """The number of subspaces (energy columns)."""
        return len(self.widths)


@dataclass
class SubspaceColumns(TangentBlock):
    """The tangents and their controls side by side (one product per batch), and the random subspaces."""

    tangents: dict[str, Subspace]
    controls: dict[str, torch.Tensor]
    randoms: dict[int | str, RandomSubspaces]
    random_key: dict[str, int | str]

    @classmethod
    def draw(
        cls, tangents: dict[str, Subspace], *, n_controls: int, n_random: int, seed: int | Mapping[str, int]
    ) -> SubspaceColumns:
        """R normal controls per tangent and R' random subspaces per rank, or per tangent (`seed` = {name: seed})."""
        per_tangent = isinstance(seed, Mapping)
        if per_tangent and (missing := [name for name in tangents if name not in seed]):
            raise InvalidInputError(f"The draw seeds name no seed for tangent(s) {missing}: give one for each.")
        seeds = {name: int(seed[name]) for name in tangents} if per_tangent else dict.fromkeys(tangents, seed)
        controls = {
            name: normal_control_bases(tangent, n_controls, seed=seeds[name]) for name, tangent in tangents.items()
        }
        key = {name: name if per_tangent else tangent.rank for name, tangent in tangents.items()}
        randoms = {  # one per key: the tangents sharing a key share its dim, rank and seed
            key[name]: RandomSubspaces(tangent.dim, tangent.rank, n_random, seeds[name])
            for name, tangent in tangents.items()
        }
        named = [basis for name, tangent in tangents.items() for basis in [tangent.basis, *controls[name]]]
        return cls(*cls.stacked(named), tangents, controls, randoms, key)

    @property
    def n_controls(self) -> int:
        """R, the normal controls of each tangent."""
        return next(iter(self.controls.values())).shape[0]

    @property
    def n_random(self) -> int:
        """R', the random subspaces of each rank."""
        return next(iter(self.randoms.values())).count

    def energies_of_scatter(self, scatter: Float[torch.Tensor, "d d"]) -> Float[torch.Tensor, " S"]:
        """The energy of rows with scatter G^T G in each tangent and control, tr(Q^T G^T G Q) = ||G Q||_F^2, float64."""
        basis = self.bases.to(scatter)
        return _segment_sums(((scatter @ basis) * basis).sum(0, keepdim=True), self.widths)[0]

    @functools.cached_property
    def tangent_block(self) -> TangentBlock:
        """The tangents' bases alone, side by side (one product per batch gives each row's energy in each tangent)."""
        return TangentBlock(*self.stacked([tangent.basis for tangent in self.tangents.values()]))

    def tangent_column(self, name: str) -> int:
        """The energy column of tangent `name`."""
        return list(self.tangents).index(name) * (1 + self.n_controls)

    def control_columns(self, name: str) -> slice:
        """The energy columns of the controls of tangent `name`."""
        start = self.tangent_column(name) + 1
        return slice(start, start + self.n_controls)

    def randoms_of(self, name: str) -> int | str:
        """The key in `randoms` of the random subspaces tangent `name` is ranked among."""
        return self.random_key[name]


def _segment_sums(values: Float[torch.Tensor, "N K"], widths: tuple[int, ...]) -> Float[torch.Tensor, "N S"]:
    """Sums of consecutive column segments of the given widths, (N, len(widths)), one reshape per run of equal widths."""
    parts, start = [], 0
    for width, run in ((width, len(list(group))) for width, group in itertools.groupby(widths)):
        parts.append(values[:, start : start + width * run].reshape(values.shape[0], run, width).sum(-1))
        start += width * run
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def sums_from_gradients(
    gradients: Float[torch.Tensor, "n d"], sequence_ids: Int[torch.Tensor, " n"], columns: SubspaceColumns
) -> ProbeSums:
    """The `ProbeSums` (no loss) a probe would accumulate from gradients G (n, d) of sequences `sequence_ids` (n,)."""
    if gradients.dim() != 2 or sequence_ids.shape != gradients.shape[:1] or gradients.shape[0] == 0:
        raise InvalidInputError(
            f"gradients (n, d) and sequence_ids (n,) must describe the same n > 0 rows, got shapes {tuple(gradients.shape)} and {tuple(sequence_ids.shape)}."
        )
    rows = gradients.float()
    ids, inverse = torch.unique(sequence_ids.cpu(), return_inverse=True)
    inverse = inverse.to(rows.device)
    energy = torch.zeros(len(ids), len(columns.widths), dtype=torch.float64, device=rows.device)
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
    """{name: ProbeResult} of each tangent from the `sums` reduced over every rank, scored on `columns`."""
    isoscore = isoscore or IsoScoreSettings()
    tangents = columns.tangents
    dim = next(iter(tangents.values())).dim
    second_moment = sums.moments.second_moment()
    covariance = isoscore.covariance(sums.moments)
    ranks = sorted({subspace.rank for subspace in tangents.values()})
    shares, total_energy, sum_total, top_sums = _read_once(sums, second_moment, ranks)
    tangent_columns = [columns.tangent_column(name) for name in tangents]
    ci_low, ci_high = share_intervals(
        sums.tangent_sequence_energy(tangent_columns),
        sums.sequence_total,
        n_resamples=n_bootstrap,
        confidence=confidence,
        generator=torch.Generator().manual_seed(seed),
    )
    common = {
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
    # one chunked pass per key of `randoms`, shared by the tangents ranked among them
    scores = {key: randoms.scores(sums.moments, covariance, isoscore) for key, randoms in columns.randoms.items()}
    per_sequence = _per_sequence_fields(sums, columns, tangent_columns)
    for k in ranks:
        warn_if_anti_conservative(k, dim, stacklevel=3)
    results: dict[str, ProbeResult] = {}
    for tangent_index, (name, tangent) in enumerate(tangents.items()):
        k = tangent.rank
        random_energy, without_random = scores[columns.randoms_of(name)]
        energy_share = float(shares[columns.tangent_column(name)])
        control_shares = shares[columns.control_columns(name)]
        oracle = top_sums[k] / total_energy if total_energy > 0 else 0.0
        results[name] = ProbeResult.build(
            name=name,
            method=tangent.method,
            rank=k,
            energy_share=energy_share,
            control_energy_shares=control_shares,
            random_energy_shares=random_energy / sum_total,
            chance_std=chance_std(second_moment, k) if total_energy > 0 else float("nan"),  # NaN: no gradient
            analytic_null=analytic_null(min(max(energy_share, 0.0), 1.0), dim, k),
            p_value=p_value(energy_share, control_shares),
            ci_low=float(ci_low[tangent_index]),
            ci_high=float(ci_high[tangent_index]),
            confidence=confidence,
            oracle_energy_share=oracle,
            isoscore_star_without_tangent=float(isoscore.score_without(covariance, tangent.basis[None])[0]),
            isoscore_star_without_controls=isoscore.score_without(covariance, columns.controls[name]),
            isoscore_star_without_random=without_random,
            **common,
            **{key: value[tangent_index] if key != "sequence_ids" else value for key, value in per_sequence.items()},
        )
    return results


def _read_once(
    sums: ProbeSums, second_moment: Float[torch.Tensor, "d d"], ranks: list[int]
) -> tuple[np.ndarray, float, float, dict[int, float]]:
    """The column shares (S,), tr(M), the summed totals and {k: sum of M's top k eigenvalues}, in one host read."""
    sum_total = sums.sequence_total.sum()
    shares = (sums.column_energy if sums.column_energy is not None else sums.sequence_energy.sum(0)) / sum_total
    top_values = top_eigenvalues(second_moment, max(ranks)).clamp(min=0)
    scalars = torch.stack([torch.trace(second_moment), sum_total, *(top_values[:k].sum() for k in ranks)])
    host = torch.cat([shares.double(), scalars.double()]).cpu().numpy()
    n_columns = shares.shape[0]
    total_energy, total, *tops = host[n_columns:].tolist()
    return host[:n_columns], total_energy, total, dict(zip(ranks, tops, strict=True))


def _per_sequence_fields(sums: ProbeSums, columns: SubspaceColumns, tangent_columns: list[int]) -> dict[str, Any]:
    """The per-sequence `ProbeResult` fields: the ids, and for each tangent its energies, controls' and totals."""
    n_tangents = len(tangent_columns)
    totals = sums.sequence_total.cpu().tolist()
    controls = sums.control_sequence_energy(columns)
    return {
        "sequence_ids": sums.sequence_id.cpu().tolist(),
        "sequence_energies": sums.tangent_sequence_energy(tangent_columns).cpu().T.tolist(),
        "sequence_control_energies": [[]] * n_tangents if controls is None else controls.cpu().T.tolist(),
        "sequence_totals": [totals] * n_tangents,
    }


# ------------------------------------------------------- the energy share by token frequency and by position
#: Cumulated shares of all token occurrences where the frequency buckets are cut.
FREQUENCY_EDGES: tuple[float, ...] = (0.5, 0.75, 0.9)
#: Positions (from 0) where the position buckets are cut.
POSITION_EDGES: tuple[int, ...] = (1, 4, 16, 64, 256)


def frequency_bucket_of_ids(
    counts: Int[torch.Tensor, " V"], *, edges: Sequence[float] = FREQUENCY_EDGES
) -> torch.Tensor:
    """The frequency bucket of every token id, (V,) in [0, len(edges)], from its counts (V,); count 0: the last."""
    edges = tuple(float(edge) for edge in edges)
    if not all(0 < edge < 1 for edge in edges) or list(edges) != sorted(set(edges)):
        raise InvalidInputError(f"Frequency edges must be increasing shares in (0, 1), got {edges}.")
    counts = torch.as_tensor(counts).double().reshape(-1)
    if bool((counts < 0).any()) or float(counts.sum()) <= 0:
        raise InvalidInputError("Token counts must be non-negative with at least one occurrence.")
    order = torch.argsort(counts, descending=True, stable=True)
    before = (torch.cumsum(counts[order], 0) - counts[order]) / counts.sum()  # share of the more frequent types
    buckets = torch.empty_like(order)
    cuts = torch.tensor(edges, dtype=torch.float64, device=before.device)
    buckets[order] = torch.bucketize(before, cuts, right=True)
    buckets[counts == 0] = len(edges)
    return buckets


def position_buckets(positions: Int[torch.Tensor, "..."], *, edges: Sequence[int] = POSITION_EDGES) -> torch.Tensor:
    """The bucket of each position (from 0): the number of `edges` at or below it."""
    buckets = torch.zeros_like(positions, dtype=torch.long)
    for edge in edges:
        buckets += positions >= edge
    return buckets


def frequency_labels(edges: Sequence[float] = FREQUENCY_EDGES) -> list[str]:
    """Names of the frequency buckets, e.g. "0-50 % of occurrences" (the edges, not the exact shares held)."""
    bounds = [0.0, *edges, 1.0]
    return [f"{100 * low:g}-{100 * high:g} % of occurrences" for low, high in itertools.pairwise(bounds)]


def position_labels(edges: Sequence[int] = POSITION_EDGES) -> list[str]:
    """Names of the position buckets, e.g. "0", "1-3", ..., "256+"."""
    bounds = [0, *edges]
    labels = [str(low) if high - low == 1 else f"{low}-{high - 1}" for low, high in itertools.pairwise(bounds)]
    return [*labels, f"{bounds[-1]}+"]


@dataclass
class EnergyByBucket:
    """Running float64 sums of one breakdown: each bucket's energy (B, S), squared norm (B,) and token count (B,)."""

    energy: Float[torch.Tensor, "B S"]
    total: Float[torch.Tensor, " B"]
    tokens: Float[torch.Tensor, " B"]

    @classmethod
    def zeros(cls, n_buckets: int, n_columns: int, device: torch.device | str) -> EnergyByBucket:
        """Empty sums."""
        zeros = torch.zeros(n_buckets, dtype=torch.float64, device=device)
        return cls(torch.zeros(n_buckets, n_columns, dtype=torch.float64, device=device), zeros, zeros.clone())

    def add(
        self,
        bucket: Int[torch.Tensor, " N"],
        token_energy: Float[torch.Tensor, "N S"],
        token_total: Float[torch.Tensor, " N"],
        probed: Bool[torch.Tensor, " N"],
    ) -> None:
        """Add a batch of tokens (rows not `probed` count for nothing)."""
        weight = probed.double()
        self.energy.index_add_(0, bucket, token_energy.double() * weight[:, None])
        self.total.index_add_(0, bucket, token_total.double() * weight)
        self.tokens.index_add_(0, bucket, weight)

    def reduced(self, all_reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> EnergyByBucket:
        """Every rank's sums, in one `all_reduce_sum` of them flattened."""
        n_buckets, n_columns = self.energy.shape
        flat = all_reduce_sum(torch.cat([self.energy.reshape(-1), self.total, self.tokens]))
        energy, total, tokens = flat.split([n_buckets * n_columns, n_buckets, n_buckets])
        return EnergyByBucket(energy.view(n_buckets, n_columns), total, tokens)

    def shares(self, columns: Sequence[int]) -> list[list[float | None]]:
        """Energy share per bucket of each given column, (len(columns), B); None for an empty bucket."""
        rows = [zip(self.energy[:, column].tolist(), self.total.tolist(), strict=True) for column in columns]
        return [[float(e / t) if t > 0 else None for e, t in row] for row in rows]


class Breakdown:
    """Each tangent's and its controls' mean energy by token id and by position bucket, over a probe run."""

    def __init__(
        self,
        vocab_size: int,
        tangent_columns: Sequence[int],
        control_columns: Sequence[slice],
        device: torch.device | str,
        *,
        position_edges: Sequence[int] = POSITION_EDGES,
    ):
        self.tangent_columns, self.control_columns = list(tangent_columns), list(control_columns)
        self.position_edges = tuple(position_edges)
        width = 2 * len(self.tangent_columns)  # each tangent's energy, then each tangent's controls' mean energy
        self.by_id = EnergyByBucket.zeros(vocab_size, width, device)
        self.by_position = EnergyByBucket.zeros(len(self.position_edges) + 1, width, device)

    def add(
        self,
        token_ids: Int[torch.Tensor, " N"],
        positions: Int[torch.Tensor, " N"],
        token_energy: Float[torch.Tensor, "N S"],
        token_total: Float[torch.Tensor, " N"],
        probed: Bool[torch.Tensor, " N"],
    ) -> None:
        """Add a batch's flattened tokens (energies (N, S) in every column); rows not `probed` count for nothing."""
        tangents = [token_energy[:, column, None] for column in self.tangent_columns]  # no index tensor to copy
        controls = torch.stack([token_energy[:, columns].mean(1) for columns in self.control_columns], dim=1)
        energy = torch.cat([*tangents, controls], dim=1)
        known = token_ids < self.by_id.total.numel()
        self.by_id.add(torch.where(known, token_ids, 0), energy, token_total, probed & known)
        self.by_position.add(position_buckets(positions, edges=self.position_edges), energy, token_total, probed)

    def reduce(self, all_reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Replace the sums by `all_reduce_sum` of them (every rank's tokens)."""
        self.by_id, self.by_position = self.by_id.reduced(all_reduce_sum), self.by_position.reduced(all_reduce_sum)

    def by_frequency(
        self, counts: Int[torch.Tensor, " V"] | None = None, *, edges: Sequence[float] = FREQUENCY_EDGES
    ) -> EnergyByBucket:
        """The sums by frequency bucket, cut from `counts` (None: how often each id was probed)."""
        counts = self.by_id.tokens if counts is None else torch.as_tensor(counts).to(self.by_id.tokens.device)
        table = torch.zeros(self.by_id.total.numel(), dtype=torch.float64, device=counts.device)
        shared = min(table.numel(), counts.numel())
        table[:shared] = counts[:shared].double()
        buckets = frequency_bucket_of_ids(table, edges=edges).to(self.by_id.total.device)
        sums = (self.by_id.energy, self.by_id.total, self.by_id.tokens)
        return EnergyByBucket(
            *(sum_.new_zeros(len(edges) + 1, *sum_.shape[1:]).index_add_(0, buckets, sum_) for sum_ in sums)
        )

    def fields(
        self, tangent_index: int, counts: Int[torch.Tensor, " V"] | None, edges: Sequence[float]
    ) -> dict[str, list]:
        """The `ProbeResult` fields `frequency_*` and `position_*` of one tangent (shares None for an empty bucket)."""
        control_index = len(self.tangent_columns) + tangent_index
        out: dict[str, list] = {}
        for prefix, sums, labels in (
            ("frequency", self.by_frequency(counts, edges=edges), frequency_labels(edges)),
            ("position", self.by_position, position_labels(self.position_edges)),
        ):
            tangent, controls = sums.shares([tangent_index, control_index])
            out[f"{prefix}_buckets"] = labels
            out[f"{prefix}_energy_share"] = tangent
            out[f"{prefix}_control_share"] = controls
            out[f"{prefix}_n_tokens"] = [int(count) for count in sums.tokens.tolist()]
        return out
