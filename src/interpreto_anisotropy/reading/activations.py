# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The activation reader: token activations at a split point, with the token id of each row, batch by batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from jaxtyping import Float, Int

from ..commons.progress import progress_bar
from ..commons.tensors import to_device
from ..errors import InvalidInputError, NonFiniteError
from .batching import TokenCache
from .split_point import SplitPoint

__all__ = [
    "NONFINITE_READ_ADVICE",
    "iter_located_token_activations",
    "iter_token_activations",
    "token_activations",
]

#: What to try when activations read from texts hold NaN or infinity (`token_activations`, `TangentExplainer.fit`).
NONFINITE_READ_ADVICE = (
    "Check the model's weights (NaN or infinity in them), or, if the model runs in float64 and batches are padded "
    "(some models, e.g. Gemma2, give NaN on real tokens of padded float64 batches, a transformers bug), read with "
    "batch_size=1 or load the model in float32."
)


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
    call: str | int | None = None,
) -> Iterator[tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"]]]:
    """Yield (activations (n_b, d), token ids (n_b,)) batch by batch, on the model's device.

    Args:
        splitter: Interpreto `ModelWithSplitPoints` at the split point to read.
        texts: List of texts, or a dict / BatchEncoding with `input_ids` and `attention_mask`.
        batch_size: Sequences per forward; defaults to the splitter's `batch_size`.
        max_length: Truncation length in tokens (default: the model's and tokenizer's limit).
        max_tokens: Stop after this many rows (of this shard).
        include_special: Keep special tokens (BOS, CLS, SEP, ...) as rows.
        progress: Show a progress bar.
        shard: `(rank, world)`: read only the batches whose index is `rank` modulo `world`.
        autocast_dtype: "bf16" or "fp16" (or the torch dtype): run the forward under `torch.autocast`.
        call: Which call of a module run several times per forward (`SplitPoint`); give `GradientProbe` the same.

    Yields:
        (activations (n_b, d), token ids (n_b,)) of each batch's kept tokens, on the model's device.

    Raises:
        InvalidInputError: Bad or no inputs, bad `max_tokens`, or a split point not in the model, without hidden
            states, or run several times without `call`.

    Examples:
        >>> tangent = ia.PCATangent(mwsp, nb_concepts=16)  # doctest: +SKIP
        >>> for rows, token_ids in iter_token_activations(mwsp, texts, max_tokens=100_000):  # doctest: +SKIP
        ...     tangent.partial_fit(rows)
    """
    for rows, ids, _ in _iter_kept(dict(locals()), located=False):
        yield rows, ids


def iter_located_token_activations(
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
    call: str | int | None = None,
    token_cache: TokenCache | None = None,
) -> Iterator[tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"], Int[torch.Tensor, "n 2"]]]:
    """`iter_token_activations` with where each row comes from: (activations, token ids, locations).

    A location is (index of the text in `texts`, index of the token in the text's tokenisation, special tokens
    included). Args and Raises are `iter_token_activations`'s, plus `token_cache` (a `TokenCache` shared by reads).

    Yields:
        (activations (n_b, d), token ids (n_b,)) on the model's device, locations (n_b, 2) on the host.

    Examples:
        >>> for rows, ids, where in iter_located_token_activations(mwsp, texts):  # doctest: +SKIP
        ...     text_index, position = where[0].tolist()
    """
    yield from _iter_kept(dict(locals()), located=True)


def _iter_kept(
    options: dict[str, Any], *, located: bool
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """The kept rows, token ids and (when `located`) locations of each batch, read with a public reader's arguments."""
    max_tokens = options["max_tokens"]
    if max_tokens is not None and max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be positive, got {max_tokens}.")
    point = SplitPoint(
        options["splitter"], **{name: options[name] for name in ("autocast_dtype", "include_special", "call")}
    )
    batcher = point.batcher(
        batch_size=options["batch_size"], max_length=options["max_length"], token_cache=options.get("token_cache")
    )
    n_batches, batches = batcher.batches(options["texts"])
    shard_rank, shard_count = options["shard"]
    batches = progress_bar(batches, progress=options["progress"], total=n_batches, desc="Activations")
    reads = (
        (point.read(batch), point.rows(batch), batch["input_ids"], sequence_ids)
        for batch_index, (batch, sequence_ids) in enumerate(batches)
        if sequence_ids.numel() and batch_index % shard_count == shard_rank
        for batch in [to_device(batch, point.device)]
    )
    # The rows of batch i are read (a host synchronisation: their number is data-dependent) only once batch i + 1
    # is queued, so the device computes while the host waits and tokenises.
    seen, pending = 0, next(reads, None)
    while pending is not None:
        queued = next(reads, None)
        hidden, keep, input_ids, sequence_ids = pending
        stop = None if max_tokens is None else max_tokens - seen
        where = None
        if located:
            batch_rows, positions = keep.cpu().nonzero(as_tuple=True)  # row-major: the order of the rows below
            where = torch.stack([sequence_ids[batch_rows], positions], dim=1)[:stop]
        rows = hidden[keep][:stop]
        seen += rows.shape[0]
        if rows.shape[0]:
            yield rows, input_ids[keep][:stop], where
        if max_tokens is not None and seen >= max_tokens:
            batcher.note_truncation()  # of the texts read so far (the batches' end says it otherwise)
            return
        pending = queued


def token_activations(
    splitter: BaseSplitter, texts: Any, **kwargs: Any
) -> tuple[Float[torch.Tensor, "n d"], Int[torch.Tensor, " n"]]:
    """All rows of `iter_token_activations`, concatenated: (activations (n, d), token ids (n,)).

    Args:
        splitter: Interpreto `ModelWithSplitPoints` at the split point to read.
        texts: List of texts, or a dict / BatchEncoding with `input_ids` and `attention_mask`.
        **kwargs: Options of `iter_token_activations`.

    Returns:
        (activations (n, d), token ids (n,)), on the model's device.

    Raises:
        InvalidInputError: When no token is read.
        NonFiniteError: Rows that hold NaN or infinity (with `fit`'s advice, `NONFINITE_READ_ADVICE`).

    Examples:
        >>> acts, ids = token_activations(mwsp, ["def f(x): return x"])  # doctest: +SKIP
        >>> acts.shape[0] == ids.shape[0]  # doctest: +SKIP
        True
    """
    parts = list(iter_token_activations(splitter, texts, **kwargs))
    if not parts:
        raise InvalidInputError("No token activations were read: the texts are empty or hold only special tokens.")
    rows = torch.cat([rows for rows, _ in parts])
    if not torch.isfinite(rows).all():  # one host read, after every batch
        bad = int((~torch.isfinite(rows)).any(dim=1).sum())
        raise NonFiniteError(f"{bad} of the {rows.shape[0]} rows read hold NaN or infinity. {NONFINITE_READ_ADVICE}")
    return rows, torch.cat([ids for _, ids in parts])
