# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The activation reader: token activations at a split point, with the token id of each row, batch by batch.

This is how the package reads activations (tangent fits, sweeps, metrics), and the reader to fit tangents with:
each text is read exactly as it is read alone (right-aligned batches, position ids in the model family's
convention, the tokenizer's state untouched), and its rows follow the token policy the gradient probe uses
(`batching.token_rows`: real tokens, special tokens left out unless `include_special=True`), so that fit rows and
probe rows are the same tokens.

Interpreto 0.5.2's `get_activations(..., TOKEN)` is not a substitute on models with learned absolute positions
(GPT-2, OPT, BERT, RoBERTa, DistilBERT, ELECTRA, ...): it sets `tokenizer.padding_side = "left"` and passes no
position ids, so every padded text is read at shifted positions. It also gives no token ids, which the frequency
analyses need.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from jaxtyping import Float, Int
from tqdm.auto import tqdm

from ..commons.host_reads import to_device
from ..errors import EmptyInputError, InvalidInputError
from .split_point import SplitPoint

__all__ = ["iter_token_activations", "token_activations"]


def iter_token_activations(
    splitter: BaseSplitter,
    texts: Any,
    *,
    batch_size: int | None = None,
    max_length: int | None = None,
    max_tokens: int | None = None,
    include_special: bool = False,
    progress: bool = False,
    shard: tuple[int, int] = (0, 1),
    autocast_dtype: str | torch.dtype | None = None,
) -> Iterator[tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"]]]:
    """Yield (activations (n_b, d), token ids (n_b,)) batch by batch, on the model's device.

    Args:
        splitter: Interpreto `ModelWithSplitPoints` at the split point to read.
        texts: List of texts, or a dict / BatchEncoding with `input_ids` and `attention_mask`.
        batch_size: Sequences per forward; defaults to the splitter's `batch_size`.
        max_length: Truncation length; defaults to the model's maximum positions.
        max_tokens: Stop after this many rows.
        include_special: Keep special tokens (BOS, CLS, SEP, ...) as rows.
        progress: Show a progress bar.
        shard: `(rank, world)`: read only the batches whose index is `rank` modulo `world` (for data-parallel
            reading under torch.distributed; `max_tokens` then caps this shard).
        autocast_dtype: "bf16" or "fp16" (or the torch dtype): run the forward under `torch.autocast`.

    Yields:
        (activations (n_b, d), token ids (n_b,)) of each batch's kept tokens, on the model's device.

    Raises:
        InvalidInputError: Bad inputs or `max_tokens`.
        EmptyInputError: No texts.
        SplitPointError: A split point that is not in the model or has no hidden-state output.

    Examples:
        >>> tangent = ia.PCATangent(mwsp, nb_concepts=16)  # doctest: +SKIP
        >>> for rows, token_ids in ia.iter_token_activations(mwsp, texts, max_tokens=100_000):  # doctest: +SKIP
        ...     tangent.partial_fit(rows)
    """
    if max_tokens is not None and max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be positive, got {max_tokens}.")
    point = SplitPoint(splitter, autocast_dtype=autocast_dtype, include_special=include_special)
    batcher = point.batcher(batch_size=batch_size, max_length=max_length)
    device = point.device
    n_batches, batches = batcher.batches(texts)
    seen = 0
    shard_rank, shard_count = shard
    # The rows of batch i are read (a host synchronisation: their number is data-dependent) only once batch i + 1
    # is queued, so the device computes while the host waits and tokenises.
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    for batch_index, (batch, sequence_ids) in enumerate(
        tqdm(batches, total=n_batches, desc="Activations", disable=not progress)
    ):
        if sequence_ids.numel() == 0 or batch_index % shard_count != shard_rank:
            continue
        batch = to_device(batch, device)
        current = (point.read(batch), point.rows(batch), batch["input_ids"])
        if pending is not None:
            rows, ids = _kept_rows(pending, None if max_tokens is None else max_tokens - seen)
            seen += rows.shape[0]
            if rows.shape[0]:
                yield rows, ids
            if max_tokens is not None and seen >= max_tokens:
                return
        pending = current
    if pending is not None:
        rows, ids = _kept_rows(pending, None if max_tokens is None else max_tokens - seen)
        if rows.shape[0]:
            yield rows, ids


def _kept_rows(
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor], limit: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kept rows (n, d) and their token ids (n,) of a batch's hidden states (b, l, d), at most `limit`."""
    hidden, keep, input_ids = pending
    rows, ids = hidden[keep], input_ids[keep]
    return (rows, ids) if limit is None else (rows[:limit], ids[:limit])


def token_activations(
    splitter: BaseSplitter, texts: Any, **kwargs: Any
) -> tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"]]:
    """All rows of `iter_token_activations`, concatenated: (activations (n, d), token ids (n,)).

    Args:
        splitter: Interpreto `ModelWithSplitPoints` at the split point to read.
        texts: List of texts, or a dict / BatchEncoding with `input_ids` and `attention_mask`.
        **kwargs: Options of `iter_token_activations` (batch_size, max_length, max_tokens, include_special, ...).

    Returns:
        (activations (n, d), token ids (n,)), on the model's device.

    Raises:
        EmptyInputError: When no token is read.

    Examples:
        >>> acts, ids = token_activations(mwsp, ["def f(x): return x"])  # doctest: +SKIP
        >>> acts.shape[0] == ids.shape[0]  # doctest: +SKIP
        True
    """
    parts = list(iter_token_activations(splitter, texts, **kwargs))
    if not parts:
        raise EmptyInputError("No token activations were read: the texts are empty or hold only special tokens.")
    return torch.cat([rows for rows, _ in parts]), torch.cat([ids for _, ids in parts])
