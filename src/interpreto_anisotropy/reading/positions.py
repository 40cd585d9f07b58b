# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Position ids per architecture family for right-aligned batches, so a padded text is read as it is alone."""

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
        """The scheme of a Hugging Face model, read from its forward signature and its embedding modules."""
        if "position_ids" not in inspect.signature(model.forward).parameters:
            return cls(PositionConvention.MODEL_DEFAULT)
        padding_idx = _padding_offset_index(model)
        if padding_idx is not None:
            return cls(PositionConvention.AFTER_PADDING_IDX, padding_idx=padding_idx)
        return cls(PositionConvention.FROM_ZERO)

    def position_ids(self, attention_mask: Int[torch.Tensor, "b l"]) -> Int[torch.Tensor, "b l"] | None:
        """Position ids (b, l) for a batch's attention mask, or None where the model numbers tokens itself."""
        mask = attention_mask.long()
        if self.convention is PositionConvention.MODEL_DEFAULT:
            return None
        if self.convention is PositionConvention.AFTER_PADDING_IDX:
            return mask.cumsum(-1) * mask + int(self.padding_idx)
        return (mask.cumsum(-1) - 1).clamp(min=0)


def _padding_offset_index(model: torch.nn.Module) -> int | None:
    """The `padding_idx` of a RoBERTa-style embedding (with `create_position_ids_from_input_ids`), if any."""
    for module in model.modules():
        padding_idx = getattr(module, "padding_idx", None)
        if isinstance(module, torch.nn.Embedding) or not isinstance(padding_idx, int):
            continue
        if not isinstance(getattr(module, "position_embeddings", None), torch.nn.Embedding):
            continue
        owners = (module, sys.modules.get(type(module).__module__))  # the module, or its source file
        if any(hasattr(owner, "create_position_ids_from_input_ids") for owner in owners):
            return padding_idx
    return None


def uses_absolute_positions(model: torch.nn.Module) -> bool:
    """Whether a model has a learned absolute position table (`wpe`, `position_embeddings`, `embed_positions`)."""
    return any(
        isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _ABSOLUTE_POSITION_NAMES
        for name, module in model.named_modules()
    )


def right_align(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move each row's padding to its end in every (b, l) tensor of `batch`, keeping the real tokens' order.

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
