# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Position ids per architecture family, for right-aligned token batches.

Every batch this package runs is right-aligned (real tokens first, padding last), so a sequence's tokens sit at
the same columns as in an unpadded forward. On top of that, the model is given explicit position ids in its own
family's convention, computed from the attention mask:

* most models (learned absolute positions as in GPT-2, BERT, DistilBERT, ELECTRA, OPT; rotary as in GPT-NeoX,
  Llama, Qwen, Gemma, OLMo, ModernBERT, EuroBERT; relative as in DeBERTa) count real tokens from 0;
* the RoBERTa family (RoBERTa, XLM-RoBERTa, CamemBERT, and every model whose embeddings derive positions with
  `create_position_ids_from_input_ids`, e.g. MPNet, ESM, Longformer) counts from `padding_idx + 1`, padding
  sitting at `padding_idx`;
* a model whose forward takes no `position_ids` derives its own, which right alignment makes right.

Interpreto 0.5.2's `get_activations` pads on the left and passes no position ids: models with learned absolute
positions then read each padded text at shifted positions. `uses_absolute_positions` tells when that matters.

Examples:
    >>> from interpreto_anisotropy.reading.positions import PositionConvention, PositionScheme
    >>> PositionScheme(PositionConvention.FROM_ZERO).position_ids(torch.tensor([[1, 1, 0]])).tolist()
    [[0, 1, 1]]
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from enum import Enum

import torch
from jaxtyping import Int

__all__ = ["PositionConvention", "PositionScheme", "right_align", "uses_absolute_positions"]

_ABSOLUTE_POSITION_NAMES = ("wpe", "position_embeddings", "embed_positions")


class PositionConvention(str, Enum):
    """How a model family numbers the positions of real tokens.

    Attributes:
        FROM_ZERO: Real tokens at 0, 1, 2, ... (absolute learned, rotary and relative position models).
        AFTER_PADDING_IDX: Real tokens at padding_idx + 1, + 2, ...; padding at padding_idx (RoBERTa family).
        MODEL_DEFAULT: The forward takes no position ids; the model numbers a right-aligned batch itself.

    Examples:
        >>> PositionConvention("after_padding_idx") is PositionConvention.AFTER_PADDING_IDX
        True
    """

    FROM_ZERO = "from_zero"
    AFTER_PADDING_IDX = "after_padding_idx"
    MODEL_DEFAULT = "model_default"


@dataclass(frozen=True)
class PositionScheme:
    """A model's position convention and, for the RoBERTa family, its padding index.

    Attributes:
        convention: The `PositionConvention`.
        padding_idx: The position of padding tokens (RoBERTa family only), else None.

    Examples:
        >>> scheme = PositionScheme(PositionConvention.AFTER_PADDING_IDX, padding_idx=1)
        >>> scheme.position_ids(torch.tensor([[1, 1, 1, 0]])).tolist()
        [[2, 3, 4, 1]]
        >>> PositionScheme(PositionConvention.FROM_ZERO).position_ids(torch.tensor([[1, 1, 0]])).tolist()
        [[0, 1, 1]]
    """

    convention: PositionConvention
    padding_idx: int | None = None

    @classmethod
    def of(cls, model: torch.nn.Module) -> PositionScheme:
        """The scheme of a Hugging Face model, read from its forward signature and its embedding modules.

        Args:
            model: The model whose `forward` is called.

        Returns:
            Its `PositionScheme`.
        """
        if "position_ids" not in inspect.signature(model.forward).parameters:
            return cls(PositionConvention.MODEL_DEFAULT)
        padding_idx = _padding_offset_index(model)
        if padding_idx is not None:
            return cls(PositionConvention.AFTER_PADDING_IDX, padding_idx=padding_idx)
        return cls(PositionConvention.FROM_ZERO)

    def position_ids(self, attention_mask: Int[torch.Tensor, "b l"]) -> Int[torch.Tensor, "b l"] | None:
        """Position ids (b, l) for a batch's attention mask, or None where the model numbers tokens itself.

        Padding gets the position of the last real token (FROM_ZERO) or `padding_idx` (AFTER_PADDING_IDX); it is
        masked out of every attention, loss and row, so its position never counts.
        """
        mask = attention_mask.long()
        if self.convention is PositionConvention.MODEL_DEFAULT:
            return None
        if self.convention is PositionConvention.AFTER_PADDING_IDX:
            return mask.cumsum(-1) * mask + int(self.padding_idx)
        return (mask.cumsum(-1) - 1).clamp(min=0)


def _padding_offset_index(model: torch.nn.Module) -> int | None:
    """The padding index of a RoBERTa-style embedding module of `model`, if it has one.

    Such a module keeps an integer `padding_idx` beside its `position_embeddings` and derives positions with a
    `create_position_ids_from_input_ids` (a method, or a function of its module).
    """
    for module in model.modules():
        padding_idx = getattr(module, "padding_idx", None)
        if isinstance(module, torch.nn.Embedding) or not isinstance(padding_idx, int):
            continue
        if not isinstance(getattr(module, "position_embeddings", None), torch.nn.Embedding):
            continue
        source = sys.modules.get(type(module).__module__)
        if hasattr(module, "create_position_ids_from_input_ids") or hasattr(
            source, "create_position_ids_from_input_ids"
        ):
            return padding_idx
    return None


def uses_absolute_positions(model: torch.nn.Module) -> bool:
    """Whether a model adds learned absolute position embeddings (GPT-2, OPT, BERT, RoBERTa, DistilBERT, ...).

    Such models read a left-padded text without position ids at shifted positions; rotary and relative models
    do not care where padding sits (their attention depends on differences of positions only).

    Args:
        model: A Hugging Face model.

    Returns:
        True when a position-embedding table (`wpe`, `position_embeddings`, `embed_positions`) is found.
    """
    return any(
        isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _ABSOLUTE_POSITION_NAMES
        for name, module in model.named_modules()
    )


def right_align(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move each row's padding to its end, keeping the order of its real tokens.

    Args:
        batch: `attention_mask` (b, l) and other tensors; every (b, l) tensor is reordered the same way, others
            (sequence labels) are left as they are.

    Returns:
        The right-aligned batch (the same object's values when it already was).

    Examples:
        >>> batch = right_align({"input_ids": torch.tensor([[0, 7, 8]]), "attention_mask": torch.tensor([[0, 1, 1]])})
        >>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
        ([[7, 8, 0]], [[1, 1, 0]])
    """
    mask = batch["attention_mask"]
    padding = (mask == 0).to(torch.int8)
    if not bool((padding[:, :-1] > padding[:, 1:]).any()):
        return batch
    order = torch.argsort(padding, dim=1, stable=True)
    shape = mask.shape
    return {
        key: value.gather(1, order) if value.dim() == 2 and value.shape == shape else value
        for key, value in batch.items()
    }
