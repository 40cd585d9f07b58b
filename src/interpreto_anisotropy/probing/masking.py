# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Masked-LM corruption as a setting (rate and mask / random / keep split), shared by the objective and the trainer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from jaxtyping import Bool, Int

from ..commons.options import check_number
from ..commons.tensors import copied_to
from ..errors import InvalidInputError

__all__ = ["MaskedLM", "resolve_masking", "special_tokens_mask"]


@dataclass(frozen=True)
class MaskedLM:
    """The masked-LM objective's settings, wherever an objective is accepted (default: BERT's, `"masked_lm"`).

    Args:
        rate: Share of the real, non-special tokens selected for prediction, in (0, 1).
        mask: Share of the selected tokens replaced by the mask token.
        random: Share replaced by a token drawn uniformly from the vocabulary (possibly the original).
        keep: Share left as they are; `mask + random + keep` must be 1.

    Raises:
        InvalidInputError: A rate outside (0, 1), a share outside [0, 1], or shares that do not add up to 1.

    Examples:
        >>> MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0).to_dict()
        {'objective': 'masked_lm', 'rate': 0.3, 'mask': 1.0, 'random': 0.0, 'keep': 0.0}
        >>> MaskedLM.from_dict(MaskedLM().to_dict()) == MaskedLM()
        True
    """

    rate: float = 0.15
    mask: float = 0.8
    random: float = 0.1
    keep: float = 0.1

    def __post_init__(self) -> None:
        for option in fields(self):  # the rate in (0, 1) (BERT: 0.15, ModernBERT: 0.3), the three shares in [0, 1]
            bounds = {"above": 0, "below": 1} if option.name == "rate" else {"at_least": 0, "at_most": 1}
            value = check_number(f"MaskedLM {option.name}", getattr(self, option.name), **bounds)
            object.__setattr__(self, option.name, value)
        total = self.mask + self.random + self.keep
        if abs(total - 1.0) > 1e-9:
            raise InvalidInputError(
                f"MaskedLM mask + random + keep must be 1, got {self.mask} + {self.random} + {self.keep} = {total}: give the three shares of the selected tokens, e.g. mask=0.8, random=0.1, keep=0.1."
            )

    @property
    def name(self) -> str:
        """The objective's name, `"masked_lm"`."""
        return "masked_lm"

    @property
    def is_bert_split(self) -> bool:
        """Whether the split is BERT's 80 / 10 / 10 (whatever the rate)."""
        return (self.mask, self.random, self.keep) == (0.8, 0.1, 0.1)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: `{"objective": "masked_lm", "rate", "mask", "random", "keep"}`."""
        return {"objective": self.name, "rate": self.rate, "mask": self.mask, "random": self.random, "keep": self.keep}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaskedLM:
        """The settings `to_dict` wrote (`InvalidInputError` for another objective or unknown keys)."""
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"MaskedLM.from_dict expects a dict, got {type(data).__name__}.")
        if data.get("objective", "masked_lm") != "masked_lm":
            raise InvalidInputError(f"MaskedLM.from_dict got the settings of objective {data['objective']!r}.")
        options = {option.name for option in fields(cls)}
        if unknown := set(data) - options - {"objective"}:
            raise InvalidInputError(f"MaskedLM.from_dict: unknown keys {sorted(unknown)}; expected {sorted(options)}.")
        return cls(**{key: value for key, value in data.items() if key in options})

    def __str__(self) -> str:
        return f"masked_lm(rate={self.rate}, mask={self.mask}, random={self.random}, keep={self.keep})"

    def select(
        self,
        candidates: Bool[torch.Tensor, "..."],
        generator: torch.Generator,
        *,
        at_least_one: bool = False,
    ) -> Bool[torch.Tensor, "..."]:
        """The `candidates` whose uniform draw is below `rate` (with `at_least_one`, else the smallest draw's)."""
        draws = torch.rand(candidates.shape, generator=generator, device=generator.device)
        draws = copied_to(draws, candidates.device)  # the CPU generator's numbers on every device
        selected = (draws < self.rate) & candidates
        if at_least_one and not selected.any() and candidates.any():
            first = torch.where(candidates, draws, torch.inf).argmin()
            selected.view(-1)[first] = True
        return selected

    def corrupt(
        self,
        input_ids: Int[torch.Tensor, "..."],
        selected: Bool[torch.Tensor, "..."],
        generator: torch.Generator,
        *,
        vocab_size: int,
        mask_token_id: int,
    ) -> Int[torch.Tensor, "..."]:
        """The ids with each selected token masked (draw < `mask`), random (< `mask + random`) or kept."""
        draw = torch.rand(input_ids.shape, generator=generator, device=generator.device)
        random_tokens = torch.randint(vocab_size, input_ids.shape, generator=generator, device=generator.device)
        draw, random_tokens = copied_to(draw, input_ids.device), copied_to(random_tokens, input_ids.device)
        corrupted = input_ids.clone()
        corrupted[selected & (draw < self.mask)] = mask_token_id
        randomised = selected & (draw >= self.mask) & (draw < self.mask + self.random)
        corrupted[randomised] = random_tokens[randomised]
        return corrupted


def resolve_masking(masking: MaskedLM | None, mlm_probability: float | None) -> MaskedLM:
    """The masking settings from `masking` and / or the `mlm_probability` shorthand, which must agree.

    Args:
        masking: A `MaskedLM`, or None.
        mlm_probability: A masking rate in (0, 1) (BERT's split), or None.

    Returns:
        `masking`; else `MaskedLM(rate=mlm_probability)`; else `MaskedLM()`.

    Raises:
        InvalidInputError: A wrong type, a rate outside (0, 1), or rates that differ.

    Examples:
        >>> resolve_masking(None, 0.3)
        MaskedLM(rate=0.3, mask=0.8, random=0.1, keep=0.1)
        >>> resolve_masking(MaskedLM(rate=0.3), None) == resolve_masking(MaskedLM(rate=0.3), 0.3)
        True
    """
    if masking is not None and not isinstance(masking, MaskedLM):
        raise InvalidInputError(
            f"masking must be an ia.objectives.MaskedLM (e.g. MaskedLM(rate=0.3)), got {type(masking).__name__}."
        )
    if mlm_probability is None:
        return masking if masking is not None else MaskedLM()
    mlm_probability = check_number("mlm_probability", mlm_probability, above=0, below=1)
    if masking is not None and masking.rate != mlm_probability:
        raise InvalidInputError(
            f"mlm_probability={mlm_probability} disagrees with the rate of {masking}: give the rate once, in MaskedLM(rate=...)."
        )
    return masking if masking is not None else MaskedLM(rate=mlm_probability)


def special_tokens_mask(input_ids: Int[torch.Tensor, "..."], special_ids: list[int]) -> Bool[torch.Tensor, "..."]:
    """Where `input_ids` holds one of the tokenizer's `special_ids` (never selected for masking).

    Examples:
        >>> special_tokens_mask(torch.tensor([0, 5, 2]), [0, 2]).tolist()
        [True, False, True]
    """
    special = torch.tensor(sorted(set(special_ids)), dtype=input_ids.dtype)
    return torch.isin(input_ids, copied_to(special, input_ids.device))
