# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Which positions of a training batch are gradient rows, and how many loss terms it holds.

The rule is the probe's (`Objective.probed_tokens` and the token policy `batching.token_rows`), read from the
batch the user's forward received: padding (attention mask 0) is never a row; for a causal LM, a token is a row
when the next token is a target (real, and with a label other than -100 when labels are given); for a masked LM,
every real token is a row (unmasked tokens receive gradient through attention, as in the probe); special tokens
are left out unless `include_special`. For a masked LM the special-token test reads the original tokens (the
labels where they are set), so that the mask token of a corrupted position does not hide it.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Int

from ..probing.objectives import ObjectiveName
from ..reading.batching import token_rows

__all__ = ["loss_rows", "loss_terms"]

IGNORED = -100


def _original_ids(inputs: dict[str, torch.Tensor], objective: ObjectiveName) -> Int[torch.Tensor, "b l"]:
    labels = inputs.get("labels")
    if objective is ObjectiveName.MASKED_LM and labels is not None and labels.shape == inputs["input_ids"].shape:
        return torch.where(labels != IGNORED, labels, inputs["input_ids"])
    return inputs["input_ids"]


def loss_rows(
    inputs: dict[str, torch.Tensor],
    objective: ObjectiveName,
    special_ids: torch.Tensor,
    *,
    include_special: bool,
) -> Bool[torch.Tensor, "b l"]:
    """The positions of a training batch that are gradient rows (see the module docstring).

    Args:
        inputs: `input_ids`, `attention_mask` and optionally `labels`, (b, l) each.
        objective: The model's training objective.
        special_ids: The tokenizer's special token ids (empty: none left out).
        include_special: Keep special tokens as rows.

    Returns:
        (b, l) booleans on the inputs' device.
    """
    mask = inputs["attention_mask"].bool()
    rows = token_rows(_original_ids(inputs, objective), mask, special_ids, include_special=include_special)
    if objective is ObjectiveName.CAUSAL_LM:
        target = mask.clone()
        labels = inputs.get("labels")
        if labels is not None and labels.shape == mask.shape:
            target &= labels != IGNORED
        has_target = torch.zeros_like(mask)
        has_target[:, :-1] = target[:, 1:]
        rows &= has_target
    return rows


def loss_terms(inputs: dict[str, torch.Tensor], objective: ObjectiveName) -> Int[torch.Tensor, ""]:
    """The number of loss terms of a training batch (what a mean-reduced loss divides by), a 0-dim device tensor.

    Causal LM: targets of the shifted labels (or real tokens followed by a real token, without labels); masked LM:
    labels other than -100; sequence classification: sequences.
    """
    mask = inputs["attention_mask"].bool()
    labels = inputs.get("labels")
    if objective is ObjectiveName.SEQUENCE_CLASSIFICATION:
        return torch.tensor(mask.shape[0], device=mask.device)
    if objective is ObjectiveName.MASKED_LM:
        return (labels != IGNORED).sum() if labels is not None else mask.sum()
    if labels is not None and labels.shape == mask.shape:
        return (labels[:, 1:] != IGNORED).sum()
    return (mask[:, :-1] & mask[:, 1:]).sum()
