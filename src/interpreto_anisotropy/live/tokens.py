# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a training micro-batch brings to a window: its gradient rows (the probe's rules: `Objective.probed_tokens`,
`batching.token_rows`; a masked LM's special tokens read from its labels where set), its number of loss terms, and
the factor 1 / c_j its dL/dh is rescaled by, c_j = loss_scale x scaler scale (x 1 / n_j for a mean over n_j terms),
so that tokens weigh as in the probe's summed loss. `ScaleCheck` reads the gradient of the first micro-batches'
logits at their targets (p_t - 1 times c_j for a cross-entropy) and warns when c_j follows the other `reduction`
within a window. docs/how-to/live-probe.md ("Which tokens are rows", "How tokens are weighted") says it in full.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Bool, Int

from ..errors import LiveProbeWarning
from ..probing.objectives import ObjectiveName, Reduction
from ..reading.batching import token_rows

IGNORED = -100


def loss_rows(
    inputs: dict[str, torch.Tensor], objective: ObjectiveName, special_ids: torch.Tensor, *, include_special: bool
) -> Bool[torch.Tensor, "b l"]:
    """Which positions of a training batch are gradient rows (`special_ids` are not, unless `include_special`)."""
    mask, labels, ids = inputs["attention_mask"].bool(), inputs.get("labels"), inputs["input_ids"]
    if objective is ObjectiveName.MASKED_LM and labels is not None and labels.shape == ids.shape:
        ids = torch.where(labels != IGNORED, labels, ids)  # the original tokens, for the special ones
    rows = token_rows(ids, mask, special_ids, include_special=include_special)
    if objective is ObjectiveName.CAUSAL_LM:  # a row predicts a loss term: the next token, a real one
        rows = torch.nn.functional.pad(rows[:, :-1] & mask[:, 1:] & _causal_terms(labels, mask), (0, 1), value=False)
    return rows


def loss_terms(inputs: dict[str, torch.Tensor], objective: ObjectiveName) -> Int[torch.Tensor, ""]:
    """The number of loss terms of a training batch (what a mean-reduced loss divides by), a 0-dim device tensor."""
    mask, labels = inputs["attention_mask"].bool(), inputs.get("labels")
    if objective is ObjectiveName.SEQUENCE_CLASSIFICATION:
        return torch.tensor(mask.shape[0], device=mask.device)
    if objective is ObjectiveName.MASKED_LM:
        return (labels != IGNORED).sum() if labels is not None else mask.sum()
    return _causal_terms(labels, mask).sum()


def _causal_terms(labels: torch.Tensor | None, mask: torch.Tensor) -> Bool[torch.Tensor, "b l-1"]:
    """Whether the logits at position i of a causal LM predict a loss term (token i + 1)."""
    if labels is not None and labels.shape == mask.shape:
        return labels[:, 1:] != IGNORED
    return mask[:, :-1] & mask[:, 1:]


def scaling(scaler: Any) -> bool:
    """Whether `scaler` (a `torch.amp.GradScaler` or None) scales the loss."""
    return scaler is not None and scaler.is_enabled()


def gradient_weight(
    inputs: dict[str, torch.Tensor],
    *,
    objective: ObjectiveName,
    reduction: Reduction,
    loss_scale: float,
    scaler: Any,
    device: torch.device,
) -> torch.Tensor | None:
    """The factor 1 / c_j that turns a micro-batch's dL/dh into the probe's summed-loss gradient (None: one)."""
    if reduction is Reduction.SUM and loss_scale == 1 and not scaling(scaler):
        return None
    weight = torch.ones((), dtype=torch.float64, device=device) / loss_scale
    if reduction is Reduction.MEAN:
        weight = weight * loss_terms(inputs, objective).to(device=device, dtype=torch.float64)
    if not scaling(scaler):
        return weight
    scale = getattr(scaler, "_scale", None)  # the scaler's device tensor, read without a sync
    scale = scale.to(device=device, dtype=torch.float64).reshape(()) if isinstance(scale, torch.Tensor) else None
    return weight / (float(scaler.get_scale()) if scale is None else scale)


#: Training micro-batches whose gradient scale is checked (the first ones after attaching).
MICRO_BATCHES = 8
#: Loss terms of each checked micro-batch read (their logits' rows).
TERMS = 64
#: Weights within a window that differ by less than this factor change the figures too little to warn; the other
#: reduction's must agree within it (the logits' rounding, a loss other than the cross-entropy: no warning).
MIN_SPREAD = 1.01


class ScaleCheck:
    """Checks the first micro-batches' gradient scale (times the probe's `weight`) against `reduction`; warns once."""

    def __init__(
        self,
        objective: ObjectiveName,
        reduction: Reduction,
        weight: Callable[[dict[str, torch.Tensor]], torch.Tensor | None],
    ):
        self.objective, self.reduction, self.weight = objective, reduction, weight
        self.watched, self.done = 0, False
        self.samples: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (window, scale x weight, loss terms)

    @property
    def ready(self) -> bool:
        """Whether every micro-batch to check has been checked (and no verdict given yet)."""
        return not self.done and len(self.samples) >= MICRO_BATCHES

    def watch(
        self, inputs: dict[str, torch.Tensor], logits: torch.Tensor, window: int
    ) -> Callable[[torch.Tensor], None] | None:
        """A hook recording the scale of the gradient of a forward's `logits` while some remain to check, else None."""
        if self.done or self.watched >= MICRO_BATCHES or "input_ids" not in inputs:
            return None
        inputs = {key: value.to(logits.device) for key, value in inputs.items()}
        terms = _term_targets(logits, inputs, self.objective)
        if terms is None:
            return None
        self.watched += 1
        targets, valid = terms
        flat = logits.reshape(-1, logits.shape[-1])
        rows = torch.topk(valid.to(torch.float32), min(TERMS, valid.numel())).indices  # loss terms first
        targets, valid = targets[rows].clamp(0, flat.shape[-1] - 1), valid[rows].double()
        probability = torch.log_softmax(flat[rows].double(), -1).gather(1, targets[:, None])[:, 0].exp()

        def on_gradient(gradient: torch.Tensor) -> None:
            flat = gradient.reshape(-1, gradient.shape[-1])[rows].double()
            at_target = flat.gather(1, targets[:, None])[:, 0]
            scale = (at_target * valid).sum() / ((probability - 1) * valid).sum()
            weight = self.weight(inputs)
            if weight is not None:
                scale = scale * weight.to(scale)
            self.samples.append((window, scale, loss_terms(inputs, self.objective)))

        return on_gradient

    def verdict(self, *, stacklevel: int) -> None:
        """Read the checked micro-batches once; warn if their scale follows the other reduction within a window."""
        self.done = True
        samples, self.samples = self.samples, []
        if not samples:
            return
        device = samples[0][1].device
        read = torch.stack([torch.stack([scale, terms.to(scale)]).to(device) for _, scale, terms in samples]).tolist()
        by_window: dict[int, list[tuple[float, float]]] = {}
        for (window, _, _), (scale, terms) in zip(samples, read, strict=True):
            if math.isfinite(scale) and scale > 0 and terms > 0:
                by_window.setdefault(window, []).append((scale, terms))
        power = 1 if self.reduction is Reduction.SUM else -1  # the other reduction: scale x n_j^power is constant
        declared = _spread([[scale for scale, _ in group] for group in by_window.values()])
        other = _spread([[scale * terms**power for scale, terms in group] for group in by_window.values()])
        if declared > math.log(MIN_SPREAD) and other < min(declared / 4, math.log(MIN_SPREAD)):
            mean, summed = "a loss averaged over each micro-batch's loss terms", "a summed loss"
            seen, said, other = (mean, summed, "mean") if self.reduction is Reduction.SUM else (summed, mean, "sum")
            warnings.warn(
                f"The gradients the live probe captured scale as those of {seen}, not of {said} as reduction='{self.reduction.value}' says: the micro-batches of a window weigh their tokens up to {math.exp(declared):.3g} times differently. Pass reduction='{other}', or differentiate {said}.",
                LiveProbeWarning,
                stacklevel=stacklevel + 1,
            )


def _spread(groups: list[list[float]]) -> float:
    """The largest log ratio between two values of one group (0 without a group of two)."""
    return max((math.log(max(group) / min(group)) for group in groups if len(group) > 1), default=0.0)


def _term_targets(logits: torch.Tensor, inputs: dict[str, torch.Tensor], objective: ObjectiveName) -> tuple | None:
    """Each row of the flattened logits' target and whether it is a loss term (`loss_terms`' rules), or None."""
    labels, mask = inputs.get("labels"), inputs["attention_mask"].bool()
    if objective is ObjectiveName.SEQUENCE_CLASSIFICATION:
        usable = labels is not None and labels.dim() == 1 and not labels.is_floating_point()
        if not usable or logits.dim() != 2 or logits.shape[-1] < 2:
            return None  # a regression or a multi-label loss: not a cross-entropy over classes
        return labels, labels != IGNORED
    if logits.dim() != 3 or logits.shape[:2] != mask.shape:
        return None
    with_labels = labels is not None and labels.shape == mask.shape
    if objective is ObjectiveName.MASKED_LM:  # without labels: terms `loss_terms` counts, but no targets to read
        return (labels.reshape(-1), (labels != IGNORED).reshape(-1)) if with_labels else None
    following = labels[:, 1:] if with_labels else inputs["input_ids"][:, 1:]  # position i predicts token i + 1
    targets = torch.nn.functional.pad(following, (0, 1), value=0)
    valid = torch.nn.functional.pad(_causal_terms(labels, mask), (0, 1), value=False)
    return targets.reshape(-1), valid.reshape(-1)
