# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Training checkpoints: where they are, which step they are, and how to load them.

A `Checkpoint` is one model state (`step`, `source`, `revision`); `local` (folders on disk), `hub` (revisions of a
Hub repository), `pythia`, `smollm2` and `suite` build a sweep's sorted list. `load_checkpoint` returns `(model,
tokenizer)` ready for Interpreto, its config checked against its weights before any real tensor is allocated
(`check_config`); `loaded` frees the model after a `with` block.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> ckpts = ia.checkpoints.pythia("160m", [0, 512, 143000])
    >>> [c.revision for c in ckpts]
    ['step0', 'step512', 'step143000']
"""

from __future__ import annotations

import contextlib
import glob
import logging
import numbers
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..commons import hub as hub_access
from ..commons.files import load_json
from ..commons.options import check_device
from ..errors import CheckpointError, CheckpointWarning, InvalidInputError
from ..probing.objectives import objective_from_config
from ..reading.batching import ensure_pad_token
from . import suites as suite_registry

__all__ = ["Checkpoint", "CheckpointList", "check_revisions", "hub", "infer_objective", "load_checkpoint", "loaded"]
__all__ += ["local", "parse_step", "PYTHIA_SIZES", "PYTHIA_STEPS", "pythia", "SMOLLM2_SIZES", "smollm2", "suite"]

logger = logging.getLogger(__name__)

#: Steps at which EleutherAI published Pythia checkpoints: 0, the powers of two up to 512, then every 1000 steps.
PYTHIA_STEPS: tuple[int, ...] = suite_registry.PYTHIA_STEPS

#: Pythia model sizes (`EleutherAI/pythia-{size}`).
PYTHIA_SIZES: tuple[str, ...] = ("14m", "31m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")

#: SmolLM2 model sizes with intermediate checkpoints (`HuggingFaceTB/SmolLM2-{size}-intermediate-checkpoints`).
SMOLLM2_SIZES: tuple[str, ...] = ("135M", "360M", "1.7B")

# A folder name or a revision that carries a step (checkpoint-123, step123, step-123, step_123); revisions may carry a
# suffix after it (OLMo's `step1000-tokens4B`, FineWeb's `step-001000-2BT`).
_FOLDER_STEP = re.compile(r"^(?:checkpoint|step)[-_]?(\d+)$", re.IGNORECASE)
_REVISION_STEP = re.compile(r"^(?:checkpoint|step)[-_]?(\d+)(?:[-_.].*)?$", re.IGNORECASE)
_KINDS = ("auto", "local", "hub")


def _is_step(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= 0


@dataclass(frozen=True, order=True)
class Checkpoint:
    """One model state of a training run.

    Checkpoints sort by step (then source, revision); `kind` and `prefer_local` (how to load, not what) are left out of
    comparisons and of `to_dict` (docs/how-to/hub-checkpoints.md).

    Args:
        step: The training step, an integer >= 0.
        source: A local folder (holding `config.json`) or a Hub model id such as `"EleutherAI/pythia-160m"`.
        revision: For a Hub model id, the branch, tag or commit to load (`"step1000"`); `None`: the default branch.
        kind: `"hub"` (what `hub`, `pythia`, `smollm2`, `suite` build) loads from the Hub, `"local"` (what `local`
            builds) the folder, `"auto"` (default) an existing folder, else the Hub.
        prefer_local: For a Hub checkpoint, load the folder named `source` when it exists (it must hold the revision).

    Raises:
        InvalidInputError: If `step` is not an integer >= 0, `source` is empty, `revision` is not a non-empty string,
            `kind` is unknown, or a local checkpoint is given a revision.

    Examples:
        >>> ckpt = Checkpoint(1000, "EleutherAI/pythia-160m", revision="step1000")
        >>> ckpt.name
        'step-1000'
        >>> Checkpoint.from_dict(ckpt.to_dict()) == ckpt
        True
    """

    step: int
    source: str
    revision: str | None = None
    kind: str = field(default="auto", compare=False, kw_only=True)
    prefer_local: bool = field(default=False, compare=False, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if not _is_step(self.step):
            raise InvalidInputError(f"Checkpoint step must be an integer >= 0, got {self.step!r}.")
        source = os.fspath(self.source) if isinstance(self.source, os.PathLike) else self.source
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError(
                f"Checkpoint source must be a local folder or a Hugging Face Hub model id, got {self.source!r}."
            )
        if self.revision is not None and (not isinstance(self.revision, str) or not self.revision.strip()):
            raise InvalidInputError(
                f"Checkpoint revision must be a non-empty string (a branch, tag or commit) or None, got {self.revision!r}."
            )
        if self.kind not in _KINDS:
            raise InvalidInputError(f"Checkpoint kind must be one of {list(_KINDS)}, got {self.kind!r}.")
        if self.kind == "local" and self.revision is not None:
            raise InvalidInputError(
                f"Checkpoint {self.name} is a local folder ({source!r}) but was given revision {self.revision!r}: a folder has no revisions; drop the revision, or use kind='hub' to load the Hub repository."
            )
        object.__setattr__(self, "step", int(self.step))
        object.__setattr__(self, "source", source)

    @property
    def name(self) -> str:
        """A short label for tables and file names: `"step-{step}"`."""
        return f"step-{self.step}"

    @property
    def is_local(self) -> bool:
        """Whether this checkpoint loads a local folder (otherwise it loads a Hub repository), following `kind`."""
        exists = Path(self.source).expanduser().is_dir()
        return self.prefer_local and exists if self.kind == "hub" else self.kind == "local" or exists

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-ready dict with keys `step`, `source` and `revision` (not `kind`: see the class)."""
        return {"step": self.step, "source": self.source, "revision": self.revision}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """Builds a checkpoint from the output of `to_dict` (InvalidInputError for any other mapping)."""
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"Checkpoint.from_dict expects a dict, got {type(data).__name__}.")
        missing, unknown = {"step", "source"} - set(data), set(data) - {"step", "source", "revision"}
        if missing or unknown:
            raise InvalidInputError(
                f"Checkpoint.from_dict expects keys 'step', 'source' and optionally 'revision'; missing {sorted(missing)}, unknown {sorted(unknown)}."
            )
        return cls(step=data["step"], source=data["source"], revision=data.get("revision"))


class CheckpointList(list):
    """A list of checkpoints that knows its training run's length and objective (presets fill them in).

    Args:
        checkpoints: The checkpoints.
        total_steps: The training run's number of steps, or None when unknown.
        objective: The run's objective (a name or a `MaskedLM`), or None when unknown.

    Examples:
        >>> run = CheckpointList([Checkpoint(0, "a"), Checkpoint(10, "a")], total_steps=100)
        >>> len(run), run.total_steps, run.objective
        (2, 100, None)
    """

    def __init__(
        self, checkpoints: Iterable[Checkpoint] = (), *, total_steps: int | None = None, objective: Any = None
    ):
        super().__init__(checkpoints)
        self.total_steps, self.objective = total_steps, objective


def parse_step(name: str) -> int | None:
    """Reads the training step from a folder name or a revision: `checkpoint-123`, `step123`, `step-123`, `step_123`,
    optionally with a suffix (`step1000-tokens4B`).

    Args:
        name: A folder name (not a path) or a revision.

    Returns:
        The step, or `None` if `name` carries none (e.g. `"main"`).

    Examples:
        >>> parse_step("checkpoint-250"), parse_step("step-001000-2BT"), parse_step("main")
        (250, 1000, None)
    """
    match = _REVISION_STEP.match(name.strip())
    return int(match.group(1)) if match else None


def local(pattern: str | os.PathLike) -> list[Checkpoint]:
    """Lists the checkpoint folders of a training run on disk, sorted by step (read from the folder's name by
    `parse_step`; a folder whose name carries none is skipped with a warning).

    Args:
        pattern: A glob of checkpoint folders, e.g. `"runs/toy/checkpoint-*"` (`~` is expanded; `**` is recursive).

    Returns:
        The checkpoints, sorted by step, each with `source` set to the folder's absolute path and no revision.

    Raises:
        InvalidInputError: If the pattern matches no folder, or no matched folder name carries a step.
        CheckpointError: If a matched folder has no `config.json`, or two folders carry the same step.

    Examples:
        >>> ckpts = local("runs/toy/checkpoint-*")  # doctest: +SKIP
        >>> [c.name for c in ckpts]  # doctest: +SKIP
        ['step-0', 'step-100', 'step-200']
    """
    if not isinstance(pattern, (str, os.PathLike)):
        raise InvalidInputError(f"local() expects a glob pattern (str or Path), got {type(pattern).__name__}.")
    expanded = os.path.expanduser(os.fspath(pattern))
    folders = sorted(Path(p) for p in glob.glob(expanded, recursive=True) if Path(p).is_dir())
    if not folders:
        raise InvalidInputError(
            f"No checkpoint folder matches {expanded!r} (searched from {os.getcwd()!r}): give a glob of folders such as 'runs/toy/checkpoint-*'."
        )
    steps = {folder: _FOLDER_STEP.match(folder.name) for folder in folders}
    for folder, match in steps.items():
        if match and not (folder / "config.json").is_file():
            raise CheckpointError(
                f"Checkpoint folder {str(folder)!r} has no config.json, so it is not a saved transformers model: save checkpoints with model.save_pretrained(folder), or narrow the glob to exclude this folder."
            )
    naming = "Name checkpoint folders checkpoint-N, stepN, step-N or step_N."
    if skipped := [folder.name for folder, match in steps.items() if match is None]:
        warnings.warn(
            f"Skipped {len(skipped)} folder(s) matching {expanded!r} whose name carries no step: {skipped}. {naming}",
            CheckpointWarning,
            stacklevel=2,
        )
    if len(skipped) == len(folders):
        raise InvalidInputError(
            f"None of the {len(folders)} folder(s) matching {expanded!r} carries a step in its name. {naming}"
        )
    checkpoints = sorted(Checkpoint(int(m.group(1)), str(f.resolve()), kind="local") for f, m in steps.items() if m)
    _check_unique_steps(checkpoints, CheckpointError)
    return checkpoints


def hub(
    model_id: str, revisions: str | Iterable[str] | Mapping[int, str], *, prefer_local: bool = False
) -> list[Checkpoint]:
    """Lists revisions of a Hugging Face Hub repository as checkpoints, sorted by step (read from each name by
    `parse_step`, or given by a mapping). Nothing is downloaded.

    Args:
        model_id: A Hub model id such as `"EleutherAI/pythia-160m"`.
        revisions: Revision names, or a mapping `{step: revision}` for names without a step (`{143000: "main"}`).
        prefer_local: Load the folder named `model_id` instead, when it exists (see `Checkpoint`).

    Returns:
        The checkpoints, sorted by step.

    Raises:
        InvalidInputError: If `model_id` or `revisions` is empty, a revision carries no step (outside a mapping), or
            two revisions have the same step.

    Examples:
        >>> [c.step for c in hub("EleutherAI/pythia-160m", ["step1000", "step0"])]
        [0, 1000]
        >>> hub("EleutherAI/pythia-160m", {143000: "main"})[0].revision
        'main'
    """
    if isinstance(revisions, Mapping):
        pairs = list(revisions.items())
    else:
        pairs = []
        for rev in [revisions] if isinstance(revisions, str) else revisions:
            if not isinstance(rev, str):
                raise InvalidInputError(f"Revisions must be strings such as 'step1000', got {rev!r}.")
            if (step := parse_step(rev)) is None:
                raise InvalidInputError(
                    f"Revision {rev!r} of {model_id!r} carries no training step: pass a mapping {{step: revision}} instead, e.g. hub({model_id!r}, {{143000: {rev!r}}})."
                )
            pairs.append((step, rev))
    if not pairs:
        raise InvalidInputError(f"No revision given for {model_id!r}.")
    checkpoints = sorted(Checkpoint(s, model_id, rev, kind="hub", prefer_local=prefer_local) for s, rev in pairs)
    _check_unique_steps(checkpoints, InvalidInputError)
    return checkpoints


def pythia(
    size: str, steps: int | Iterable[int], *, deduped: bool = False, prefer_local: bool = False
) -> list[Checkpoint]:
    """Lists checkpoints of EleutherAI's Pythia suite (`EleutherAI/pythia-{size}`, revisions `step{N}`).

    Args:
        size: One of `PYTHIA_SIZES` (`"14m"`, `"70m"`, `"160m"`, `"410m"`, `"1b"`, `"1.4b"`, ...); case-insensitive.
        steps: One step or several, each one of `PYTHIA_STEPS` (143000 is the final model). Duplicates are dropped.
        deduped: Use the models trained on the deduplicated Pile (`EleutherAI/pythia-{size}-deduped`).
        prefer_local: Load a folder named like the repository instead, when it exists (see `Checkpoint`).

    Returns:
        The checkpoints, sorted by step.

    Raises:
        InvalidInputError: If `size` is not a Pythia size, `steps` is empty, or a step was not published.

    Examples:
        >>> [(c.source, c.revision) for c in pythia("160m", 1000, deduped=True)]
        [('EleutherAI/pythia-160m-deduped', 'step1000')]
    """
    model_id = f"EleutherAI/pythia-{_normalise_size(size, PYTHIA_SIZES, 'pythia')}" + ("-deduped" if deduped else "")
    return _listed(suite_registry.SUITES["pythia"], model_id, _steps(steps, "pythia"), None, prefer_local)


def smollm2(size: str, steps: int | Iterable[int], *, prefer_local: bool = False) -> list[Checkpoint]:
    """Lists SmolLM2 intermediate checkpoints (`HuggingFaceTB/SmolLM2-{size}-intermediate-checkpoints`, revisions
    `step-{N}`); an unpublished step fails at load time.

    Args:
        size: One of `SMOLLM2_SIZES` (`"135M"`, `"360M"`, `"1.7B"`); case-insensitive.
        steps: One step or several (integers >= 0). Duplicates are dropped.
        prefer_local: Load a folder named like the repository instead, when it exists (see `Checkpoint`).

    Returns:
        The checkpoints, sorted by step.

    Raises:
        InvalidInputError: If `size` is not a SmolLM2 size, `steps` is empty, or a step is not an integer >= 0.

    Examples:
        >>> [(c.source, c.revision) for c in smollm2("360m", [160000])]
        [('HuggingFaceTB/SmolLM2-360M-intermediate-checkpoints', 'step-160000')]
    """
    model_id = f"HuggingFaceTB/SmolLM2-{_normalise_size(size, SMOLLM2_SIZES, 'smollm2')}-intermediate-checkpoints"
    return _listed(suite_registry.SUITES["smollm2"], model_id, _steps(steps, "smollm2"), None, prefer_local)


def suite(
    name: str,
    steps: int | Iterable[int] | None = None,
    *,
    revisions: str | Iterable[str] | Mapping[int, str] | None = None,
    model_id: str | None = None,
    prefer_local: bool = False,
) -> CheckpointList:
    """Lists checkpoints of one of the models the paper swept, with its suite's training length and objective, the
    steps checked against them where known (docs/suites.md).

    Args:
        name: A preset name `"{suite}-{size}"`, one of `ia.suites.PRESETS` (`"olmo-1b"`, ...); case-insensitive.
        steps: One step or several (integers >= 0), for suites whose revisions are built from the step (Pythia,
            SmolLM2). Duplicates are dropped.
        revisions: Revision names carrying their step, or a mapping `{step: revision}`; instead of `steps`.
        model_id: Another Hub repository of the same suite (e.g. `"allenai/OLMo-1B"`); default: the preset's.
        prefer_local: Load a folder named like the repository instead, when it exists (see `Checkpoint`).

    Returns:
        The checkpoints, sorted by step, with `total_steps` (None: unknown) and `objective` (`Suite.probe_objective`).

    Raises:
        InvalidInputError: An unknown preset or size (the message lists them), neither or both of `steps` and
            `revisions`, `steps` for a suite whose revisions cannot be built from the step, a step that was not
            published or lies after the end of training, a revision name without a step, or no step or revision.

    Examples:
        >>> [c.revision for c in suite("pythia-160m", [0, 143000])]
        ['step0', 'step143000']
        >>> run = suite("olmo-1b", revisions=["step20000-tokens84B", "step1000-tokens4B"])
        >>> [c.step for c in run], run.total_steps, run.objective
        ([1000, 20000], 738020, 'causal_lm')
        >>> suite("eurobert-210m", revisions={0: "REVISION-AT-STEP-0"}).objective
        MaskedLM(rate=0.15, mask=0.8, random=0.1, keep=0.1)
    """
    family, size = suite_registry.find(name)
    preset = f"{family.id}-{size.size}"
    if (steps is None) == (revisions is None):
        raise InvalidInputError(
            f"suite({preset!r}) needs steps= or revisions=, not {'both' if steps is not None else 'neither'}. Revisions of {family.title}: {family.revision_naming}"
        )
    steps = None if steps is None else _steps(steps, preset)
    return _listed(family, size.model_id if model_id is None else model_id, steps, revisions, prefer_local)


def _listed(family: Any, model_id: str, steps: list[int] | None, revisions: Any, prefer_local: bool) -> CheckpointList:
    """A suite's checkpoints at `steps` (else `revisions`), checked against its schedule and training length."""
    if steps is not None:
        revisions = {step: family.revision(step) for step in steps}
    checkpoints = hub(model_id, revisions, prefer_local=prefer_local)
    found = [c.step for c in checkpoints]
    if family.published_steps is not None and (unpublished := sorted(set(found) - set(family.published_steps))):
        raise InvalidInputError(
            f"{family.title} has no checkpoint at step(s) {unpublished}. {family.revision_naming} (see ia.suites.SUITES[{family.id!r}].published_steps)"
        )
    if family.total_steps is not None and found[-1] > family.total_steps:
        raise InvalidInputError(
            f"Step {found[-1]} is after the end of {family.title}'s training ({family.total_steps} steps): check the steps or revisions."
        )
    return CheckpointList(checkpoints, total_steps=family.total_steps, objective=family.probe_objective)


def infer_objective(config: Any) -> str:
    """Tells whether a model config describes a decoder (`"causal_lm"`) or an encoder (`"masked_lm"`).

    Args:
        config: A transformers `PretrainedConfig`.

    Returns:
        `"causal_lm"` or `"masked_lm"`, which are also the matching training objectives.

    Raises:
        CheckpointError: If the config gives no way to tell; pass `automodel=` to `load_checkpoint` then.

    Examples:
        >>> from transformers import EuroBertConfig, GPTNeoXConfig
        >>> infer_objective(GPTNeoXConfig()), infer_objective(EuroBertConfig())
        ('causal_lm', 'masked_lm')
    """
    objective = objective_from_config(config)
    if objective is None:
        raise CheckpointError(
            f"Cannot tell whether model type {getattr(config, 'model_type', None)!r} (architectures {getattr(config, 'architectures', None)}) is a decoder or an encoder: pass automodel='causal_lm', automodel='masked_lm' or an AutoModel class."
        )
    return objective.value


def load_checkpoint(
    checkpoint: Checkpoint,
    *,
    automodel: Any = None,
    device: Any = None,
    dtype: Any = None,
    tokenizer_source: str | os.PathLike | Checkpoint | None = None,
    cache_dir: str | os.PathLike | None = None,
    strict: bool = True,
    snapshot: str | os.PathLike | None = None,
    hub_timeout: float | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[Any, Any] | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> tuple[Any, Any]:
    """Loads a checkpoint's model and tokenizer (a Hub checkpoint fetched into the Hugging Face cache first), ready
    for Interpreto.

    Args:
        checkpoint: The checkpoint to load.
        automodel: The model class: `None` infers it from the config (`infer_objective`), `"causal_lm"` or
            `"masked_lm"` choose `AutoModelForCausalLM` or `AutoModelForMaskedLM`, any class with `from_pretrained`
            is used as is.
        device: Where to put the model; `None`: `"cuda"` when available, else `"cpu"`.
        dtype: A `torch.dtype` or its name (`"bfloat16"`); `None`: `torch.float32`; `"auto"`: the dtype saved.
        tokenizer_source: Where to load the tokenizer from when the checkpoint has none (a folder, a Hub model id, or
            another `Checkpoint`); `None`: the checkpoint itself.
        cache_dir: The Hugging Face cache folder; `None`: `HF_HUB_CACHE`, or `$HF_HOME/hub`.
        strict: Refuse missing weights, which transformers would initialise at random; `False` loads with a warning.
        snapshot: For a Hub checkpoint, the folder its files were already fetched to (`commons.hub.fetch`).
        hub_timeout: Seconds each Hub request may wait to connect or for its next bytes; None: 10 s.
        device_map: Dispatch the model with accelerate instead of moving it to `device`: `SweepConfig.device_map`.
        max_memory: `SweepConfig.max_memory`.
        offload_folder: `SweepConfig.offload_folder`.

    Returns:
        `(model, tokenizer)`: the model in eval mode on `device` (or dispatched), and a tokenizer with a pad token
        (its eos token, with a warning, if it had none).

    Raises:
        InvalidInputError: If `checkpoint`, `automodel`, `dtype`, `device` or a dict `device_map` (naming modules the
            model lacks, or leaving weights without a device) is not understood, or the tokenizer has neither a pad
            nor an eos token.
        CheckpointError: The folder, revision or repository is missing (or not cached offline), access is refused,
            the Hub fails or stalls past `hub_timeout`, the config contradicts the weights (`check_config`), the
            files cannot be read, or (`strict`) weights are missing or non-finite; the message says what to do.

    Examples:
        >>> model, tokenizer = load_checkpoint(pythia("70m", 1000)[0], device="cpu")  # doctest: +SKIP
    """
    import transformers

    if not isinstance(checkpoint, Checkpoint):
        raise InvalidInputError(
            f"load_checkpoint expects a Checkpoint, got {type(checkpoint).__name__}; build one with ia.checkpoints.local/hub/pythia/smollm2 or Checkpoint(step, source, revision)."
        )
    device, model_dtype = _device_and_dtype(device, dtype)
    source, shown = _resolve_source(checkpoint, cache_dir, snapshot=snapshot, timeout=hub_timeout)
    check_config_file(source, label=checkpoint.name)  # sizes no model has, before transformers reads
    advice = "config.json does not describe a valid model: fix config.json."
    config = _from_folder(transformers.AutoConfig.from_pretrained, source, f"the config of {shown}", advice)
    tokenizer = _load_tokenizer(checkpoint, tokenizer_source, (source, shown), cache_dir, hub_timeout)
    model_class = _model_class(automodel, config)
    check_config(source, config, model_class, label=checkpoint.name, strict=strict)  # before the build
    placement = _placement(model_class, config, checkpoint.name, device_map, max_memory, offload_folder)
    options = {"config": config, "dtype": model_dtype, **placement}
    model = _load_weights(checkpoint.name, model_class, source, shown, options, strict, device)
    model.eval()
    logger.info("Loaded checkpoint %s (%s on %s) from %s.", checkpoint.name, type(model).__name__, device, shown)
    return model, tokenizer


def _placement(
    model_class: Any, config: Any, name: str, device_map: Any, max_memory: Any, offload_folder: Any
) -> dict[str, Any]:
    """`from_pretrained`'s dispatch keywords (none without a `device_map`); a dict map naming modules the model lacks
    or leaving weights without a device is refused, checked on an empty model."""
    if device_map is None:
        return {}
    if isinstance(device_map, dict) and hasattr(model_class, "from_config"):
        from accelerate import init_empty_weights
        from accelerate.utils import check_device_map

        with init_empty_weights():
            empty = model_class.from_config(config)
        modules = dict(empty.named_modules(remove_duplicate=False))
        unknown = [path for path in device_map if path and path not in modules]
        problem = f"names modules {type(empty).__name__} does not have: {', '.join(unknown[:5])}" if unknown else ""
        if not problem:
            try:
                check_device_map(empty, device_map)
            except ValueError as err:
                problem = str(err).removeprefix("The device_map provided ")
        if problem:
            example = next(iter(name for name, _ in empty.named_children()), "model")
            raise InvalidInputError(
                f"device_map {problem} (checkpoint {name}). Map every module to a device (e.g. {{'{example}': 0}}), or give device_map=\"auto\"."
            )
    return {"device_map": device_map, "max_memory": max_memory, "offload_folder": offload_folder}


def _device_and_dtype(device: Any, dtype: Any) -> tuple[Any, Any]:
    """`device` as a `torch.device` (None: "cuda" when available, else "cpu") and `dtype` (None: float32)."""
    import torch

    default = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(check_device("device", default if device is None else device))
    named = isinstance(dtype, str) and dtype != "auto"
    value = torch.float32 if dtype is None else getattr(torch, dtype.removeprefix("torch."), None) if named else dtype
    if not (isinstance(value, torch.dtype) or value == "auto"):
        raise InvalidInputError(
            f"dtype must be None, 'auto', a torch.dtype or its name such as 'bfloat16', got {dtype!r}."
        )
    return device, value


def _load_tokenizer(
    checkpoint: Checkpoint, tokenizer_source: Any, resolved: tuple[str, str], cache_dir: Any, hub_timeout: Any
) -> Any:
    """The checkpoint's tokenizer (from `tokenizer_source` if given), with a pad token."""
    import transformers

    if tokenizer_source is not None and not isinstance(tokenizer_source, Checkpoint):
        tokenizer_source = Checkpoint(checkpoint.step, os.fspath(tokenizer_source))
    source, shown = (
        resolved if tokenizer_source is None else _resolve_source(tokenizer_source, cache_dir, timeout=hub_timeout)
    )
    advice = " If this checkpoint was saved without its tokenizer, pass tokenizer_source= (a folder or a Hub model id holding the tokenizer)."
    hint = advice if tokenizer_source is None else ""
    try:
        tokenizer = _from_folder(transformers.AutoTokenizer.from_pretrained, source, f"the tokenizer of {shown}")
    except CheckpointError as err:
        raise CheckpointError(f"{err}{hint}") from err.__cause__
    try:  # transformers 5 builds an empty tokenizer, without error, from a folder without tokenizer files
        ids = tokenizer("Hello world, 123.", add_special_tokens=False)["input_ids"]
    except Exception as err:  # a tokenizer that cannot even encode text
        raise CheckpointError(f"The tokenizer loaded from {source!r} cannot encode text: {err}") from err
    if len(ids) == 0:
        raise CheckpointError(
            f"The tokenizer loaded from {source!r} encodes text to no tokens: its tokenizer files are probably missing (transformers then builds an empty tokenizer).{hint}"
        )
    ensure_pad_token(tokenizer, source=str(source), stacklevel=5)
    return tokenizer


@contextlib.contextmanager
def loaded(checkpoint: Checkpoint, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    """Loads a checkpoint for the duration of a `with` block, then frees it: its weights move to the `meta` device
    and CUDA's cache is emptied (docs/performance.md). Do not use the model after the block.

    Args:
        checkpoint: The checkpoint to load.
        **kwargs: Keyword options of `load_checkpoint`.

    Yields:
        `(model, tokenizer)`, as returned by `load_checkpoint`.

    Raises:
        CheckpointError: As `load_checkpoint`: a missing folder, revision or repository, or unreadable files.
        InvalidInputError: As `load_checkpoint`: a bad option, or a tokenizer with neither a pad nor an eos token.

    Examples:
        >>> for ckpt in local("runs/toy/checkpoint-*"):  # doctest: +SKIP
        ...     with loaded(ckpt, device="cpu") as (model, tokenizer):
        ...         ...
    """
    import torch
    from accelerate.hooks import remove_hook_from_submodules

    from ..commons.progress import quiet_transformers

    with quiet_transformers():  # no "Loading weights" bar per checkpoint: a sweep shows one progress bar
        model, tokenizer = load_checkpoint(checkpoint, **kwargs)
    on_cuda = any(p.is_cuda for p in model.parameters())
    try:
        yield model, tokenizer
    finally:
        with contextlib.suppress(Exception):  # the weights to the meta device, even offloaded ones (held by hooks)
            remove_hook_from_submodules(model)
            torch.nn.Module.to(model, "meta")
        del model, tokenizer
        if on_cuda and torch.cuda.is_available():
            torch.cuda.empty_cache()


def _check_unique_steps(checkpoints: list[Checkpoint], error: type[Exception]) -> None:
    for previous, current in zip(checkpoints[:-1], checkpoints[1:], strict=True):
        if previous.step == current.step:
            raise error(
                f"Two checkpoints have step {current.step}: {previous.revision or previous.source!r} and {current.revision or current.source!r}; keep one checkpoint per step (narrow the glob or drop a revision)."
            )


def _normalise_size(size: str, known: tuple[str, ...], family: str) -> str:
    by_lower = {k.lower(): k for k in known}
    if not isinstance(size, str) or size.strip().lower() not in by_lower:
        raise InvalidInputError(
            f"{family} has no size {size!r}: known sizes are {list(known)}; for other models use ia.checkpoints.hub(model_id, revisions)."
        )
    return by_lower[size.strip().lower()]


def _steps(steps: int | Iterable[int], family: str) -> list[int]:
    values = [steps] if isinstance(steps, numbers.Integral) else steps
    values = list(values) if isinstance(values, Iterable) and not isinstance(values, (str, bytes)) else None
    if values is None or not all(map(_is_step, values)):
        raise InvalidInputError(f"{family} steps must be integers >= 0 (one, or a list), got {steps!r}.")
    return sorted({int(s) for s in values})


def _loads_from_hub(checkpoint: Checkpoint) -> bool:
    """Whether a checkpoint loads from the Hub (else from its folder), following its kind; contradictions raise."""
    source, local = checkpoint.source, checkpoint.is_local
    looks_like_path = (
        source.startswith((".", "/", "~", "\\")) or source.count("/") > 1 or os.sep in source.replace("/", "")
    )
    if checkpoint.kind == "hub" or not (local or looks_like_path):
        return not local
    if not Path(source).expanduser().is_dir():
        raise CheckpointError(
            f"Checkpoint folder {source!r} does not exist: check the path, or list folders with ia.checkpoints.local('path/to/run/checkpoint-*')."
        )
    if checkpoint.revision is not None:
        raise CheckpointError(
            f"Checkpoint {checkpoint.name}: {source!r} is a local folder, yet revision {checkpoint.revision!r} was given, and a folder has no revisions (it would stand in for every revision); drop the revision to load the folder, or build the checkpoint with ia.checkpoints.hub(...) (or Checkpoint(..., kind='hub')) to load the Hub repository."
        )
    return False


def _resolve_source(
    checkpoint: Checkpoint, cache_dir: Any = None, *, snapshot: Any = None, timeout: float | None = None
) -> tuple[str, str]:
    """The folder to load a checkpoint from (its own, or its revision's snapshot, fetched unless given), its label."""
    if not _loads_from_hub(checkpoint):
        folder = str(Path(checkpoint.source).expanduser())
        return folder, f"local checkpoint {folder!r}"
    if snapshot is None:
        snapshot = hub_access.fetch(
            checkpoint.source, checkpoint.revision, cache_dir=cache_dir, label=checkpoint.name, timeout=timeout
        )
    revision = f" at revision {checkpoint.revision!r}" if checkpoint.revision is not None else ""
    return os.fspath(snapshot), f"{checkpoint.source!r}{revision} (files in {os.fspath(snapshot)})"


def check_revisions(
    checkpoints: Iterable[Checkpoint], *, cache_dir: str | os.PathLike | None = None, hub_timeout: float | None = None
) -> None:
    """Checks, before any is loaded, that some checkpoints can be loaded from where their kind says.

    Local folders must exist without a revision, no two Hub checkpoints may share a `prefer_local` folder, and every
    Hub revision must exist (online: one `list_repo_refs` per repository; offline: in the cache).

    Args:
        checkpoints: The checkpoints.
        cache_dir: The Hugging Face cache (None: the default).
        hub_timeout: Seconds the refs listing may wait to connect or for its next bytes; None: 10 s.

    Raises:
        CheckpointError: Naming every missing revision (or the first local problem, or a Hub that did not answer
            within `hub_timeout`), and what to do.

    Examples:
        >>> check_revisions(pythia("70m", [0, 8]))  # doctest: +SKIP
    """
    on_hub: list[tuple[str, str | None, str]] = []
    folders: dict[str, Checkpoint] = {}
    for checkpoint in checkpoints:
        if _loads_from_hub(checkpoint):
            on_hub.append((checkpoint.source, checkpoint.revision, checkpoint.name))
            continue
        folder = str(Path(checkpoint.source).expanduser().resolve())
        other = folders.setdefault(folder, checkpoint)
        if other is not checkpoint and "hub" in (other.kind, checkpoint.kind):
            raise CheckpointError(
                f"Checkpoints {other.name} and {checkpoint.name} both load the local folder {folder!r} (prefer_local=True), so one model would stand in for revisions {other.revision!r} and {checkpoint.revision!r}: leave prefer_local off to load each revision from the Hub."
            )
    hub_access.check_revisions(on_hub, cache_dir=cache_dir, timeout=hub_timeout)


def _from_folder(function: Any, folder: str, what: str, advice: str | None = None, **kwargs: Any) -> Any:
    """`function(folder)`; missing or unreadable files (any failure, given `advice`) raise CheckpointError."""
    try:
        return function(folder, **kwargs)
    except CheckpointError:
        raise
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: a config.json nested too deep
        raise CheckpointError(f"Cannot load {what}: {err}") from err
    except Exception as err:  # noqa: BLE001  (config validators', safetensors' and transformers' own errors)
        if advice is None:
            raise
        raise CheckpointError(f"Cannot load {what}: {type(err).__name__}: {str(err)[:300]}. {advice}") from err


def _load_weights(
    name: str, model_class: Any, source: str, shown: str, kwargs: dict[str, Any], strict: bool, device: Any
) -> Any:
    """The model, its weights checked against its class (missing, unexpected, mis-shaped, unreadable, non-finite), on
    `device` unless dispatched by a `device_map`."""
    import torch

    what = f"Checkpoint {name} ({source})"
    advice = "The weight files are truncated, or their tensors do not have this architecture's shapes."
    weights = f"the weights of checkpoint {name} ({shown})"
    model, info = _from_folder(
        model_class.from_pretrained, source, weights, advice, output_loading_info=True, **kwargs
    )
    problems = {kind: sorted(info.get(f"{kind}_keys") or []) for kind in ("missing", "unexpected", "mismatched")}
    found = "; ".join(f"{kind}: {hub_access.some(keys)}" for kind, keys in problems.items() if keys)
    if found and not (problems["missing"] or problems["mismatched"]):  # unused weights: nothing is random
        warnings.warn(f"{what} has weights the model does not use ({found}).", CheckpointWarning, stacklevel=4)
    elif found:
        message = f"{what} does not match {getattr(model_class, '__name__', model_class)}'s weights ({found}); transformers initialises missing weights at random."
        advice = (
            "Check the checkpoint's files and the model class (automodel=), or pass strict=False to load it anyway."
        )
        _refuse_or_warn(message, advice, strict)
    # NaN or infinity: a diverged run's checkpoint (weights offloaded by a device_map are not read here)
    bad = [
        key
        for key, tensor in model.state_dict().items()
        if tensor.is_floating_point() and tensor.device.type != "meta" and not torch.isfinite(tensor).all()
    ]
    if bad:
        message = f"{what} has non-finite weights (NaN or infinity) in {hub_access.some(bad)}: training diverged before it was saved, or the file is corrupt."
        advice = "Leave it out, pass strict=False to load it anyway, or give a sweep skip_bad_checkpoints=True to record it as skipped."
        _refuse_or_warn(message, advice, strict)
    if "device_map" not in kwargs:
        try:
            model.to(device)
        except (RuntimeError, AssertionError) as err:  # e.g. "Torch not compiled with CUDA enabled"
            raise InvalidInputError(f"Cannot move checkpoint {name} to device '{device}': {err}") from err
    return model


def _model_class(automodel: Any, config: Any) -> Any:
    import transformers

    choices = {"causal_lm": transformers.AutoModelForCausalLM, "masked_lm": transformers.AutoModelForMaskedLM}
    if automodel is None:
        return choices[infer_objective(config)]
    if isinstance(automodel, str) and automodel in choices:
        return choices[automodel]
    if isinstance(automodel, str) or not hasattr(automodel, "from_pretrained"):
        raise InvalidInputError(
            f"automodel must be None, 'causal_lm', 'masked_lm' or an AutoModel class (one with from_pretrained), got {automodel!r}."
        )
    return automodel


# ---------------------------------------------------------------------------------------- the config against the weights
#: A numbered block in a weight name (`gpt_neox.layers.3.`, `model.layers.3.`, `transformer.h.3.`,
#: `bert.encoder.layer.3.`): the container's path and the block's index.
_BLOCK = re.compile(r"^(?P<container>(?:.*\.)?(?:layers|layer|h|blocks|block))\.(?P<index>\d+)\.")
#: config.json's spellings of the sizes checked (GPT-2's, T5's and others' next to the usual one).
_SIZES = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "num_heads"),
    "kv_heads": ("num_key_value_heads",),
    "positions": ("max_position_embeddings", "n_positions"),
}


def check_config_file(folder: str | Path, *, label: str) -> None:
    """Refuses a missing config.json, or one whose sizes cannot describe a model, before transformers reads it."""
    path = Path(folder) / "config.json"
    advice = f"Checkpoint {label} needs a transformers config.json: fix or replace it, or fetch the checkpoint again."
    values = load_json(path, error=CheckpointError, advice=advice, finite=False)
    if not isinstance(values, dict):
        return
    where = f"Checkpoint {label} ({folder})"
    found = {size: next(((k, values[k]) for k in keys if k in values), None) for size, keys in _SIZES.items()}
    for key, value in filter(None, found.values()):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(
                f"{where}: config.json gives {key} = {value!r}, which must be a positive integer. Fix config.json (compare it with the config of the run that wrote the weights)."
            )
    architectures = values.get("architectures")
    if architectures is not None and not (
        isinstance(architectures, list) and all(isinstance(n, str) for n in architectures)
    ):
        raise CheckpointError(
            f'{where}: config.json gives architectures = {architectures!r}, which must be a list of class names (e.g. ["GPTNeoXForCausalLM"]). Fix config.json.'
        )
    divisions = [("heads", "hidden")] if values.get("head_dim") is None else []  # a head_dim frees the hidden size
    for part, whole in [(found[size], found[within]) for size, within in [*divisions, ("kv_heads", "heads")]]:
        if part is not None and whole is not None and whole[1] % part[1]:
            raise CheckpointError(
                f"{where}: config.json gives {whole[0]} = {whole[1]}, which {part[0]} = {part[1]} does not divide. Fix config.json."
            )


def check_config(folder: str | Path, config: Any, model_class: Any, *, label: str, strict: bool = True) -> None:
    """Refuses a config that contradicts its checkpoint's weights, before the model is built."""
    where, shapes = f"Checkpoint {label} ({folder})", weight_shapes(folder)
    if shapes and _check_layers(config, shapes, where, strict):  # else (strict=False) the build is as the config says
        _check_meta_build(config, model_class, shapes, where)


def weight_shapes(folder: str | Path) -> dict[str, tuple[int, ...]] | None:
    """The name and shape of every weight of a checkpoint folder, read without the tensors' data."""
    root = Path(folder)
    for suffix, stem in ((".safetensors", "model"), (".bin", "pytorch_model")):
        index = root / f"{stem}{suffix}.index.json"
        if index.is_file():  # a sharded checkpoint: its shards, from its index
            try:
                shards = sorted(set(load_json(index, error=CheckpointError, finite=False)["weight_map"].values()))
            except (KeyError, AttributeError, TypeError):
                shards = []
            files = [root / shard for shard in shards if (root / shard).is_file()]
        else:
            files = [path for path in (root / f"{stem}{suffix}", root / f"model{suffix}") if path.is_file()][:1]
        if files:
            try:
                return {name: shape for file in files for name, shape in _shapes(file).items()}
            except Exception:  # noqa: BLE001  (unreadable files: from_pretrained names the failure)
                return None
    return None


def _shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """One weight file's names and shapes (safetensors' header, or a pickle on the meta device)."""
    import torch

    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118
    state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
    return {name: tuple(value.shape) for name, value in state.items() if isinstance(value, torch.Tensor)}


def _check_layers(config: Any, shapes: dict[str, tuple[int, ...]], where: str, strict: bool) -> bool:
    """No more layers in the config than the weights hold; False (a warning) when there are more and `strict` is off."""
    claimed = getattr(config, "num_hidden_layers", None)
    blocks: dict[str, set[int]] = {}
    for name in shapes:
        if match := _BLOCK.match(name):
            blocks.setdefault(match["container"], set()).add(int(match["index"]))
    if claimed is None or len(blocks) != 1:  # none, or several stacks (encoder and decoder): left to the build
        return True
    container, indices = next(iter(blocks.items()))
    if claimed <= len(indices):
        return True
    spelled = (getattr(config, "attribute_map", None) or {}).get("num_hidden_layers")  # GPT-2's n_layer
    key = f"{spelled} (num_hidden_layers)" if spelled else "num_hidden_layers"
    message = f"{where}: config.json gives {key} = {claimed}, but its weights hold {len(indices)} layer(s) ({container}.{min(indices)} to {container}.{max(indices)}): the config does not belong to these weights (strict=False builds all {claimed}, the missing ones random)."
    _refuse_or_warn(message, "Fix config.json, or pass strict=False to load it anyway.", strict)
    return False


def _check_meta_build(config: Any, model_class: Any, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """The model built on the meta device (no memory) has the weights' shapes wherever their names agree."""
    import torch

    build = getattr(model_class, "from_config", None) or getattr(model_class, "_from_config", None)
    if build is None:  # a class that cannot build from a config
        return
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(config)
    except Exception as err:  # noqa: BLE001  (whatever the architecture raises for a config it cannot build)
        raise CheckpointError(
            f"{where}: its config.json does not describe a model {getattr(model_class, '__name__', model_class)} can build ({type(err).__name__}: {str(err)[:200]}). Fix config.json."
        ) from err
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    for name, parameter in model.state_dict().items():
        saved = next((shapes[key] for key in (name, prefix + name, name.removeprefix(prefix)) if key in shapes), None)
        if saved is not None and tuple(parameter.shape) != saved:
            raise CheckpointError(
                f"The weights of {where[0].lower()}{where[1:]} do not have the shapes its config.json gives: {name} is {list(saved)} in the weights and {list(parameter.shape)} for the config. Fix config.json, or check that the weight files belong to it (their tensors do not have this architecture's shapes)."
            )


def _refuse_or_warn(message: str, advice: str, strict: bool) -> None:
    """A checkpoint that does not load as saved: our error with `advice` when `strict`, else a warning."""
    if strict:
        raise CheckpointError(f"{message} {advice}")
    warnings.warn(message, CheckpointWarning, stacklevel=5)
