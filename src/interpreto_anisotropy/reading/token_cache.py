# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Token ids kept across reads by the same tokenizer: a sweep tokenises its texts once, not at every checkpoint.

A sweep's checkpoints usually share their tokenizer (the same files, loaded again for each checkpoint). A
`TokenCache` recognises the tokenizer by what decides its output (`tokenizer_key`: for a fast tokenizer, its whole
serialised pipeline, vocabulary and special tokens, with the Python-side settings that change what `__call__`
gives) and hands back the batches it tokenised for an earlier checkpoint. A checkpoint with another tokenizer
empties it. A tokenizer without a serialisable backend (a slow, Python tokenizer) is recognised only as the same
object.

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
    """What identifies the token ids a tokenizer gives: a digest of its backend's serialised pipeline (without the
    truncation and padding state its last call left), its class, size and `_SETTINGS`; None without a backend.

    Args:
        tokenizer: A Hugging Face tokenizer.

    Returns:
        ``"sha256:<hex>"``, or None when the tokenizer has no serialisable backend.

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
    """Tokenised batches and token counts of the last tokenizer seen, reused while the tokenizer gives the same ids.

    The backend's digest is taken once per tokenizer object (its settings at every lookup); a tokenizer that gives
    other ids drops what the cache holds, so it holds one tokenizer's batches at a time.
    """

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
        """The (batch, truncated texts) of `texts` cut at `max_length`: `encode()`'s the first time, kept after.

        Args:
            tokenizer: The tokenizer `encode` calls.
            texts: The batch's texts.
            max_length: The truncation length `encode` uses.
            encode: Tokenises `texts`, giving (`input_ids` and `attention_mask` (b, l), how many were truncated).

        Returns:
            What `encode` gave (the same tensors each time: do not change them in place).
        """
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
