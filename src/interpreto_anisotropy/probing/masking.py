# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""BERT's masked-LM corruption, shared by the masked-LM objective and the toy trainer.

Of the tokens selected for prediction, 80 % become the mask token, 10 % a random token and 10 % stay as they are.
Callers draw the random numbers their own way (per sequence for the probe's reproducible masks, per batch for
training); this module turns the draws into corrupted ids.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int

__all__ = ["MASK_SHARE", "RANDOM_SHARE", "corrupt", "special_tokens_mask"]

MASK_SHARE = 0.8
RANDOM_SHARE = 0.1


def corrupt(
    input_ids: Int[torch.Tensor, "..."],
    selected: Bool[torch.Tensor, "..."],
    draw: Float[torch.Tensor, "..."],
    random_tokens: Int[torch.Tensor, "..."],
    mask_token_id: int,
) -> Int[torch.Tensor, "..."]:
    """The ids with BERT's 80/10/10 corruption applied where `selected`.

    Args:
        input_ids: Token ids, any shape.
        selected: The tokens to predict, same shape.
        draw: Uniform draws in [0, 1), same shape: below 0.8 masks, [0.8, 0.9) randomises, the rest keeps.
        random_tokens: The replacement ids of randomised tokens, same shape.
        mask_token_id: The tokenizer's mask id.

    Returns:
        A corrupted copy of `input_ids`.

    Examples:
        >>> ids = torch.tensor([5, 6, 7, 8])
        >>> corrupt(ids, torch.tensor([True, True, True, False]), torch.tensor([0.1, 0.85, 0.95, 0.1]),
        ...         torch.tensor([9, 9, 9, 9]), mask_token_id=0).tolist()
        [0, 9, 7, 8]
    """
    corrupted = input_ids.clone()
    corrupted[selected & (draw < MASK_SHARE)] = mask_token_id
    randomised = selected & (draw >= MASK_SHARE) & (draw < MASK_SHARE + RANDOM_SHARE)
    corrupted[randomised] = random_tokens[randomised]
    return corrupted


def special_tokens_mask(input_ids: Int[torch.Tensor, "..."], special_ids: list[int]) -> Bool[torch.Tensor, "..."]:
    """Where `input_ids` holds one of `special_ids` (never selected for masking).

    Examples:
        >>> special_tokens_mask(torch.tensor([0, 5, 2]), [0, 2]).tolist()
        [True, False, True]
    """
    return torch.isin(input_ids, torch.tensor(sorted(set(special_ids)), dtype=input_ids.dtype))
