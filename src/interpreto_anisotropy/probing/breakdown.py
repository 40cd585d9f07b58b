# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The energy share broken down by token frequency and by position: which tokens carry the tangent's energy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import torch
from jaxtyping import Bool, Float, Int

from ..errors import InvalidInputError

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
    return [f"{100 * low:g}-{100 * high:g} % of occurrences" for low, high in pairwise(bounds)]


def position_labels(edges: Sequence[int] = POSITION_EDGES) -> list[str]:
    """Names of the position buckets, e.g. "0", "1-3", ..., "256+"."""
    bounds = [0, *edges]
    labels = [str(low) if high - low == 1 else f"{low}-{high - 1}" for low, high in pairwise(bounds)]
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
        grouped = EnergyByBucket.zeros(len(edges) + 1, self.by_id.energy.shape[1], self.by_id.total.device)
        grouped.energy.index_add_(0, buckets, self.by_id.energy)
        grouped.total.index_add_(0, buckets, self.by_id.total)
        grouped.tokens.index_add_(0, buckets, self.by_id.tokens)
        return grouped

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
