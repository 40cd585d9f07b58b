# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Token ids kept across reads by the same tokenizer: a sweep tokenises its texts once, not at every checkpoint.

A tokenizer is recognised by `tokenizer_key` (a slow tokenizer only as the same object); another one empties it.

Examples:
    >>> cache = TokenCache()  # doctest: +SKIP
    >>> reader = ia.reading.activations.iter_located_token_activations(mwsp, texts, token_cache=cache)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["TokenCache", "tokenizer_key"]

Batch = dict[str, torch.Tensor]

#: Python-side tokenizer settings that change what `tokenizer(texts, ...)` gives besides its backend.
_SETTINGS = ("pad_token_id", "truncation_side", "add_bos_token", "add_eos_token", "split_special_tokens")


def tokenizer_key(tokenizer: Any) -> str | None:
    """``"sha256:<hex>"`` of a tokenizer's serialised backend pipeline (less its call state), class, size and
    `_SETTINGS`: what decides its token ids; None without a serialisable backend.

    Examples:
        >>> tokenizer_key(tokenizer) == tokenizer_key(copy.deepcopy(tokenizer))  # doctest: +SKIP
        True
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    pipeline = json.loads(backend.to_str())
    for state in ("truncation", "padding"):  # set by each call from its arguments (which the cache's key holds)
        pipeline.pop(state, None)
    digest = hashlib.sha256(json.dumps(pipeline, sort_keys=True).encode())
    digest.update(_settings(tokenizer).encode())
    return f"sha256:{digest.hexdigest()}"


def _settings(tokenizer: Any) -> str:
    """The tokenizer's class, size and Python-side settings, as text (cheap: taken at every lookup)."""
    values = [type(tokenizer).__qualname__, str(len(tokenizer))]
    values += [repr(getattr(tokenizer, name, None)) for name in _SETTINGS]
    return "\0".join(values)


class TokenCache:
    """Tokenised batches and token counts of the last tokenizer seen, reused while it gives the same ids."""

    def __init__(self):
        self._tokenizer: Any = None  # the last tokenizer object seen (held, so that its id is not reused)
        self._backend: str | None = None  # its key, or None (recognised as that object only)
        self._key: tuple | None = None
        self._batches: dict[tuple, tuple[Batch, int]] = {}
        self._counts: dict[tuple, torch.Tensor] = {}

    def _use(self, tokenizer: Any) -> None:
        """Make `tokenizer` the cache's own, dropping what another tokenizer (other ids) left."""
        if tokenizer is not self._tokenizer:
            self._tokenizer, self._backend = tokenizer, tokenizer_key(tokenizer)
        key = (self._backend or ("object", id(tokenizer)), _settings(tokenizer))
        if key != self._key:
            self._key = key
            self._batches.clear()
            self._counts.clear()

    def batch(
        self, tokenizer: Any, texts: Sequence[str], max_length: int, encode: Callable[[], tuple[Batch, int]]
    ) -> tuple[Batch, int]:
        """`encode()`'s (batch (b, l), truncated texts) of `texts` at `max_length`, kept (do not change it in place)."""
        self._use(tokenizer)
        key = (max_length, tuple(texts))
        if key not in self._batches:
            self._batches[key] = encode()
        return self._batches[key]

    def counts(self, tokenizer: Any, texts: Sequence[str], count: Callable[[], torch.Tensor]) -> torch.Tensor:
        """How often each token id occurs in `texts` (`count()`'s the first time, kept after)."""
        self._use(tokenizer)
        key = tuple(texts)
        if key not in self._counts:
            self._counts[key] = count()
        return self._counts[key]
