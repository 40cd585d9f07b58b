# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One read of a checkpoint's fit texts at a split point: its own tangent, and the rows its metrics are taken on.

Examples:
    >>> reader = FitReader(tangent, streamed=True, max_sample=4000)  # doctest: +SKIP
    >>> for rows, ids, locations in batches:  # doctest: +SKIP
    ...     reader.add(rows, ids, locations)
    >>> read = reader.finish()  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int

from ..errors import AnisotropyError, EmptyInputError
from ..tangents.explainers import TangentExplainer
from ..tangents.subspace import Subspace

__all__ = ["FitRead", "FitReader"]


@dataclass
class FitRead:
    """A checkpoint's fit texts, read at a split point: its own tangent and its metric sample.

    Attributes:
        sample: The first `max_sample` rows, (n, d), on `device` or (kept for later) on the host.
        ids: Their token ids, (n,).
        locations: Their (text index, token index), (n, 2), on the host.
        device: Where the reader gave the rows (where `on_device` puts them back).
        tangent: The fitted explainer (its subspace taken when asked); None once kept.
        own: The fitted subspace, once taken.
    """

    sample: Float[torch.Tensor, "n d"]
    ids: Int[torch.Tensor, " n"]
    locations: Int[torch.Tensor, "n 2"]
    device: torch.device
    tangent: TangentExplainer | None = None
    own: Subspace | None = None

    def subspace(self) -> Subspace:
        """The checkpoint's own tangent subspace."""
        return self.own if self.own is not None else self.tangent.subspace

    def on_device(self) -> tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"], Int[torch.Tensor, "n 2"]]:
        """(sample, ids, locations), the first two where the reader gave them (a copy: the same values)."""
        return self.sample.to(self.device), self.ids.to(self.device), self.locations


class FitReader:
    """Feeds a read's batches to a checkpoint's own tangent and keeps its first rows for the metrics.

    Args:
        tangent: The checkpoint's unfitted `TangentExplainer` at the split point.
        streamed: Whether the method streams (`partial_fit` per batch) or fits once on the pooled rows.
        max_sample: Rows kept for the activation metrics (`max_metric_tokens`).
    """

    def __init__(self, tangent: TangentExplainer, *, streamed: bool, max_sample: int):
        self.tangent = tangent
        self.streamed = streamed
        self.max_sample = max_sample
        self.pooled: list[torch.Tensor] = []
        self.sample: list[torch.Tensor] = []
        self.ids: list[torch.Tensor] = []
        self.locations: list[torch.Tensor] = []
        self.n_sample = 0
        self.error: AnisotropyError | None = None  # what `kept` hands on instead of a read

    def add(self, rows: Float[torch.Tensor, "n d"], ids: Int[torch.Tensor, " n"], locations: Int[torch.Tensor, "n 2"]):
        """Add one batch of rows (n, d), their token ids (n,) and locations (n, 2)."""
        rows = rows.float()
        if self.n_sample < self.max_sample:
            take = self.max_sample - self.n_sample
            self.sample.append(rows[:take])
            self.ids.append(ids[:take])
            self.locations.append(locations[:take])
            self.n_sample += self.sample[-1].shape[0]
        if self.streamed:
            self.tangent.partial_fit(rows)
        else:
            self.pooled.append(rows)

    def finish(self) -> FitRead:
        """The read: the tangent fitted (pooled methods; PCA's basis is computed when its subspace is asked for).

        Raises:
            EmptyInputError: No row was read.
        """
        if not self.sample:
            raise EmptyInputError(
                "No token activations were read: the fit texts are empty or hold only special tokens."
            )
        if not self.streamed:
            self.tangent.fit(torch.cat(self.pooled))
        sample = torch.cat(self.sample)
        return FitRead(sample, torch.cat(self.ids), torch.cat(self.locations), sample.device, tangent=self.tangent)

    def add_or_defer(self, rows: torch.Tensor, ids: torch.Tensor, locations: torch.Tensor) -> None:
        """`add`, keeping our error (for `kept`) instead of raising it; after one, the batches are ignored."""
        if self.error is not None:
            return
        try:
            self.add(rows, ids, locations)
        except AnisotropyError as error:
            self.error = error

    def kept(self) -> FitRead | AnisotropyError:
        """The read for a later turn (its subspace taken, the explainer and with it the model let go, the sample on
        the host), or the error its rows would raise there."""
        if self.error is not None:
            return self.error
        try:
            read = self.finish()
            own = read.subspace()
        except AnisotropyError as error:
            return error
        return FitRead(read.sample.cpu(), read.ids.cpu(), read.locations, read.device, own=own)
