# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's options, declared once: `SweepConfig`."""

# No `from __future__ import annotations`: the fields' types are objects the command line and the checks read.
import dataclasses
import difflib
import hashlib
import importlib
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ForwardRef, Literal

from ..commons.options import (
    FRACTION,
    LEVEL,
    NONNEGATIVE_INT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    SEED,
    UNIT_INTERVAL,
    Bound,
    check_device,
)
from ..errors import InvalidInputError

__all__ = [
    "FORMAT_VERSION",
    "KINDS_OF",
    "EarlyCentering",
    "Parallelism",
    "ReferenceKind",
    "SweepConfig",
    "SweepPlan",
    "describe_type",
    "early_checkpoints",
    "option_flag",
    "options_markdown",
    "type_members",
]

#: The rows' format (4: each row draws its controls and random subspaces from its own seed, `draw_seed`).
FORMAT_VERSION = 4

#: IsoScore*'s default shrinkage (`metrics.isotropy.DEFAULT_ZETA`; a test keeps them equal).
DEFAULT_ZETA = 0.2
#: Seconds a Hub request waits by default (`commons.hub.DEFAULT_HUB_TIMEOUT`; a test keeps them equal).
DEFAULT_HUB_TIMEOUT = 10.0


class ReferenceKind(str, Enum):
    """Which tangent each checkpoint is probed with.

    Attributes:
        EARLY: One tangent fitted on the early checkpoints, reused everywhere (the paper's protocol).
        EACH: A tangent refitted on every checkpoint.
        BOTH: Both, side by side (two rows per checkpoint and split point).

    Examples:
        >>> ReferenceKind("both") is ReferenceKind.BOTH
        True
    """

    EARLY = "early"
    EACH = "each"
    BOTH = "both"


class Parallelism(str, Enum):
    """How a sweep under torchrun shares its work among the ranks.

    Attributes:
        DATA: Each checkpoint's probe and reference-fit texts are sharded over the ranks; the sums are all-reduced.
        CHECKPOINTS: Each rank takes whole checkpoints in turn.

    Examples:
        >>> Parallelism("checkpoints") is Parallelism.CHECKPOINTS
        True
    """

    DATA = "data"
    CHECKPOINTS = "checkpoints"


class EarlyCentering(str, Enum):
    """How the early checkpoints' activations are centred before the reference tangent is fitted on them.

    Attributes:
        POOLED: Once, on the mean of all the pooled rows (the paper's reading).
        PER_CHECKPOINT: Each checkpoint's rows on their own mean (the drift of the mean is left out of the tangent).

    Examples:
        >>> EarlyCentering("per_checkpoint") is EarlyCentering.PER_CHECKPOINT
        True
    """

    POOLED = "pooled"
    PER_CHECKPOINT = "per_checkpoint"


# The choices as the enums spell them (theirs import torch, this module must not; a test keeps them equal).
Objective = Literal["auto", "causal_lm", "masked_lm"]
Method = Literal["pca", "pca_sklearn", "semi_nmf", "nmf", "ica", "svd", "topk_sae"]
Reference = Literal[tuple(kind.value for kind in ReferenceKind)]
Centering = Literal[tuple(kind.value for kind in EarlyCentering)]
IsoScoreConvention = Literal["complement", "ambient"]
IsoScoreTarget = Literal["scaled_identity", "identity", "pooled"]
Automodel = Literal["causal_lm", "masked_lm"]
Call = Literal["first", "last"]
Parallel = Literal[tuple(kind.value for kind in Parallelism)]
Autocast = Literal["bf16", "fp16", "bfloat16", "float16"]
DeviceMap = Literal["auto", "balanced", "balanced_low_0", "sequential"]
Family = Literal["split_point_and_tangent", "split_point", "tangent", "all"]
Correction = Literal["holm", "bh"]


def option(
    default: Any = MISSING, *, doc: str, unit: str = "", bound: Bound | None = None, flag: str = "", advice: str = ""
) -> Any:
    """A field of `SweepConfig`: default, help, unit, a number's bound, the command line's flag, its error's advice."""
    metadata = {"doc": doc, "unit": unit, "bound": bound, "flag": flag, "advice": advice}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """The options of a `CheckpointSweep`, checked once; `config.json` records those that determine the results.

    Pass one to `CheckpointSweep`, or its options as keyword arguments (docs/options.md lists them).

    Raises:
        InvalidInputError: An option of the wrong type, outside its range, NaN or infinite, a bool where a number
            is expected, or two options that contradict each other; the message names the option.

    Examples:
        >>> SweepConfig(split_point=[1, "gpt_neox.layers.3"], results_dir="out", reference="both").reference
        'both'
    """

    split_point: int | str | tuple[int | str, ...] = option(
        doc="Layer index or module path, or a list of them (one row per checkpoint and split point)."
    )
    objective: Objective | ForwardRef("MaskedLM") | Callable[..., Any] = option(
        "auto",
        doc="\"auto\" (from each checkpoint's head and config; a preset's own masking, such as ModernCamemBERT's "
        '30 %, when its `CheckpointList` knows it), "causal_lm", "masked_lm", an `ia.objectives.MaskedLM(rate=...)`, or a '
        "callable `fn(output, batch) -> loss`.",
    )
    method: Method | type = option(
        "pca", doc="Interpreto concept method that fits the tangent (a name, or an Interpreto explainer class)."
    )
    method_kwargs: dict | None = option(
        None, doc="Options of the tangent method (passed to `TangentExplainer`); on the command line, a JSON object."
    )
    nb_concepts: int = option(16, doc="Rank k of the tangent.", unit="directions", bound=POSITIVE_INT)
    reference: Reference | ForwardRef("Subspace") | dict[Any, ForwardRef("Subspace")] = option(
        "early",
        doc='Tangent(s) probed: "early" (one reference fitted on the early checkpoints, the paper\'s protocol), '
        '"each" (refitted on every checkpoint), "both", or a `Subspace` (one split point) / a dict split point -> '
        "`Subspace` given by the user.",
    )
    early_fraction: float = option(
        0.3,
        doc="Checkpoints with step <= early_fraction x total_steps pool their activations for the reference tangent.",
        unit="fraction of training",
        bound=FRACTION,
    )
    total_steps: int | None = option(
        None,
        doc="The training run's length (presets such as `ia.checkpoints.pythia` know it); None: the last swept "
        "checkpoint's step.",
        unit="training steps",
        bound=POSITIVE_INT,
    )
    early_without_init: bool = option(False, doc="Leave step 0 (the random initialisation) out of the early window.")
    early_centering: Centering = option(
        "pooled",
        doc='"pooled" (the pooled rows are centred once, on their mean) or "per_checkpoint" (each early '
        "checkpoint's rows on their own mean, so the drift of the mean is not a direction of the reference); see "
        "docs/concepts.md.",
    )
    n_controls: int = option(
        20,
        doc="Matched-rank normal controls R per tangent (the paper's comparison and its `p_value`).",
        unit="subspaces",
        bound=POSITIVE_INT,
    )
    n_random: int | None = option(
        None,
        doc="Uniformly random k-subspaces R' of R^d for the exact `p_value_exact` and `anisotropy_p_value_exact`. "
        "None: enough for the smallest attainable p-value to pass the correction over the declared `family`, the "
        "smallest R' >= `n_controls` with 1 / (R' + 1) < `level` / m for the m rows of the family's largest member "
        "in the results directory (320 for a curve of 16 checkpoints; 960 for `family='all'` over 3 split points "
        "x 16 checkpoints); an explicit value that cannot pass is warned about. Each row draws its own, from its "
        "own seed.",
        unit="subspaces",
        bound=POSITIVE_INT,
    )
    family: Family = option(
        "split_point_and_tangent",
        doc="The rows whose exact p-values are adjusted together, in the finding, the report, the figures and the "
        'command line: "split_point_and_tangent" (each curve over training), "split_point" (every tangent kind of '
        'a split point), "tangent" (every split point of a tangent kind) or "all" (every row). The default `n_random` '
        "is sized on it.",
    )
    correction: Correction = option(
        "holm",
        doc='How p-values are adjusted within the family: "holm" (family-wise error rate) or "bh" '
        "(Benjamini-Hochberg, false discovery rate).",
    )
    level: float = option(
        0.05,
        doc="The significance level a row's adjusted exact p-value is compared with (filled markers, the finding's "
        "counts); the default `n_random` is sized on it.",
        unit="probability",
        bound=LEVEL,
    )
    isoscore_convention: IsoScoreConvention = option(
        "complement",
        doc='Where Delta IsoScore* is computed: "complement" (in the (d - k)-dimensional complement) or "ambient" '
        "(the projected cloud kept in R^d); see docs/statistics.md.",
    )
    isoscore_zeta: float = option(DEFAULT_ZETA, doc="IsoScore* shrinkage.", bound=UNIT_INTERVAL)
    isoscore_c0: IsoScoreTarget = option(
        "scaled_identity",
        doc='IsoScore*\'s shrinkage target: "scaled_identity", "identity" or "pooled" (the probe\'s own gradient '
        "covariance).",
        advice="A sweep records its config, so it takes a target name: pass a (d, d) matrix to GradientProbe.run.",
    )
    seed: int = option(
        0,
        doc="Seed of the bootstrap and the masked-LM mask, and the root of each row's draws: a row's controls and "
        "random subspaces come from a seed hashed from it and the row's identity (recorded as `draw_seed`).",
        bound=SEED,
    )
    max_tokens: int | None = option(
        None, doc="Cap on probed tokens per checkpoint (None: every token).", unit="tokens", bound=POSITIVE_INT
    )
    max_fit_tokens: int | None = option(
        20_000,
        doc="Cap on activation rows read per checkpoint for fitting (None, `none` on the command line: every fit "
        "token; PCA streams them batch by batch, the other methods pool them in memory).",
        unit="tokens",
        bound=POSITIVE_INT,
    )
    max_metric_tokens: int = option(
        4_000,
        doc="Rows used for the isotropy metrics, frequency correlation and entropy.",
        unit="tokens",
        bound=POSITIVE_INT,
    )
    results_dir: Path = option(
        doc="Where config.json, rows.jsonl, provenance.jsonl, the reference and per-checkpoint tangents and the top "
        "tokens of their directions go (and the command line's report/).",
        flag="--out",
    )
    device: str | None = option(
        None, doc='"cpu", "cuda", ...; None: cuda when available. With `device_map`, where the tangents are fitted.'
    )
    device_map: DeviceMap | dict | None = option(
        None,
        doc="Load each checkpoint dispatched by accelerate (`from_pretrained(device_map=...)`), for a model larger "
        'than one device: "auto", "balanced", "balanced_low_0", "sequential", or a dict module path -> device (a '
        'GPU index, "cpu" or "disk"; on the command line a JSON object). The split point is read on the device '
        "that runs it; the numbers are the undispatched model's. None: the whole model on `device`.",
    )
    max_memory: dict | None = option(
        None,
        doc='With `device_map`: the most memory each device may hold, e.g. {"0": "20GiB", "cpu": "60GiB"} (a GPU '
        'index, "cpu" or "mps" -> bytes or a size such as "20GiB"; on the command line a JSON object).',
    )
    offload_folder: Path | None = option(
        None, doc='With `device_map`: the folder where the modules it maps to "disk" are offloaded.'
    )
    batch_size: int = option(8, doc="Texts per forward and backward pass.", unit="sequences", bound=POSITIVE_INT)
    automodel: Automodel | type | None = option(
        None, doc='Model class or "causal_lm" / "masked_lm"; None: inferred from each checkpoint\'s config.'
    )
    tokenizer_source: str | None = option(
        None,
        doc="Where to load the tokenizer from when a checkpoint has none (a folder or a Hub model id); None: each "
        "checkpoint's own.",
        flag="--tokenizer",
    )
    call: Call | int | None = option(
        None,
        doc="For a split-point module that runs several times in one forward (ALBERT's shared layer): which call "
        'to read and probe, "first", "last" or an index (0, 1, ... from the first, -1, ... from the last). None: '
        "the module must run once.",
    )
    overwrite: bool = option(False, doc="Start afresh when `results_dir` holds a sweep with other settings.")
    progress: bool = option(True, doc="Show progress bars.")
    parallel: Parallel = option(
        "data",
        doc='Under `torchrun`: "data" shards each checkpoint\'s probe and reference-fit texts over the ranks and '
        'all-reduces the sums; "checkpoints" gives each rank whole checkpoints in turn. Without a process group: '
        "ignored.",
    )
    autocast_dtype: Autocast | ForwardRef("torch.dtype") | None = option(
        None,
        doc='"bf16" or "fp16" (or the torch dtype): run the forward and backward passes under `torch.autocast` (a '
        "GPU fast path); moments and energies still accumulate in float32 / float64.",
        flag="--autocast",
    )
    include_special: bool = option(
        False, doc="Keep special tokens (BOS, CLS, SEP, ...) as rows of the fits, the metrics and the probe."
    )
    recompute_changed: bool = option(
        False,
        doc="When a checkpoint's content changed since its rows were written, drop its rows (all rows, when an "
        "early checkpoint of the reference changed) and recompute them; otherwise the run stops with "
        "`ResultsStoreError`.",
    )
    skip_bad_checkpoints: bool = option(
        False,
        doc="Record a checkpoint that cannot be loaded (`CheckpointError`) or gives non-finite activations or "
        "gradients (`NonFiniteError`) as skipped, and go on (a later run retries it); otherwise the run stops.",
    )
    prefetch: int = option(
        2,
        doc="Hub checkpoints downloaded ahead, in the background, while the current one is computed (0: each when "
        "its turn comes). Local folders are not prefetched.",
        unit="checkpoints",
        bound=NONNEGATIVE_INT,
    )
    max_concurrent_downloads: int = option(
        1, doc="Hub checkpoints downloaded at once.", unit="checkpoints", bound=POSITIVE_INT
    )
    max_cache_gb: float | None = option(
        None,
        doc="Disk budget for the Hub revisions this sweep downloads: each is evicted from the Hugging Face cache "
        "once its rows are written (revisions cached before never are), and downloads ahead wait while it is full. "
        "None: nothing is evicted. Not under torchrun.",
        unit="GB (1e9 bytes)",
        bound=POSITIVE_NUMBER,
    )
    hub_timeout: float = option(
        DEFAULT_HUB_TIMEOUT,
        doc="How long each Hub request (refs, metadata, downloads) may wait to connect or for its next bytes before "
        "the checkpoint fails with `CheckpointError` (a long download goes on while bytes flow).",
        unit="seconds",
        bound=dataclasses.replace(
            POSITIVE_NUMBER,
            expected="a positive number of seconds (the wait for the Hub to connect or send its next bytes)",
        ),
    )

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            object.__setattr__(self, spec.name, _checked(spec, getattr(self, spec.name)))
        if self.early_centering == "per_checkpoint" and self.method == "nmf":
            raise InvalidInputError(
                "early_centering='per_checkpoint' centres the early rows, and method='nmf' needs them non-negative: "
                "use early_centering='pooled' with NMF."
            )
        if not isinstance(self.reference, str):
            _check_given_reference(self.reference, self.split_point)
        _check_placement(self)
        if repeated := sorted({repr(point) for point in self.split_point if self.split_point.count(point) > 1}):
            raise InvalidInputError(
                f"split_point names {', '.join(repeated)} more than once: give each split point once."
            )
        if self.device is not None:
            check_device("device", self.device)

    @classmethod
    def make(cls, base: "SweepConfig | None" = None, **options: Any) -> "SweepConfig":
        """A checked config from keyword options (an unknown name refused with the closest ones), or `base` changed."""
        if base is not None and not isinstance(base, SweepConfig):
            raise InvalidInputError(f"config must be a SweepConfig, got {type(base).__name__}.")
        for name in [name for name in options if name not in _FIELDS]:
            close = difflib.get_close_matches(name, _FIELDS, n=3)
            hint = f" Did you mean {' or '.join(close)}?" if close else " See SweepConfig for the options."
            raise InvalidInputError(f"{name!r} is not an option of a sweep.{hint}")
        if base is not None:
            return dataclasses.replace(base, **options) if options else base
        if missing := [name for name, spec in _FIELDS.items() if spec.default is MISSING and name not in options]:
            raise InvalidInputError(f"A sweep needs {' and '.join(f'{name}=' for name in missing)}.")
        return cls(**options)

    def to_dict(self) -> dict[str, Any]:
        """The options as given (objects such as a `Subspace` included), by name."""
        return {name: getattr(self, name) for name in _FIELDS}


# ------------------------------------------------------------------------------------------------ checking a field
def type_members(spec: dataclasses.Field) -> tuple[Any, ...]:
    """The members of a field's type: a union's, or the type itself."""
    return (
        typing.get_args(spec.type) if typing.get_origin(spec.type) in (typing.Union, types.UnionType) else (spec.type,)
    )


def _checked(spec: dataclasses.Field, value: Any) -> Any:
    """`value` normalised (str enum -> value, path -> `Path`, split points -> tuple), else our error."""
    bound = spec.metadata["bound"]
    if isinstance(value, (str, os.PathLike)) and "\x00" in str(os.fspath(value)):
        raise InvalidInputError(f"{spec.name} must not hold a NUL byte ('\\x00'), got {_shown(value)}.")
    members = sorted(type_members(spec), key=lambda member: typing.get_origin(member) is not tuple)  # a list first
    for taken, normalised in (_takes(member, value, bound) for member in members):
        if taken:
            return normalised
    if bound is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        bound.check(spec.name, value)  # a number out of range: the bound's own words
    advice = f" {spec.metadata['advice']}" if spec.metadata["advice"] else ""
    raise InvalidInputError(f"{spec.name} must be {describe_type(spec)}, got {_shown(value)}.{advice}")


def _shown(value: Any) -> str:
    """A value as an error shows it: its repr, or its type (and shape) when the repr is long or spans lines."""
    if "\n" not in (text := repr(value)) and len(text) <= 80:
        return text
    shape = getattr(value, "shape", None)
    return f"a {type(value).__name__}" + (f" of shape {tuple(shape)}" if shape is not None else "")


def _takes(member: Any, value: Any, bound: Bound | None) -> tuple[bool, Any]:
    """(whether `member` takes `value`, the value normalised)."""
    origin = typing.get_origin(member) or member
    if origin is Literal:
        matches = [choice for choice in typing.get_args(member) if isinstance(value, str) and choice == value]
        return bool(matches), (matches or [value])[0]
    if member in (int, float):
        return (Bound(member, "", lambda _: True) if bound is None else bound).holds(value), value
    if member in (str, Path):
        taken = isinstance(value, (str, os.PathLike)) and bool(os.fspath(value))
        return taken, member(os.fspath(value)) if taken else value
    if origin is tuple:  # split points: one, or a list of them
        points = tuple(value) if isinstance(value, (list, tuple)) else (value,)
        valid = all(isinstance(point, (int, str)) and not isinstance(point, bool) and point != "" for point in points)
        return bool(points) and valid, points
    if member in _OBJECTS:
        return _OBJECTS[member](value), value
    return isinstance(value, origin), value  # None, bool, type, a dict (its values checked with the other options)


def _is_a(module: str, name: str) -> Callable[[Any], bool]:
    """Whether a value is a `module.name`, imported only when asked (it imports torch, which such a user has)."""
    return lambda value: isinstance(value, getattr(importlib.import_module(module, __package__), name))


# The checks of the objects a field's type names (a dtype by its text, without importing torch).
_OBJECTS: dict[Any, Callable[[Any], bool]] = {
    Callable[..., Any]: lambda value: callable(value) and not isinstance(value, (str, type)),
    ForwardRef("MaskedLM"): _is_a("..probing.masking", "MaskedLM"),
    ForwardRef("Subspace"): _is_a("..tangents.subspace", "Subspace"),
    ForwardRef("torch.dtype"): lambda value: type(value).__module__ == "torch" and str(value) in _AUTOCAST_DTYPES,
}
_AUTOCAST_DTYPES = ("torch.bfloat16", "torch.float16")


def _check_given_reference(reference: Any, split_points: tuple[int | str, ...]) -> None:
    """A given reference: a `Subspace` for the one split point, or a dict mapping every split point to one."""
    from ..tangents.controls import check_control_room
    from ..tangents.subspace import Subspace

    if isinstance(reference, Subspace):
        if len(split_points) != 1:
            raise InvalidInputError("With several split points, give reference as a dict split point -> Subspace.")
        reference = {split_points[0]: reference}
    missing = [point for point in split_points if point not in reference]
    if missing or not all(isinstance(value, Subspace) for value in reference.values()):
        raise InvalidInputError(f"reference must map every split point to a Subspace; missing {missing}.")
    for subspace in reference.values():  # before any checkpoint is read
        check_control_room(subspace.rank, subspace.dim, option="the given reference's rank k")


#: The devices accelerate places modules on, by name (a GPU is also named by its index).
_DEVICE_NAME = re.compile(r"(cpu|disk|mps|cuda|xpu|npu|mlu|musa|hpu)(:[0-9]+)?")


def _device_key(option_name: str, key: Any, value: Any) -> Any:
    """A device of `device_map` (a value) or `max_memory` (a key): a GPU index (also as a string) or a device name."""
    if isinstance(key, str) and (key.isdigit() or _DEVICE_NAME.fullmatch(key)):
        return int(key) if key.isdigit() else key
    if isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        return key
    raise InvalidInputError(
        f'{option_name} names device {key!r} (for {value!r}): a device is a GPU index such as 0, "cpu", "disk" '
        '(device_map only) or a name such as "cuda:1" or "mps".'
    )


def _check_placement(config: "SweepConfig") -> None:
    """`device_map` and `max_memory` with accelerate's devices; `max_memory`/`offload_folder` need a `device_map`."""
    if config.device_map is None:
        if given := [name for name in ("max_memory", "offload_folder") if getattr(config, name) is not None]:
            raise InvalidInputError(
                f"{' and '.join(given)}: only for a model dispatched by accelerate. Give device_map "
                '(e.g. device_map="auto") as well, or leave them out.'
            )
        return
    if isinstance(config.device_map, dict):
        if paths := [path for path in config.device_map if not isinstance(path, str)]:
            raise InvalidInputError(
                f"device_map's keys are module paths such as 'gpt_neox.layers.3', got {paths[0]!r}."
            )
        placed = {path: _device_key("device_map", device, path) for path, device in config.device_map.items()}
        object.__setattr__(config, "device_map", placed)
    if config.max_memory is not None:
        sizes = {_device_key("max_memory", device, size): size for device, size in config.max_memory.items()}
        for device, size in sizes.items():
            if not (isinstance(size, str) and size) and not (type(size) is int and size > 0):
                raise InvalidInputError(
                    f'max_memory[{device!r}] must be a number of bytes or a size such as "20GiB", got {size!r}.'
                )
        object.__setattr__(config, "max_memory", sizes)


# ------------------------------------------------------------------------------------------------ describing a field
def describe_type(spec: dataclasses.Field) -> str:
    """What a field takes, in words ("a positive integer or None", "'early', 'each' or 'both', a Subspace or a dict")."""
    bound, words = spec.metadata["bound"], []
    for member in type_members(spec):
        if typing.get_origin(member) is Literal:
            words += [repr(choice) for choice in typing.get_args(member)]
        elif member in (int, float):
            words.append(bound.expected if bound else {int: "an integer", float: "a finite number"}[member])
        else:
            words.append(_MEMBER_WORDS.get(member) or _MEMBER_WORDS[typing.get_origin(member)])
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


_MEMBER_WORDS: dict[Any, str] = {
    type(None): "None",
    bool: "True or False",
    str: "a string",
    Path: "a folder path",
    dict: "a dict",
    type: "a class",
    tuple: "a list of them",
    Callable: "a callable",
    ForwardRef("MaskedLM"): "an ia.objectives.MaskedLM",
    ForwardRef("Subspace"): "a Subspace",
    dict[Any, ForwardRef("Subspace")]: "a dict split point -> Subspace",
    ForwardRef("torch.dtype"): "a torch dtype (bfloat16, float16)",
}


def option_flag(spec: dataclasses.Field) -> str:
    """A field's flag: its own (`--out`), `--no-NAME` for an option on by default, else `--NAME` with dashes."""
    if spec.metadata["flag"]:
        return spec.metadata["flag"]
    dashed = spec.name.replace("_", "-")
    return f"--no-{dashed}" if spec.default is True else f"--{dashed}"


def options_markdown() -> str:
    """The docs' page of the sweep's options (docs/options.md), made from `SweepConfig`'s fields."""
    lines = [
        "# Options of a sweep",
        "",
        "<!-- Generated from interpreto_anisotropy/sweeps/config.py: edit SweepConfig there, then run",
        "     python -m interpreto_anisotropy.sweeps.config > docs/options.md -->",
        "",
        "Every option of `CheckpointSweep` is a field of `ia.SweepConfig` and a flag of `interpreto-anisotropy "
        "sweep`. Pass them as keyword arguments (`ia.CheckpointSweep(checkpoints, split_point=1, texts=texts, "
        "results_dir=...)`) or as a config (`ia.CheckpointSweep(checkpoints, ia.SweepConfig(...), texts=texts)`). "
        "The checkpoints and the texts are data, not options: see [Command line](api/cli.md) for their flags.",
        "",
        "| option | flag | takes | default | unit | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for spec in dataclasses.fields(SweepConfig):
        default = "required" if spec.default is MISSING else f"`{spec.default!r}`"
        cells = [f"`{spec.name}`", f"`{option_flag(spec)}`", describe_type(spec), default, spec.metadata["unit"]]
        lines.append("| " + " | ".join([*cells, spec.metadata["doc"]]).replace("\n", " ") + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ resolving a config
def early_checkpoints(
    checkpoints: Sequence[Any], fraction: float, *, total_steps: int | None = None, without_init: bool = False
) -> list[Any]:
    """The checkpoints in the first `fraction` of training; at least the first one."""
    candidates = [c for c in checkpoints if not (without_init and c.step == 0)] or list(checkpoints)
    length = max(checkpoint.step for checkpoint in checkpoints) if total_steps is None else total_steps
    early = [checkpoint for checkpoint in candidates if checkpoint.step <= fraction * length]
    return early or [min(candidates, key=lambda checkpoint: checkpoint.step)]


def _split_texts(texts: Sequence[str], probe_texts: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(fit texts, probe texts), blank texts dropped; without `probe_texts`, even texts fit and odd texts probe."""
    kept = []
    for name, given in (("texts", texts), ("probe_texts", probe_texts)):
        if isinstance(given, str):
            raise InvalidInputError(
                f"{name} must be a list of texts, not a single string (it would be split into characters)."
            )
        kept.append([t for t in given if isinstance(t, str) and t.strip()] if given is not None else [])
    fit, probe = (kept[0][0::2], kept[0][1::2]) if probe_texts is None else kept
    if not fit or not probe:
        raise InvalidInputError(
            "The sweep needs non-empty fit and probe texts (give at least 2 non-blank texts, or probe_texts)."
        )
    return fit, probe


def _sorted_checkpoints(checkpoints: Any) -> list[Any]:
    """The checkpoints sorted by step, a glob listed, the same one given twice kept once; two of one step refused."""
    from . import checkpoints as listing

    if isinstance(checkpoints, (str, os.PathLike)):
        checkpoints = listing.local(checkpoints)
    kinds = "checkpoints must be ia.checkpoints.Checkpoint objects or a glob of checkpoint folders"
    if not isinstance(checkpoints, Iterable):
        raise InvalidInputError(f"{kinds}, got {type(checkpoints).__name__}.")
    if not (ordered := sorted(checkpoints)):
        raise InvalidInputError("No checkpoints to sweep: pass a non-empty list (e.g. ia.checkpoints.local(...)).")
    if not all(isinstance(checkpoint, listing.Checkpoint) for checkpoint in ordered):
        raise InvalidInputError(f"{kinds}.")
    ordered = [c for i, c in enumerate(ordered) if i == 0 or c != ordered[i - 1]]
    listing._check_unique_steps(ordered, InvalidInputError)
    return ordered


def _sha(items: Sequence[str]) -> str:
    return hashlib.sha256(b"".join(item.encode("utf-8", "surrogatepass") + b"\0" for item in items)).hexdigest()[:16]


class SweepPlan:
    """A `SweepConfig` resolved once, at the sweep's door, against its checkpoints and texts, for the runner."""

    def __init__(self, options: SweepConfig, checkpoints: Any, *, texts: Sequence[str], probe_texts=None):
        import torch

        from ..probing.anisotropy import IsoScoreSettings
        from ..probing.objectives import MaskedLM
        from ..reading.batching import autocast_dtype
        from ..tangents.explainers import check_method_kwargs, method_streams

        self.options = options
        self.autocast_dtype = autocast_dtype(options.autocast_dtype)
        self.checkpoints = _sorted_checkpoints(checkpoints)
        masking = getattr(checkpoints, "objective", None)  # a preset's CheckpointList knows its masking and length
        given_masking = options.objective == "auto" and isinstance(masking, MaskedLM) and masking != MaskedLM()
        self.objective = masking if given_masking else options.objective
        self.layers: list[int | str] = list(options.split_point)
        self.fit_texts, self.probe_texts = _split_texts(texts, probe_texts)
        given = options.reference
        self.given_reference = (
            None if isinstance(given, str) else dict(given) if isinstance(given, dict) else {self.layers[0]: given}
        )
        self.reference = "given" if self.given_reference else given
        self.tangent_kinds = list(KINDS_OF[self.reference])
        self.total_steps = options.total_steps or getattr(checkpoints, "total_steps", None)
        if self.total_steps is not None and self.total_steps < self.checkpoints[-1].step:
            raise InvalidInputError(
                f"total_steps={self.total_steps} is before the last checkpoint (step {self.checkpoints[-1].step}): "
                "give the training run's length, or None to take the last checkpoint's step."
            )
        window = {"total_steps": self.total_steps, "without_init": options.early_without_init}
        self.early = early_checkpoints(self.checkpoints, options.early_fraction, **window)
        self.early_centering = EarlyCentering(options.early_centering)
        self.isoscore = IsoScoreSettings.make(
            convention=options.isoscore_convention, zeta=options.isoscore_zeta, c0=options.isoscore_c0
        )
        self.device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.method_kwargs = dict(options.method_kwargs or {})
        check_method_kwargs(options.method, self.method_kwargs)
        self.streams = method_streams(options.method)

    def record(self) -> dict[str, Any]:
        """The settings that determine the results (what a resume must match), JSON-ready."""
        from ..probing.objectives import describe_objective

        options = self.options
        given = {
            str(layer): _sha([str(subspace.basis.double().sum().item()), str(subspace.basis.shape)])
            for layer, subspace in (self.given_reference or {}).items()
        } or None
        record = {
            "format_version": FORMAT_VERSION,
            "checkpoints": [checkpoint.to_dict() for checkpoint in self.checkpoints],
            "split_points": [layer if isinstance(layer, int) else str(layer) for layer in self.layers],
            "n_fit_texts": len(self.fit_texts),
            "n_probe_texts": len(self.probe_texts),
            "fit_texts_sha": _sha(self.fit_texts),
            "probe_texts_sha": _sha(self.probe_texts),
            "objective": describe_objective(self.objective),
            "method": options.method if isinstance(options.method, str) else getattr(options.method, "__name__", "?"),
            "method_kwargs": {key: repr(value) for key, value in sorted(self.method_kwargs.items())},
            "nb_concepts": options.nb_concepts,
            "reference": self.reference,
            "given_reference": given,
            "early_fraction": options.early_fraction,
            "early_steps": [checkpoint.step for checkpoint in self.early],
            **{key: getattr(options, key) for key in _ALWAYS_RECORDED},
        }
        resolved = {
            "isoscore_convention": self.isoscore.convention.value,
            "isoscore_zeta": self.isoscore.zeta,
            "isoscore_c0": self.isoscore.target_name,
            "total_steps": self.total_steps,
            "autocast_dtype": None if self.autocast_dtype is None else str(self.autocast_dtype).removeprefix("torch."),
        }
        off_default = {key: resolved.get(key, getattr(options, key)) for key in _RECORDED_OFF_DEFAULT}
        return record | {key: value for key, value in off_default.items() if value != _FIELDS[key].default}


#: The tangent kinds of each recorded `reference` (config.json's: a `ReferenceKind`, or "given").
KINDS_OF = {"early": ("early",), "each": ("each",), "both": ("early", "each"), "given": ("given",)}
_ALWAYS_RECORDED = ("n_controls", "seed", "max_tokens", "max_fit_tokens", "max_metric_tokens", "batch_size")
_ALWAYS_RECORDED += ("include_special",)
# Options added after sweeps were first written: recorded when off their default (older results still resume).
_RECORDED_OFF_DEFAULT = ("n_random", "isoscore_convention", "isoscore_zeta", "isoscore_c0", "family", "correction")
_RECORDED_OFF_DEFAULT += ("level", "total_steps", "early_without_init", "early_centering", "autocast_dtype", "call")
_RECORDED_OFF_DEFAULT += ("tokenizer_source",)
_FIELDS = {spec.name: spec for spec in dataclasses.fields(SweepConfig)}

# The class docstring's ``Attributes:``, one entry per field, from the fields' help.
_ATTRIBUTES = [
    f"        {spec.name}: {spec.metadata['doc']}"
    + (f" Unit: {spec.metadata['unit']}." if spec.metadata["unit"] else "")
    for spec in _FIELDS.values()
]
SweepConfig.__doc__ = SweepConfig.__doc__.replace(
    "\n    Raises:", "\n    Attributes:\n" + "\n".join(_ATTRIBUTES) + "\n\n    Raises:", 1
)

if __name__ == "__main__":  # pragma: no cover
    print(options_markdown(), end="")
