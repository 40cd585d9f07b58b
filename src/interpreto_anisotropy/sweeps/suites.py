# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The checkpoint suites the paper studied, as reconstructed, as their model cards and training sources describe them.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> family, size = ia.suites.find("pythia-160m")
    >>> size.model_id, family.revision(1000), family.total_steps, size.recommended_split_point
    ('EleutherAI/pythia-160m', 'step1000', 143000, 6)
    >>> ia.suites.find("moderncamembert-base")[0].probe_objective
    MaskedLM(rate=0.3, mask=0.8, random=0.1, keep=0.1)
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from ..errors import InvalidInputError
from ..probing.masking import MaskedLM
from ..probing.objectives import ObjectiveName

__all__ = ["Architecture", "PRESETS", "PYTHIA_STEPS", "SUITES", "Suite", "SuiteSize", "find"]

#: Steps at which EleutherAI published Pythia checkpoints: 0, the powers of two up to 512, then every 1000 steps.
PYTHIA_STEPS: tuple[int, ...] = (0, *(2**i for i in range(10)), *range(1000, 143001, 1000))


class Architecture(str, Enum):
    """The transformers model type of a suite's checkpoints (`config.model_type`).

    Attributes:
        GPT_NEOX: GPT-NeoX decoder (Pythia).
        LLAMA: Llama decoder (SmolLM2, Gaperon).
        OLMO: OLMo decoder (OLMo 1).
        EUROBERT: EuroBERT encoder.
        MODERNBERT: ModernBERT encoder (ModernCamemBERT).

    Examples:
        >>> Architecture("gpt_neox") is Architecture.GPT_NEOX
        True
    """

    GPT_NEOX = "gpt_neox"
    LLAMA = "llama"
    OLMO = "olmo"
    EUROBERT = "eurobert"
    MODERNBERT = "modernbert"


@dataclass(frozen=True)
class SuiteSize:
    """One model size of a suite.

    Attributes:
        size: The size's label, as in the preset's name (`"160m"`, `"1.7b"`, `"base"`).
        model_id: The Hugging Face Hub repository holding the intermediate checkpoints.
        num_layers: Number of transformer blocks.
        hidden_size: Width of the residual stream.
        checkpoint_interval: Steps between published checkpoints, where the card states one (not checked).

    Examples:
        >>> SuiteSize("160m", "EleutherAI/pythia-160m", num_layers=12, hidden_size=768).recommended_split_point
        6
    """

    size: str
    model_id: str
    num_layers: int
    hidden_size: int
    checkpoint_interval: int | None = None

    @property
    def recommended_split_point(self) -> int:
        """The middle block, `num_layers // 2`: our choice of a split point, not the model card's."""
        return self.num_layers // 2


@dataclass(frozen=True)
class Suite:
    """A family of training runs with intermediate checkpoints, as its sources describe it.

    Attributes:
        id: The family's name in preset names (`"pythia"` in `"pythia-160m"`).
        title: The family's name in prose.
        sizes: The sizes taken as swept by the paper (a reconstruction).
        objective: The pre-training objective (`ObjectiveName.CAUSAL_LM` or `ObjectiveName.MASKED_LM`).
        architecture: The checkpoints' transformers model type.
        revision_format: A `str.format` template turning a step into a revision (`"step{step}"`); None: not possible.
        revision_naming: What the sources say about revision names, in words.
        total_steps: The training run's length in optimiser steps, or None when the sources do not give it.
        published_steps: The steps with a published checkpoint, or None when not enumerated (steps then unchecked).
        masking: For masked LMs, the pre-training masking the sources state; None when they do not.
        sources: The URLs the facts come from.
        unconfirmed: What the sources read could not confirm.

    Examples:
        >>> SUITES["olmo"].revision_format is None, SUITES["olmo"].total_steps
        (True, 738020)
    """

    id: str
    title: str
    sizes: tuple[SuiteSize, ...]
    objective: ObjectiveName
    architecture: Architecture
    revision_format: str | None
    revision_naming: str
    total_steps: int | None
    published_steps: tuple[int, ...] | None = None
    masking: MaskedLM | None = None
    sources: tuple[str, ...] = ()
    unconfirmed: tuple[str, ...] = ()

    @property
    def presets(self) -> tuple[str, ...]:
        """The preset names of the sizes, `"{id}-{size}"`."""
        return tuple(f"{self.id}-{size.size}" for size in self.sizes)

    @property
    def probe_objective(self) -> str | MaskedLM:
        """The objective to probe with: `"causal_lm"`, or a `MaskedLM` (the stated masking, else BERT's default)."""
        if self.objective is ObjectiveName.MASKED_LM:
            return self.masking if self.masking is not None else MaskedLM()
        return self.objective.value

    def size(self, size: str) -> SuiteSize:
        """The size labelled `size` (case-insensitive, such as `"160m"`); InvalidInputError lists the sizes."""
        found = {s.size: s for s in self.sizes}.get(size.strip().lower() if isinstance(size, str) else None)
        if found is None:
            raise InvalidInputError(
                f"{self.title} has no preset size {size!r}; preset sizes: {[s.size for s in self.sizes]}. For another repository, list its revisions with ia.checkpoints.hub(model_id, revisions)."
            )
        return found

    def revision(self, step: int) -> str:
        """The revision of the checkpoint at `step` (e.g. `"step1000"`); InvalidInputError when it cannot be built."""
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise InvalidInputError(f"{self.title} steps must be integers >= 0, got {step!r}.")
        if self.revision_format is None:
            raise InvalidInputError(
                f"{self.title}'s revisions cannot be built from a step: {self.revision_naming} Pass revision names carrying the step (revisions=['step1000-...']) or a map revisions={{step: revision}}."
            )
        return self.revision_format.format(step=int(step))


_HF = "https://huggingface.co/"

_EUROBERT = Suite(
    id="eurobert",
    title="EuroBERT",
    sizes=(
        SuiteSize("210m", "EuroBERT/EuroBERT-210m", num_layers=12, hidden_size=768),
        SuiteSize("610m", "EuroBERT/EuroBERT-610m", num_layers=26, hidden_size=1152),
    ),
    objective=ObjectiveName.MASKED_LM,
    architecture=Architecture.EUROBERT,
    revision_format=None,
    revision_naming=(
        "the paper says EuroBERT's intermediate checkpoints are released, but no source read here names their "
        "revisions."
    ),
    total_steps=None,
    sources=(
        f"{_HF}EuroBERT/EuroBERT-210m",
        f"{_HF}EuroBERT/EuroBERT-210m/blob/main/config.json",
        "https://github.com/Nicolas-BZRD/EuroBERT/blob/main/optimus/trainer/model/encoder/eurobert.py",
        "https://github.com/Nicolas-BZRD/EuroBERT/blob/main/docs/trainer.md",
        "https://arxiv.org/abs/2503.05500",
    ),
    unconfirmed=(
        "the revision names of the intermediate checkpoints",
        "the number of training steps",
        "the pre-training masking rate and split (the card does not state them; the Optimus trainer's defaults, "
        "mlm_probability=0.3 with every selected token masked, are a library default, not confirmed as the runs')",
    ),
)

_MODERNCAMEMBERT = Suite(
    id="moderncamembert",
    title="ModernCamemBERT",
    sizes=(SuiteSize("base", "almanach/moderncamembert-base", num_layers=22, hidden_size=768),),
    objective=ObjectiveName.MASKED_LM,
    architecture=Architecture.MODERNBERT,
    revision_format=None,
    revision_naming="no source read here says where ModernCamemBERT's intermediate checkpoints are, or their names.",
    total_steps=None,
    masking=MaskedLM(rate=0.3),
    sources=(f"{_HF}almanach/moderncamembert-base", "https://arxiv.org/abs/2504.08716"),
    unconfirmed=(
        "the repository and revision names of the intermediate checkpoints",
        "the number of training steps",
        "the mask / random / keep split (the card states the 30 % rate only; BERT's 80/10/10 is assumed)",
        "the layer count and width (those of ModernBERT-base, read from a derived model's card, not from "
        "moderncamembert-base's own config: check model.config.num_hidden_layers)",
    ),
)

_OLMO = Suite(
    id="olmo",
    title="OLMo",
    sizes=(SuiteSize("1b", "allenai/OLMo-1B-hf", num_layers=16, hidden_size=2048, checkpoint_interval=1000),),
    objective=ObjectiveName.CAUSAL_LM,
    architecture=Architecture.OLMO,
    revision_format=None,
    revision_naming=(
        "revisions are named step{N}-tokens{T}B (e.g. step20000-tokens84B), one every 1000 steps with a few lost; "
        "T, the billions of tokens seen, is rounded by the authors and cannot be recomputed exactly from N. The "
        "names are listed in the repository's revisions.txt."
    ),
    total_steps=738020,
    sources=(
        f"{_HF}allenai/OLMo-1B",
        "https://github.com/allenai/OLMo/blob/main/configs/official/OLMo-1B.yaml",
        "https://github.com/allenai/OLMo/blob/main/checkpoints/official/OLMo-1B.csv",
    ),
    unconfirmed=(
        "that allenai/OLMo-1B-hf (the transformers-native copy, which this preset loads) carries the same branches "
        "as allenai/OLMo-1B, whose card documents them (pass model_id='allenai/OLMo-1B' for the original, which "
        "needs the ai2-olmo package)",
    ),
)

_PYTHIA = Suite(
    id="pythia",
    title="Pythia",
    sizes=(
        SuiteSize("160m", "EleutherAI/pythia-160m", num_layers=12, hidden_size=768),
        SuiteSize("410m", "EleutherAI/pythia-410m", num_layers=24, hidden_size=1024),
        SuiteSize("1b", "EleutherAI/pythia-1b", num_layers=16, hidden_size=2048),
    ),
    objective=ObjectiveName.CAUSAL_LM,
    architecture=Architecture.GPT_NEOX,
    revision_format="step{step}",
    revision_naming="revisions step0, step1, step2, step4, ..., step512, then every 1000 steps to step143000 (main).",
    total_steps=PYTHIA_STEPS[-1],
    published_steps=PYTHIA_STEPS,
    sources=(f"{_HF}EleutherAI/pythia-160m", "https://github.com/EleutherAI/pythia"),
)

_GAPERON = Suite(
    id="gaperon",
    title="Gaperon",
    sizes=(SuiteSize("1.5b", "almanach/Gaperon-1125-1B", num_layers=16, hidden_size=2048),),
    objective=ObjectiveName.CAUSAL_LM,
    architecture=Architecture.LLAMA,
    revision_format=None,
    revision_naming=(
        "the paper says hundreds of intermediate checkpoints are released, but no source read here names their "
        "revisions or says which repository holds them (the repositories are gated: accept their conditions)."
    ),
    total_steps=None,
    sources=(
        f"{_HF}almanach/Gaperon-1125-1B",
        f"{_HF}almanach/Gaperon-Young-1125-1B",
        "https://arxiv.org/abs/2510.25771",
    ),
    unconfirmed=(
        "the repository and revision names of the intermediate checkpoints (almanach/Gaperon-1125-1B is the main "
        "release, initialised from Gaperon-Young-1125-1B, the from-scratch run: pass model_id= for another)",
        "the number of training steps",
    ),
)

_SMOLLM2 = Suite(
    id="smollm2",
    title="SmolLM2",
    sizes=(
        SuiteSize("360m", "HuggingFaceTB/SmolLM2-360M-intermediate-checkpoints", 32, 960, checkpoint_interval=160_000),
        SuiteSize(
            "1.7b", "HuggingFaceTB/SmolLM2-1.7B-intermediate-checkpoints", 24, 2048, checkpoint_interval=125_000
        ),
    ),
    objective=ObjectiveName.CAUSAL_LM,
    architecture=Architecture.LLAMA,
    revision_format="step-{step}",
    revision_naming="revisions step-{N}, one every 160000 steps (360M) or 125000 steps (1.7B), each about 250B tokens.",
    total_steps=None,
    sources=(
        f"{_HF}HuggingFaceTB/SmolLM2-360M-intermediate-checkpoints",
        f"{_HF}HuggingFaceTB/SmolLM2-1.7B-intermediate-checkpoints",
        f"{_HF}HuggingFaceTB/SmolLM2-360M/blob/main/config.json",
        f"{_HF}HuggingFaceTB/SmolLM2-1.7B/blob/main/config.json",
    ),
    unconfirmed=(
        "the number of training steps (the cards give the checkpoint interval, not the run's length)",
        "which steps were published (steps are not checked; one not published fails at load time)",
    ),
)

#: The suites the paper studied (as reconstructed), by id.
SUITES: Mapping[str, Suite] = MappingProxyType(
    {suite.id: suite for suite in (_EUROBERT, _MODERNCAMEMBERT, _OLMO, _PYTHIA, _GAPERON, _SMOLLM2)}
)

#: The preset names `"{suite}-{size}"`, one per model the paper swept (as reconstructed).
PRESETS: tuple[str, ...] = tuple(name for suite in SUITES.values() for name in suite.presets)


def find(name: str) -> tuple[Suite, SuiteSize]:
    """The suite and size of a preset name such as `"olmo-1b"` (case-insensitive).

    Args:
        name: A preset name, `"{suite}-{size}"` (one of `PRESETS`).

    Returns:
        `(suite, size)`.

    Raises:
        InvalidInputError: If the name is not a preset; the message lists the presets.

    Examples:
        >>> suite, size = find("SmolLM2-1.7B")
        >>> size.model_id, suite.revision(125000)
        ('HuggingFaceTB/SmolLM2-1.7B-intermediate-checkpoints', 'step-125000')
    """
    family, _, size = name.strip().lower().rpartition("-") if isinstance(name, str) else ("", "", "")
    if family not in SUITES:
        raise InvalidInputError(
            f"Unknown suite preset {name!r}; presets: {list(PRESETS)}. For another repository, list its revisions with ia.checkpoints.hub(model_id, revisions)."
        )
    suite = SUITES[family]
    return suite, suite.size(size)
