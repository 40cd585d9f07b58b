# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The early checkpoints' activations at one split point, pooled for the reference tangent.

Examples:
    >>> pool = EarlyPool(streamed=True, centering=EarlyCentering.PER_CHECKPOINT)  # doctest: +SKIP
    >>> for new_tangent, batches in early_checkpoints:  # doctest: +SKIP
    ...     pool.start_checkpoint(new_tangent)
    ...     for rows in batches:
    ...         pool.add(rows)
    ...     pool.end_checkpoint()
    >>> reference = pool.fit()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import torch
from jaxtyping import Float

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator, top_eigenvectors
from ..errors import EmptyInputError
from ..tangents.explainers import TangentExplainer, _numerical_rank, _warn_if_rank_below
from ..tangents.subspace import Subspace

__all__ = ["EarlyCentering", "EarlyPool", "check_rank"]


def check_rank(nb_concepts: int, n_rows: int, values: Float[torch.Tensor, " k"]) -> None:
    """Warn, as a streamed PCA does, when the within-checkpoint rows span fewer than `nb_concepts` dimensions."""
    _warn_if_rank_below(nb_concepts, n_rows, min(n_rows - 1, _numerical_rank(values)), centred=True)


class EarlyCentering(str, Enum):
    """How the early checkpoints' activations are centred before the reference tangent is fitted on them.

    Attributes:
        POOLED: Once, on the mean of all the pooled rows (the paper's reading).
        PER_CHECKPOINT: Each checkpoint's rows on their own mean (the drift of the mean between checkpoints is left
            out of the tangent).

    Examples:
        >>> EarlyCentering("per_checkpoint") is EarlyCentering.PER_CHECKPOINT
        True
    """

    POOLED = "pooled"
    PER_CHECKPOINT = "per_checkpoint"


class EarlyPool:
    """Rows of the early checkpoints, added checkpoint by checkpoint, and the reference tangent fitted on them.

    Args:
        streamed: Whether the method streams (PCA: moments, memory flat in the number of rows) or pools rows.
        centering: Where the rows are centred.
    """

    def __init__(self, *, streamed: bool, centering: EarlyCentering):
        self.streamed = streamed
        self.centering = EarlyCentering(centering)
        self.new_tangent: Callable[[], TangentExplainer] | None = None
        self.tangent: TangentExplainer | None = None  # streamed and pooled: one PCA fed every row
        self.dim: int | None = None
        self.rows: list[torch.Tensor] = []  # pooled methods: every row so far (centred per checkpoint if asked)
        self.checkpoint_rows: list[torch.Tensor] = []
        self.checkpoint_moments: MomentAccumulator | None = None
        self.within: torch.Tensor | None = None  # streamed, per checkpoint: summed within-checkpoint scatter (d, d)
        self.sums: torch.Tensor | None = None  # per checkpoint: the sum of every row (d,)
        self.count = 0

    def start_checkpoint(self, new_tangent: Callable[[], TangentExplainer]) -> None:
        """Start the rows of the next early checkpoint.

        Args:
            new_tangent: Makes an unfitted `TangentExplainer` on this checkpoint's split point.
        """
        self.new_tangent = new_tangent
        if self.tangent is None and self.dim is None:
            first = new_tangent()
            self.dim = first.input_size
            if self.streamed and self.centering is EarlyCentering.POOLED:
                self.tangent = first
        self.checkpoint_rows, self.checkpoint_moments = [], None

    def add(self, rows: Float[torch.Tensor, "n d"]) -> None:
        """Add a batch of the current checkpoint's rows."""
        if self.tangent is not None:
            self.tangent.partial_fit(rows)
        elif self.streamed:
            if self.checkpoint_moments is None:
                self.checkpoint_moments = MomentAccumulator(rows.shape[1], device=rows.device)
            self.checkpoint_moments.update(rows)
        else:
            self.checkpoint_rows.append(rows.float().cpu())

    def end_checkpoint(self) -> None:
        """Close the current checkpoint: pool its rows, centred on their own mean when asked."""
        if self.tangent is not None:
            return
        if self.streamed:
            self._pool_moments()
        elif self.checkpoint_rows:
            rows = torch.cat(self.checkpoint_rows)
            if self.centering is EarlyCentering.PER_CHECKPOINT:
                self.sums = rows.double().sum(0) if self.sums is None else self.sums + rows.double().sum(0)
                self.count += rows.shape[0]
                rows = rows - rows.mean(0)
            self.rows.append(rows)

    def _pool_moments(self) -> None:
        moments = self.checkpoint_moments or MomentAccumulator(self.dim)  # every rank takes part, even with no rows
        moments = distributed.all_reduce_moments(moments)
        if moments.count == 0:
            return
        scatter = moments.covariance() * moments.count
        row_sum = moments.mean * moments.count
        self.within = scatter if self.within is None else self.within + scatter.to(self.within)
        self.sums = row_sum if self.sums is None else self.sums + row_sum.to(self.sums)
        self.count += moments.count

    def fit(self) -> Subspace:
        """The reference tangent fitted on every early checkpoint's rows.

        Raises:
            EmptyInputError: No rows were read.
        """
        if self.tangent is not None:
            return self.tangent.merge_across_ranks().finalize().subspace
        if self.streamed:
            if not self.count:
                raise EmptyInputError("The early checkpoints gave no activation rows to fit the reference on.")
            tangent = self.new_tangent()
            values, vectors = top_eigenvectors(self.within / self.count, tangent.nb_concepts)
            check_rank(tangent.nb_concepts, self.count, values)
            mean = (self.sums / self.count).float()
            basis = vectors.float().contiguous()
            return Subspace(basis, mean=mean, method="pca", split_point=tangent.splitter.split_point)
        if not self.rows:
            raise EmptyInputError("The early checkpoints gave no activation rows to fit the reference on.")
        subspace = self.new_tangent().fit(self.rows).subspace
        if self.centering is EarlyCentering.PER_CHECKPOINT:
            subspace = subspace.replace(mean=(self.sums / self.count).to(subspace.basis))
        return subspace
