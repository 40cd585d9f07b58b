# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Token batches of the gradient probe and the activation reader (lazy, right-aligned), and the token policy."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from jaxtyping import Bool, Int

from ..commons.options import check_positive_int
from ..errors import InvalidInputError, ReadingWarning
from .positions import right_align

Batch = dict[str, torch.Tensor]


#: Python-side tokenizer settings that change what `tokenizer(texts, ...)` gives besides its backend.
_SETTINGS = ("pad_token_id", "truncation_side", "add_bos_token", "add_eos_token", "split_special_tokens")


def tokenizer_key(tokenizer: Any) -> str | None:
    """``"sha256:<hex>"`` of what decides a tokenizer's ids (backend pipeline, `_settings`); None without a backend."""
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
        self._values: dict[tuple, Any] = {}  # (max_length, texts): (batch, truncated texts); ("counts", texts): counts

    def kept(self, tokenizer: Any, key: tuple, make: Callable[[], Any]) -> Any:
        """`make()`'s value for `key`, kept (do not change it in place) while `tokenizer` gives the same ids."""
        if tokenizer is not self._tokenizer:
            self._tokenizer, self._backend = tokenizer, tokenizer_key(tokenizer)
        tokenizer_key_now = (self._backend or ("object", id(tokenizer)), _settings(tokenizer))
        if tokenizer_key_now != self._key:
            self._key = tokenizer_key_now
            self._values.clear()
        if key not in self._values:
            self._values[key] = make()
        return self._values[key]

    def counts(self, tokenizer: Any, texts: Sequence[str], count: Callable[[], torch.Tensor]) -> torch.Tensor:
        """How often each token id occurs in `texts` (`count()`'s the first time, kept after)."""
        return self.kept(tokenizer, ("counts", tuple(texts)), count)


def ensure_pad_token(tokenizer: Any, *, source: str | None = None, stacklevel: int = 3) -> None:
    """Give a tokenizer without a pad token (changed in place) its eos token as pad token, with a warning."""
    if getattr(tokenizer, "pad_token", None) is not None:
        return
    owner = "The tokenizer" if source is None else f"The tokenizer of {source!r}"
    eos = getattr(tokenizer, "eos_token", None)
    if eos is None:
        raise InvalidInputError(
            f"{owner} has no pad token and no eos token to pad with; set one first, e.g. tokenizer.add_special_tokens({{'pad_token': '[PAD]'}}) and resize the model's embeddings (Interpreto's get_activations needs a pad token too)."
        )
    warnings.warn(
        f"{owner} has no pad token: padding with its eos token {eos!r} (padding is masked out of every loss and row; Interpreto's get_activations needs tokenizer.pad_token set too).",
        ReadingWarning,
        stacklevel=stacklevel,
    )
    tokenizer.pad_token = eos


_AUTOCAST_NAMES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


def autocast_dtype(value: str | torch.dtype | None) -> torch.dtype | None:
    """The autocast dtype named by None, "bf16" / "bfloat16", "fp16" / "float16" or the dtype, else an `InvalidInputError`."""
    if value is None or value in (torch.bfloat16, torch.float16):
        return value
    if isinstance(value, str) and value.lower() in _AUTOCAST_NAMES:
        return _AUTOCAST_NAMES[value.lower()]
    raise InvalidInputError(f"autocast dtype must be None, 'bf16' or 'fp16' (or the torch dtype), got {value!r}.")


def autocast(device: torch.device | str, dtype: torch.dtype | None) -> torch.autocast:
    """`torch.autocast` on `device` with `dtype`, disabled when `dtype` is None."""
    return torch.autocast(torch.device(device).type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def special_token_ids(tokenizer: Any) -> torch.Tensor:
    """The sorted ids (s,) of a tokenizer's special tokens, or `[-1]` (matching no token) when there are none."""
    ids = sorted({int(index) for index in getattr(tokenizer, "all_special_ids", ()) if index is not None})
    return torch.tensor(ids or [-1], dtype=torch.long)


def token_rows(
    input_ids: Int[torch.Tensor, "b l"],
    attention_mask: Int[torch.Tensor, "b l"],
    special_ids: Int[torch.Tensor, " s"],
    *,
    include_special: bool = False,
) -> Bool[torch.Tensor, "b l"]:
    """The token policy's rows (b, l): real tokens, special ones (`special_ids`) out unless `include_special`."""
    rows = attention_mask.bool()
    return rows if include_special else rows & ~torch.isin(input_ids, special_ids.to(input_ids.device))


class TokenBatcher:
    """Lazy tokenised, right-aligned batches of texts (or of pre-tokenised tensors)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        batch_size: int,
        max_length: int,
        min_tokens: int = 1,
        vocab_size: int | None = None,
        token_cache: TokenCache | None = None,
    ):
        if getattr(tokenizer, "pad_token", None) is None:  # a copy that pads with its eos token
            tokenizer = copy.deepcopy(tokenizer)
            ensure_pad_token(tokenizer, stacklevel=4)
        self.tokenizer = tokenizer
        self.token_cache = token_cache
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.max_length = check_positive_int("max_length", max_length)
        self.min_tokens = min_tokens
        self.vocab_size = vocab_size
        self.skipped_sequences = self.truncated_sequences = 0  # of the last `batches`
        self._truncation_noted = False

    def batches(self, inputs: Any, labels: Any = None) -> tuple[int, Iterator[tuple[Batch, torch.Tensor]]]:
        """The number of batches and a lazy iterator of (batch, indices of its sequences), batches maybe empty."""
        if isinstance(inputs, str):
            inputs = [inputs]
        texts = tensors = None
        if isinstance(inputs, Mapping):
            if "input_ids" not in inputs:
                raise InvalidInputError("Tokenised inputs must hold 'input_ids' (and preferably 'attention_mask').")
            input_ids = torch.as_tensor(inputs["input_ids"]).cpu()  # tokens on a device: read back once, batched here
            if input_ids.dim() != 2:
                raise InvalidInputError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}.")
            self._check_ids(input_ids)  # once for all the inputs
            mask = inputs.get("attention_mask")
            attention_mask = torch.ones_like(input_ids) if mask is None else torch.as_tensor(mask).long().cpu()
            tensors, n_sequences = {"input_ids": input_ids, "attention_mask": attention_mask}, input_ids.shape[0]
        elif isinstance(inputs, Sequence) and all(isinstance(text, str) for text in inputs):
            texts, n_sequences = list(inputs), len(inputs)
        else:
            raise InvalidInputError("inputs must be a list of strings or a dict/BatchEncoding of tensors.")
        if n_sequences == 0:
            raise InvalidInputError("No texts given: pass a non-empty list of strings.")
        if labels is not None:
            labels = torch.as_tensor(labels).cpu()
            if labels.shape[0] != n_sequences:
                raise InvalidInputError(f"Got {labels.shape[0]} labels for {n_sequences} sequences.")
        self.skipped_sequences = self.truncated_sequences = 0

        def generate() -> Iterator[tuple[Batch, torch.Tensor]]:
            for start in range(0, n_sequences, self.batch_size):
                stop = min(start + self.batch_size, n_sequences)
                if tensors is None:
                    batch = self._encode(texts[start:stop])
                else:
                    batch = {key: value[start:stop] for key, value in tensors.items()}
                if labels is not None:
                    batch["labels"] = labels[start:stop]
                yield self._usable(batch, torch.arange(start, stop))
            self.note_truncation()

        return math.ceil(n_sequences / self.batch_size), generate()

    def _encode(self, texts: list[str]) -> Batch:
        """The batch of `texts` (tokenised or kept by the token cache), its ids checked, its truncations counted."""
        key, tokenise = (self.max_length, tuple(texts)), functools.partial(self._tokenise, texts)
        batch, truncated = (
            tokenise() if self.token_cache is None else self.token_cache.kept(self.tokenizer, key, tokenise)
        )
        self._check_ids(batch["input_ids"])  # on the host, before the batch goes to the device
        self.truncated_sequences += truncated
        return dict(batch)  # `_usable` copies the tensors before anything changes them

    def _tokenise(self, texts: list[str]) -> tuple[Batch, int]:
        """(`input_ids` and `attention_mask` (b, l) of `texts`, right-padded, how many of them were truncated)."""
        encoded = self.tokenizer(
            texts, padding=True, padding_side="right", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        batch = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
        return batch, self._count_truncated(texts, encoded["attention_mask"])

    def _count_truncated(self, texts: list[str], attention_mask: Int[torch.Tensor, "b l"]) -> int:
        """How many of a batch's texts `max_length` cut: those at the limit, tokenised again one token longer."""
        lengths = attention_mask.sum(1).tolist()
        at_limit = [text for text, length in zip(texts, lengths, strict=True) if length >= self.max_length]
        if not at_limit:
            return 0
        longer = self.tokenizer(at_limit, truncation=True, max_length=self.max_length + 1)["input_ids"]
        return sum(len(ids) > self.max_length for ids in longer)

    def note_truncation(self, *, stacklevel: int = 2) -> None:
        """Say once per batcher (a `ReadingWarning`) how many texts were cut to `max_length` tokens."""
        if not self.truncated_sequences or self._truncation_noted:
            return
        self._truncation_noted = True
        warnings.warn(
            f"{self.truncated_sequences} text(s) were longer than max_length={self.max_length} tokens and were truncated to {self.max_length} tokens (their later tokens are not read). Pass a larger max_length (up to the model's positions and its tokenizer's model_max_length), or split the texts.",
            ReadingWarning,
            stacklevel=stacklevel,
        )

    def _check_ids(self, input_ids: Int[torch.Tensor, "b l"]) -> None:
        """Refuse token ids the model's input embedding has no row for (an IndexError or a CUDA assert there)."""
        if self.vocab_size is None or input_ids.numel() == 0:
            return
        low, high = (int(value) for value in torch.aminmax(input_ids))
        if low >= 0 and high < self.vocab_size:
            return
        tokens = f"{len(self.tokenizer)} tokens" if hasattr(self.tokenizer, "__len__") else "its vocabulary"
        raise InvalidInputError(
            f"Token id {high if high >= self.vocab_size else low} is outside the model's input embedding, which has {self.vocab_size} rows (ids 0 to {self.vocab_size - 1}), while the tokenizer has {tokens}: the tokenizer (or the token ids given) does not belong to this model; use the model's own tokenizer (after adding tokens to it, call model.resize_token_embeddings(len(tokenizer)))."
        )

    def _usable(self, batch: Batch, sequence_ids: torch.Tensor) -> tuple[Batch, torch.Tensor]:
        usable = batch["attention_mask"].sum(1) >= self.min_tokens
        self.skipped_sequences += int((~usable).sum())
        batch = {key: value[usable] for key, value in batch.items()}
        sequence_ids = sequence_ids[usable]
        if sequence_ids.numel() == 0:
            return batch, sequence_ids
        batch = right_align(batch)
        width = int(batch["attention_mask"].sum(1).max())
        return {key: value[:, :width] if value.dim() == 2 else value for key, value in batch.items()}, sequence_ids
