# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Training objectives whose gradients the probe takes: causal LM, masked LM, sequence classification, callables.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> ia.objectives.make_objective("masked_lm", mlm_probability=0.3).describe()["mlm_probability"]
    0.3
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int

from ..commons.options import check_bool
from ..errors import InvalidInputError
from .anisotropy import member_of
from .masking import MaskedLM, resolve_masking, special_tokens_mask

__all__ = [
    "ObjectiveName",
    "Reduction",
    "Objective",
    "CausalLMObjective",
    "MaskedLMObjective",
    "MaskedLM",
    "SequenceClassificationObjective",
    "CallableObjective",
    "make_objective",
    "describe_objective",
    "objective_for_model",
    "objective_from_config",
    "LossTerms",
]


class ObjectiveName(str, Enum):
    """Built-in training objectives.

    Attributes:
        CAUSAL_LM: Next-token cross-entropy (decoders).
        MASKED_LM: Masked-LM cross-entropy on a seeded mask (encoders).
        SEQUENCE_CLASSIFICATION: Cross-entropy of a classifier's logits against given labels.

    Examples:
        >>> ObjectiveName("masked_lm") is ObjectiveName.MASKED_LM
        True
    """

    CAUSAL_LM = "causal_lm"
    MASKED_LM = "masked_lm"
    SEQUENCE_CLASSIFICATION = "sequence_classification"


class Reduction(str, Enum):
    """How per-token losses are combined before differentiating.

    Attributes:
        SUM: Sum of the loss terms: each token's gradient keeps its own loss's scale (the default).
        MEAN: Sum divided by the number of loss terms of the batch, as a training loop does.

    Examples:
        >>> Reduction("mean").value
        'mean'
    """

    SUM = "sum"
    MEAN = "mean"


@dataclass
class LossTerms:
    """The loss of a batch.

    Attributes:
        total: Scalar loss to differentiate, summed over terms (averaged when the reduction is "mean").
        summed: The plain sum of the terms, detached (for the mean loss).
        count: Number of loss terms: an int, or a 0-dim tensor on the model's device (never waited for).

    Examples:
        >>> terms = LossTerms(total=torch.tensor(6.0), summed=torch.tensor(6.0), count=3)
        >>> float(terms.summed) / terms.count  # the mean loss per term
        2.0
    """

    total: Float[torch.Tensor, ""]
    summed: Float[torch.Tensor, ""]
    count: int | Int[torch.Tensor, ""]


def _at_least_float32(logits: torch.Tensor) -> torch.Tensor:
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _cross_entropy_where(
    logits: Float[torch.Tensor, "b l v"], targets: Int[torch.Tensor, "b l"], where: Bool[torch.Tensor, "b l"]
) -> Float[torch.Tensor, "b l"]:
    """Per-token cross-entropy (b, l), 0 where `where` is False (ignored targets: no host sync, unlike indexing)."""
    ignored = targets.masked_fill(~where, -100)
    per_token = F.cross_entropy(
        _at_least_float32(logits.flatten(0, 1)), ignored.flatten(), reduction="none", ignore_index=-100
    )
    return per_token.view_as(targets)


def _logits(output: Any, batch: dict[str, torch.Tensor], objective: str) -> torch.Tensor:
    """A model output's logits, checked against the batch's shape, or our error saying what the model returned."""
    logits = getattr(output, "logits", None)
    if not isinstance(logits, torch.Tensor):
        fields = ", ".join(output.keys()) if hasattr(output, "keys") else type(output).__name__
        raise InvalidInputError(
            f"The {objective} objective needs logits, but the model returned {type(output).__name__} ({fields}) without them: load the model with its head (AutoModelForCausalLM, AutoModelForMaskedLM) or pass a callable objective fn(output, batch) that computes a loss from these fields."
        )
    classifier = objective == ObjectiveName.SEQUENCE_CLASSIFICATION.value
    if classifier and logits.dim() != 2:
        raise InvalidInputError(
            f"The sequence_classification objective needs (batch, classes) logits, but the model returned logits of shape {tuple(logits.shape)}, a language model's: use objective='auto' (or 'causal_lm' / 'masked_lm'), or load the model with AutoModelForSequenceClassification."
        )
    if not classifier and (logits.dim() != 3 or logits.shape[:2] != batch["input_ids"].shape):
        raise InvalidInputError(
            f"The {objective} objective needs per-token logits (batch, length, vocab) = ({', '.join(map(str, batch['input_ids'].shape))}, vocab), but the model returned logits of shape {tuple(logits.shape)}: a sequence classifier takes objective='sequence_classification' (or 'auto')."
        )
    return logits


class Objective:
    """Base class: subclasses override `prepare`, `loss` and, where needed, `probed_tokens` and `min_tokens`.

    Args:
        reduction: "sum" (default) or "mean" over the loss terms of a batch.

    Examples:
        >>> class LastLogit(Objective):
        ...     name = "last_logit"
        ...     def loss(self, output, batch):
        ...         value = output.logits[:, -1].sum()
        ...         return LossTerms(total=value, summed=value.detach(), count=1)
        >>> probe = ia.GradientProbe(mwsp, objective=LastLogit())  # doctest: +SKIP
    """

    name: str = "objective"
    min_tokens: int = 1

    def __init__(self, *, reduction: str | Reduction = Reduction.SUM):
        self.reduction = member_of(Reduction, reduction, "reduction")

    def prepare(
        self, batch: dict[str, torch.Tensor], *, sequence_ids: Int[torch.Tensor, " b"], tokenizer: Any
    ) -> dict[str, torch.Tensor]:
        """The batch the model is run on (e.g. masked), from the CPU batch. Default: unchanged."""
        return batch

    def loss(self, output: Any, batch: dict[str, torch.Tensor]) -> LossTerms:
        """The batch loss from the model's output."""
        raise NotImplementedError

    def probed_tokens(self, batch: dict[str, torch.Tensor]) -> Bool[torch.Tensor, "b l"]:
        """Tokens that get a gradient row: every real (non-padding) token by default."""
        return batch["attention_mask"].bool()

    def for_model(self, model: torch.nn.Module) -> dict[str, Any]:
        """Check the objective against its model (once, by the probe); return extra forward keywords. Default: {}."""
        return {}

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings of the objective."""
        return {"objective": self.name, "reduction": self.reduction.value}

    def _terms(self, per_term: torch.Tensor, count: int | torch.Tensor) -> LossTerms:
        """The loss terms summed, and divided by their `count` when the reduction is "mean"."""
        summed = total = per_term.sum()
        if self.reduction is Reduction.MEAN:  # "sum" adds no divisor op to the batch
            total = summed / (count.clamp(min=1) if isinstance(count, torch.Tensor) else max(count, 1))
        return LossTerms(total=total, summed=summed.detach(), count=count)


class CausalLMObjective(Objective):
    """Next-token cross-entropy, padding ignored; the last real token predicts nothing and is not probed.

    Args:
        reduction: "sum" (default) or "mean".
        include_aux_loss: Add `router_aux_loss_coef * output.aux_loss` (mixture-of-experts models; once in a mean,
            once per predicted token in a sum). It couples the sequences of a batch.

    Raises:
        InvalidInputError: `include_aux_loss` not a bool, or an unknown reduction.

    Examples:
        >>> objective = make_objective("causal_lm")
        >>> type(objective).__name__, objective.min_tokens
        ('CausalLMObjective', 2)
        >>> CausalLMObjective(include_aux_loss=True).describe()["include_aux_loss"]
        True
    """

    name = ObjectiveName.CAUSAL_LM.value
    min_tokens = 2

    def __init__(self, *, reduction: str | Reduction = Reduction.SUM, include_aux_loss: bool = False):
        super().__init__(reduction=reduction)
        check_bool("include_aux_loss", include_aux_loss)
        self.include_aux_loss = include_aux_loss
        self.aux_loss_coef: float | None = None

    def for_model(self, model: torch.nn.Module) -> dict[str, Any]:
        """With `include_aux_loss`, read `router_aux_loss_coef` and ask for router logits."""
        if not self.include_aux_loss:
            return {}
        coef = getattr(getattr(model, "config", None), "router_aux_loss_coef", None)
        if not isinstance(coef, (int, float)) or isinstance(coef, bool):
            raise InvalidInputError(
                f"include_aux_loss=True needs a mixture-of-experts model whose config has router_aux_loss_coef (Mixtral, Qwen2-MoE, OLMoE, ...), which {type(model).__name__} has not: drop include_aux_loss."
            )
        self.aux_loss_coef = float(coef)
        return {"output_router_logits": True}

    def loss(self, output: Any, batch: dict[str, torch.Tensor]) -> LossTerms:
        """Cross-entropy of each real token's prediction of the next real token (plus the router's loss)."""
        logits = _logits(output, batch, self.name)[:, :-1]
        targets = batch["input_ids"][:, 1:]
        valid = batch["attention_mask"][:, :-1].bool() & batch["attention_mask"][:, 1:].bool()
        terms = self._terms(_cross_entropy_where(logits, targets, valid), valid.sum())
        if not self.include_aux_loss:
            return terms
        aux_loss = getattr(output, "aux_loss", None)
        if not isinstance(aux_loss, torch.Tensor) or self.aux_loss_coef is None:
            raise InvalidInputError(
                f"include_aux_loss=True, but the model returned {type(output).__name__} without an aux_loss tensor: probe a mixture-of-experts model through GradientProbe (which asks for router logits)."
            )
        weighted = self.aux_loss_coef * aux_loss
        per_token_sum = terms.count * weighted
        total = terms.total + (weighted if self.reduction is Reduction.MEAN else per_token_sum)
        return LossTerms(total=total, summed=terms.summed + per_token_sum.detach(), count=terms.count)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings; `include_aux_loss` only when it is on (older records read the same)."""
        return {**super().describe(), "include_aux_loss": True} if self.include_aux_loss else super().describe()

    def probed_tokens(self, batch: dict[str, torch.Tensor]) -> Bool[torch.Tensor, "b l"]:
        """Real tokens followed by a real token (the last one of each sequence predicts nothing)."""
        mask = batch["attention_mask"].bool()
        return mask & torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1)


class MaskedLMObjective(Objective):
    """Masked-LM cross-entropy on a mask seeded by (seed, each sequence's index); every real token is probed.

    Args:
        masking: The masking settings (default `MaskedLM()`: 15 %, 80/10/10).
        mlm_probability: Shorthand for `MaskedLM(rate=mlm_probability)`; give it or `masking`.
        seed: Base seed of the mask.
        reduction: "sum" or "mean".

    Raises:
        InvalidInputError: A bad `mlm_probability`, `masking` or reduction, or rates that disagree.

    Examples:
        >>> objective = MaskedLMObjective(mlm_probability=0.3, seed=1)
        >>> objective.describe()["mlm_probability"]
        0.3
        >>> MaskedLMObjective(MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0)).describe()["mask_split"]
        {'mask': 1.0, 'random': 0.0, 'keep': 0.0}
    """

    name = ObjectiveName.MASKED_LM.value

    def __init__(
        self,
        masking: MaskedLM | None = None,
        *,
        mlm_probability: float | None = None,
        seed: int = 0,
        reduction: str | Reduction = Reduction.SUM,
    ):
        super().__init__(reduction=reduction)
        self.masking = resolve_masking(masking, mlm_probability)
        self.seed = seed

    def prepare(
        self, batch: dict[str, torch.Tensor], *, sequence_ids: Int[torch.Tensor, " b"], tokenizer: Any
    ) -> dict[str, torch.Tensor]:
        """Mask the batch: adds `labels` (-100 where not selected) and keeps the `original_input_ids`."""
        if getattr(tokenizer, "mask_token_id", None) is None:
            raise InvalidInputError(
                "The masked_lm objective needs a tokenizer with a mask token (tokenizer.mask_token is None): use the model's own tokenizer, or pass a callable objective."
            )
        input_ids = batch["input_ids"]
        attention = batch["attention_mask"].bool()
        candidates = attention & ~special_tokens_mask(input_ids, tokenizer.all_special_ids)
        labels = torch.full_like(input_ids, -100)
        corrupted = input_ids.clone()
        vocab_size = len(tokenizer)
        for row, sequence_id in enumerate(sequence_ids.tolist()):
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + sequence_id)
            positions = candidates[row].nonzero().flatten()
            if positions.numel() == 0:
                continue
            chosen = self.masking.select(torch.ones_like(positions, dtype=torch.bool), generator, at_least_one=True)
            selected = positions[chosen]
            labels[row, selected] = input_ids[row, selected]
            corrupted[row, selected] = self.masking.corrupt(
                input_ids[row, selected],
                torch.ones_like(selected, dtype=torch.bool),
                generator,
                vocab_size=vocab_size,
                mask_token_id=tokenizer.mask_token_id,
            )
        return {**batch, "input_ids": corrupted, "labels": labels, "original_input_ids": input_ids}

    def loss(self, output: Any, batch: dict[str, torch.Tensor]) -> LossTerms:
        """Cross-entropy of the model's predictions at the selected tokens."""
        selected = batch["labels"] != -100
        per_token = _cross_entropy_where(_logits(output, batch, self.name), batch["labels"], selected)
        return self._terms(per_token, selected.sum())

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings, with the masking rate, its split and the seed."""
        split = {"mask": self.masking.mask, "random": self.masking.random, "keep": self.masking.keep}
        return {
            **super().describe(),
            "mlm_probability": self.masking.rate,
            "mask_split": split,
            "mask_seed": self.seed,
        }


class SequenceClassificationObjective(Objective):
    """Cross-entropy of a sequence classifier's logits against given labels.

    Args:
        reduction: "sum" (default) or "mean".

    Examples:
        >>> probe = ia.GradientProbe(classifier_mwsp, objective="sequence_classification")  # doctest: +SKIP
        >>> result = probe.run(texts, tangent, labels=labels)  # doctest: +SKIP
    """

    name = ObjectiveName.SEQUENCE_CLASSIFICATION.value

    def loss(self, output: Any, batch: dict[str, torch.Tensor]) -> LossTerms:
        """Cross-entropy of each sequence's logits against its label."""
        if "labels" not in batch:
            raise InvalidInputError("The sequence_classification objective needs labels: probe.run(..., labels=...).")
        logits = _logits(output, batch, self.name)
        per_sequence = F.cross_entropy(_at_least_float32(logits), batch["labels"], reduction="none")
        return self._terms(per_sequence, int(batch["labels"].numel()))


class CallableObjective(Objective):
    """A user loss `fn(output, batch)`: a scalar, a (b, l) tensor (over real tokens) or any tensor (all entries).

    Args:
        fn: The loss function, called as `fn(output, batch)`.
        reduction: "sum" (default) or "mean".

    Raises:
        InvalidInputError: `fn` is not callable, or an unknown reduction.

    Examples:
        >>> def eos_logit(output, batch):
        ...     return output.logits[..., tokenizer.eos_token_id].sum()
        >>> probe = ia.GradientProbe(mwsp, objective=eos_logit)  # doctest: +SKIP
    """

    name = "callable"

    def __init__(self, fn: Callable[..., torch.Tensor], *, reduction: str | Reduction = Reduction.SUM):
        super().__init__(reduction=reduction)
        if not callable(fn):
            raise InvalidInputError("A custom objective must be callable as fn(output, batch).")
        self.fn = fn
        self.name = getattr(fn, "__name__", "callable")

    def loss(self, output: Any, batch: dict[str, torch.Tensor]) -> LossTerms:
        """Call `fn` and reduce what it returns."""
        value = self.fn(output, batch)
        if not isinstance(value, torch.Tensor):
            raise InvalidInputError(f"The custom objective returned {type(value).__name__}, expected a tensor.")
        if value.dim() == 0:
            return LossTerms(total=value, summed=value.detach(), count=1)
        if value.shape == batch["attention_mask"].shape:
            real = batch["attention_mask"].bool()
            return self._terms(torch.where(real, value, 0), real.sum())
        return self._terms(value.flatten(), value.numel())


_HEADS = (
    (("ForCausalLM", "LMHeadModel"), ObjectiveName.CAUSAL_LM),
    (("ForMaskedLM",), ObjectiveName.MASKED_LM),
    (("ForSequenceClassification",), ObjectiveName.SEQUENCE_CLASSIFICATION),
)
AUTO = "auto"


def objective_from_config(config: Any) -> ObjectiveName | None:
    """The language-model objective a config describes (`architectures`, `is_decoder`, its type's heads), or None.

    Examples:
        >>> from transformers import BertConfig
        >>> objective_from_config(BertConfig()).value
        'masked_lm'
    """
    for arch in getattr(config, "architectures", None) or ():
        if arch.endswith(("ForCausalLM", "LMHeadModel")):
            return ObjectiveName.CAUSAL_LM
        if arch.endswith(("ForMaskedLM", "ForPreTraining")):
            return ObjectiveName.MASKED_LM
    if getattr(config, "is_decoder", False):
        return ObjectiveName.CAUSAL_LM
    from transformers.models.auto import modeling_auto

    model_type = getattr(config, "model_type", None)
    if model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return ObjectiveName.MASKED_LM
    if model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return ObjectiveName.CAUSAL_LM
    return None


def objective_for_model(model: torch.nn.Module) -> ObjectiveName:
    """The built-in objective a model was trained with (`"auto"`): from its head class, else its config.

    Raises:
        InvalidInputError: A model without an output head, or one whose head and config say nothing.

    Examples:
        >>> from transformers import GPT2Config, GPT2LMHeadModel
        >>> objective_for_model(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2))).value
        'causal_lm'
    """
    name = type(model).__name__
    for suffixes, objective in _HEADS:
        if name.endswith(suffixes):
            return objective
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    base = MODEL_MAPPING_NAMES.get(getattr(getattr(model, "config", None), "model_type", None))
    if name in (base if isinstance(base, tuple) else (base,)):  # its family's base model (e.g. BertModel): no head
        raise InvalidInputError(
            f"{name} has no output head (it returns hidden states, no logits), so no built-in objective applies: load the model with its head (AutoModelForCausalLM, AutoModelForMaskedLM, ...) or pass a callable objective fn(output, batch)."
        )
    objective = objective_from_config(getattr(model, "config", None))
    if objective is None:
        raise InvalidInputError(
            f"Cannot tell which objective {name} was trained with; pass objective='causal_lm', 'masked_lm', 'sequence_classification' or a callable fn(output, batch)."
        )
    return objective


_CLASSES = {
    ObjectiveName.CAUSAL_LM: CausalLMObjective,
    ObjectiveName.MASKED_LM: MaskedLMObjective,
    ObjectiveName.SEQUENCE_CLASSIFICATION: SequenceClassificationObjective,
}


def make_objective(
    objective: str | ObjectiveName | MaskedLM | Objective | Callable[..., torch.Tensor],
    *,
    mlm_probability: float | None = None,
    seed: int = 0,
    reduction: str | Reduction = Reduction.SUM,
    model: torch.nn.Module | None = None,
) -> Objective:
    """Build an `Objective` from a name, masked-LM settings, an instance or a callable.

    Args:
        objective: "auto" (needs `model`), "causal_lm", "masked_lm", "sequence_classification", a `MaskedLM`, an
            `Objective`, or a callable `fn(output, batch) -> loss`.
        mlm_probability: Masking rate for "masked_lm" (None: 0.15, or a `MaskedLM`'s rate, which it must equal).
        seed: Mask seed for the masked-LM objective.
        reduction: "sum" (default) or "mean".
        model: The model the objective is for: a name is then checked against its head.

    Returns:
        An `Objective`.

    Raises:
        InvalidInputError: An unknown name, "auto" without a model, or a bad `mlm_probability`.
        InvalidInputError: A name (or a `MaskedLM`) that does not fit the model's head.

    Examples:
        >>> type(make_objective("masked_lm", mlm_probability=0.2)).__name__
        'MaskedLMObjective'
        >>> make_objective(MaskedLM(rate=0.3), seed=4).describe()["mlm_probability"]
        0.3
        >>> make_objective(lambda output, batch: output.logits.sum()).name
        '<lambda>'
    """
    if mlm_probability is not None:
        resolve_masking(None, mlm_probability)  # checked whichever objective it comes with: a NaN is never let by
    if isinstance(objective, Objective):
        return objective
    masking = objective if isinstance(objective, MaskedLM) else None
    objective = ObjectiveName.MASKED_LM if masking is not None else objective
    if isinstance(objective, str) and objective == AUTO:
        if model is None:
            raise InvalidInputError("objective='auto' needs the model to choose from.")
        objective = objective_for_model(model)
    if isinstance(objective, (str, ObjectiveName)):
        name = member_of(ObjectiveName, objective, "objective", ", 'auto' or a callable")
        expected = name if model is None else objective_for_model(model)
        if expected is not name:
            raise InvalidInputError(
                f"The {name.value} objective does not fit {type(model).__name__}, a {expected.value} model: pass objective='{expected.value}' (or 'auto'), or the objective instance {_CLASSES[name].__name__}() to use {name.value} all the same."
            )
        if name is ObjectiveName.MASKED_LM:
            return MaskedLMObjective(masking, mlm_probability=mlm_probability, seed=seed, reduction=reduction)
        return _CLASSES[name](reduction=reduction)
    if callable(objective) and len(inspect.signature(objective).parameters) >= 2:
        return CallableObjective(objective, reduction=reduction)
    raise InvalidInputError(
        "objective must be 'auto', a name, a MaskedLM, an Objective, or a callable fn(output, batch)."
    )


def describe_objective(objective: Any) -> str | dict[str, Any]:
    """A JSON-ready description of an objective as given (a sweep's settings): a name as given, `MaskedLM()` as
    "masked_lm", other masking as its `to_dict()`, anything else as its `__name__` (else "callable").

    Examples:
        >>> describe_objective("auto"), describe_objective(MaskedLM())
        ('auto', 'masked_lm')
        >>> describe_objective(MaskedLM(rate=0.3))
        {'objective': 'masked_lm', 'rate': 0.3, 'mask': 0.8, 'random': 0.1, 'keep': 0.1}
    """
    if isinstance(objective, str):
        return objective.value if isinstance(objective, ObjectiveName) else objective
    if isinstance(objective, MaskedLM):
        return ObjectiveName.MASKED_LM.value if objective == MaskedLM() else objective.to_dict()
    return getattr(objective, "__name__", "callable")
