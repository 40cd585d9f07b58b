# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a training micro-batch brings to a window: its gradient rows, its number of loss terms, and the factor
1 / c_j its dL/dh is rescaled by, c_j = loss_scale x scaler scale (x 1 / n_j for a mean over n_j terms), so that
tokens weigh as in the probe's summed loss.

The rules are the probe's (`Objective.probed_tokens`, `batching.token_rows`); for a masked LM, special tokens are
read from the original tokens (the labels where set). docs/how-to/live-probe.md ("Which tokens are rows", "How
tokens are weighted") says them in full.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Bool, Int

from ..probing.objectives import ObjectiveName, Reduction
from ..reading.batching import token_rows

__all__ = ["loss_rows", "loss_terms", "gradient_weight", "scaler_scale", "scaling"]

IGNORED = -100


def _original_ids(inputs: dict[str, torch.Tensor], objective: ObjectiveName) -> Int[torch.Tensor, "b l"]:
    labels = inputs.get("labels")
    if objective is ObjectiveName.MASKED_LM and labels is not None and labels.shape == inputs["input_ids"].shape:
        return torch.where(labels != IGNORED, labels, inputs["input_ids"])
    return inputs["input_ids"]


def loss_rows(
    inputs: dict[str, torch.Tensor], objective: ObjectiveName, special_ids: torch.Tensor, *, include_special: bool
) -> Bool[torch.Tensor, "b l"]:
    """Which positions of a training batch (`input_ids`, `attention_mask`, optional `labels`: (b, l) each) are
    gradient rows, as (b, l) booleans on the inputs' device; `special_ids` (empty: none) are not, unless
    `include_special`."""
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


def scaling(scaler: Any) -> bool:
    """Whether `scaler` (a `torch.amp.GradScaler` or None) scales the loss."""
    return scaler is not None and scaler.is_enabled()


def scaler_scale(scaler: Any, device: torch.device) -> torch.Tensor | float:
    """The current scale of a `torch.amp.GradScaler` (1 when disabled or None), as a device tensor when it has one."""
    if not scaling(scaler):
        return 1.0
    scale = getattr(scaler, "_scale", None)
    if isinstance(scale, torch.Tensor):
        return scale.to(device=device, dtype=torch.float64).reshape(())
    return float(scaler.get_scale())


def gradient_weight(
    inputs: dict[str, torch.Tensor],
    *,
    objective: ObjectiveName,
    reduction: Reduction,
    loss_scale: float,
    scaler: Any,
    device: torch.device,
) -> torch.Tensor | None:
    """The factor 1 / c_j that turns a micro-batch's dL/dh into the probe's summed-loss gradient, 0-dim float64.

    None when there is nothing to undo (a summed loss, no loss scale, no scaler). `inputs` give the number of loss
    terms a "mean" `reduction` divided by; `scaler` is the gradient scaler or None; `device` the gradients'.
    """
    if reduction is Reduction.SUM and loss_scale == 1 and not scaling(scaler):
        return None
    weight = torch.ones((), dtype=torch.float64, device=device) / loss_scale
    if reduction is Reduction.MEAN:
        weight = weight * loss_terms(inputs, objective).to(device=device, dtype=torch.float64)
    return weight / scaler_scale(scaler, device)
