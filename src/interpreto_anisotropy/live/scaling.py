# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How each micro-batch's dL/dh is rescaled before pooling, so that tokens weigh as in the probe's summed loss.

The probe differentiates the sum of the per-token losses. A training loop differentiates `loss_scale x L`, where L
is that sum (`reduction="sum"`) or its mean over the micro-batch's loss terms (`reduction="mean"`, the Hugging Face
default), and a gradient scaler multiplies it by its current scale. The gradient of micro-batch j is therefore
`c_j x dSum_j/dh`, and multiplying it by `1 / c_j` gives back the probe's gradient:

    c_j = loss_scale x scaler scale x (1 / n_j for a mean over n_j loss terms)

A factor common to every micro-batch of a window changes no energy share; one that differs between them (the
mean over micro-batches of different sizes) weighs their tokens differently, which is what this undoes. The
scaler's scale is read on the device (no host synchronisation); powers of two, it is undone exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from ..probing.objectives import ObjectiveName, Reduction
from .tokens import loss_terms

__all__ = ["gradient_weight", "scaler_scale"]


def scaler_scale(scaler: Any, device: torch.device) -> torch.Tensor | float:
    """The current scale of a `torch.amp.GradScaler` (1 when disabled or None), as a device tensor when it has one."""
    if scaler is None or not scaler.is_enabled():
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

    None when there is nothing to undo (a summed loss, no loss scale, no scaler): the gradient is used as it is.

    Args:
        inputs: The micro-batch (`input_ids`, `attention_mask`, `labels`), for its number of loss terms.
        objective: The model's objective (which terms a mean divides by).
        reduction: Whether the differentiated loss was a sum or a mean over the micro-batch's terms.
        loss_scale: A constant the user multiplied the loss by (e.g. 1 / gradient accumulation steps).
        scaler: The gradient scaler, or None.
        device: The gradients' device.
    """
    if reduction is Reduction.SUM and loss_scale == 1 and (scaler is None or not scaler.is_enabled()):
        return None
    weight = torch.ones((), dtype=torch.float64, device=device) / loss_scale
    if reduction is Reduction.MEAN:
        weight = weight * loss_terms(inputs, objective).to(device=device, dtype=torch.float64)
    return weight / scaler_scale(scaler, device)
