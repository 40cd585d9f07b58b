# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's settings: validated once, with the reference rule and the config that a resume must match."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from ..commons.options import check_bool, check_nonnegative_int, check_positive_int, check_seed
from ..errors import EmptyInputError, InvalidInputError
from ..metrics.isotropy import DEFAULT_ZETA
from ..probing.anisotropy import IsoScoreConvention, IsoScoreSettings, IsoScoreTarget
from ..probing.objectives import MaskedLM, describe_objective
from ..reading.batching import autocast_dtype as autocast_dtype_from
from ..tangents.controls import check_control_room
from ..tangents.explainers import method_streams
from ..tangents.subspace import Subspace
from . import checkpoints as checkpoint_tools
from . import hub_access
from .checkpoints import Checkpoint
from .early_pool import EarlyCentering

__all__ = ["FORMAT_VERSION", "Parallelism", "ReferenceKind", "SweepSettings", "early_checkpoints"]

# 2: right-aligned batches with per-family position ids, one token policy. 3: rows with the exact p-value, z-score,
# anisotropy share, IsoScore* settings, energy by token bucket, fingerprint and drift_previous_step. 4: each row
# draws its controls and random subspaces from its own seed (draw_seed), R' by default enough for Holm (n_random).
FORMAT_VERSION = 4


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

    EARLY = "early"  # one tangent fitted on the early checkpoints, reused everywhere (the paper's protocol)
    EACH = "each"  # a tangent refitted on every checkpoint
    BOTH = "both"  # both, side by side


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


def early_checkpoints(
    checkpoints: Sequence[Checkpoint],
    fraction: float,
    *,
    total_steps: int | None = None,
    without_init: bool = False,
) -> list[Checkpoint]:
    """The checkpoints in the first `fraction` of training; at least the first one.

    Args:
        checkpoints: The sweep's checkpoints.
        fraction: Fraction of training, in (0, 1].
        total_steps: The training run's length; None: the last checkpoint's step (the run as swept).
        without_init: Leave step 0 (the random initialisation) out, when another checkpoint is there.

    Returns:
        The early checkpoints (step <= fraction x total_steps), in the given order.

    Examples:
        >>> [c.step for c in early_checkpoints([Checkpoint(s, f"/c/{s}") for s in (0, 10, 100)], 0.3)]
        [0, 10]
        >>> [c.step for c in early_checkpoints([Checkpoint(s, f"/c/{s}") for s in (0, 10, 100)], 0.3,
        ...                                    total_steps=200, without_init=True)]
        [10]
    """
    candidates = [c for c in checkpoints if not (without_init and c.step == 0)] or list(checkpoints)
    length = max(checkpoint.step for checkpoint in checkpoints) if total_steps is None else total_steps
    early = [checkpoint for checkpoint in candidates if checkpoint.step <= fraction * length]
    return early or [min(candidates, key=lambda checkpoint: checkpoint.step)]


def _preset_masking(objective: Any, preset: Any) -> Any:
    """The objective to use: a preset's own masking (e.g. ModernCamemBERT's 30 %) when the user left it to "auto"."""
    if objective == "auto" and isinstance(preset, MaskedLM) and preset != MaskedLM():
        return preset
    return objective


def _device(device: Any) -> str:
    """The device name given (checked by torch), or cuda when available, else cpu."""
    if device is None or device == "":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InvalidInputError(f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}.") from None
    return device


def _positive_or_none(name: str, value: Any) -> int | None:
    return None if value is None else check_positive_int(name, value)


def _positive_number_or_none(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise InvalidInputError(f"{name} must be a positive number (or None), got {value!r}.")
    return float(value)


def _sha(items: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(item.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class SweepSettings:
    """The settings of a `CheckpointSweep`, checked when given; see `CheckpointSweep` for each option.

    Raises:
        EmptyInputError: No checkpoints, or no texts.
        InvalidInputError: A bad option.

    Examples:
        >>> settings = SweepSettings("runs/toy/checkpoint-*", split_point=1, texts=texts,
        ...                          results_dir="runs/toy/sweep")  # doctest: +SKIP
        >>> settings.config()["nb_concepts"]  # doctest: +SKIP
        16
    """

    def __init__(
        self,
        checkpoints: Sequence[Checkpoint] | str | os.PathLike,
        *,
        split_point: int | str | Sequence[int | str],
        texts: Sequence[str],
        probe_texts: Sequence[str] | None = None,
        objective: Any = "auto",
        method: str = "pca",
        nb_concepts: int = 16,
        reference: str | Subspace | dict[Any, Subspace] = "early",
        early_fraction: float = 0.3,
        total_steps: int | None = None,
        early_without_init: bool = False,
        early_centering: str = "pooled",
        n_controls: int = 20,
        n_random: int | None = None,
        isoscore_convention: str = "complement",
        isoscore_zeta: float = DEFAULT_ZETA,
        isoscore_c0: str = "scaled_identity",
        seed: int = 0,
        max_tokens: int | None = None,
        max_fit_tokens: int | None = 20_000,
        max_metric_tokens: int = 4_000,
        results_dir: str | os.PathLike,
        device: str | None = None,
        batch_size: int = 8,
        automodel: Any = None,
        overwrite: bool = False,
        progress: bool = True,
        method_kwargs: dict[str, Any] | None = None,
        parallel: str = "data",
        autocast_dtype: str | torch.dtype | None = None,
        include_special: bool = False,
        recompute_changed: bool = False,
        skip_bad_checkpoints: bool = False,
        prefetch: int = 2,
        max_concurrent_downloads: int = 1,
        max_cache_gb: float | None = None,
        hub_timeout: float = hub_access.DEFAULT_HUB_TIMEOUT,
    ):
        self.autocast_dtype = autocast_dtype_from(autocast_dtype)
        try:
            self.parallel = Parallelism(parallel).value
        except ValueError:
            raise InvalidInputError(f"parallel must be 'data' or 'checkpoints', got {parallel!r}.") from None
        if isinstance(checkpoints, (str, os.PathLike)):
            checkpoints = checkpoint_tools.local(checkpoints)
        if total_steps is None:
            total_steps = getattr(checkpoints, "total_steps", None)  # a preset's CheckpointList knows its run
        objective = _preset_masking(objective, getattr(checkpoints, "objective", None))
        if not isinstance(checkpoints, Iterable):
            raise InvalidInputError(
                f"checkpoints must be ia.Checkpoint objects or a glob of checkpoint folders, got {type(checkpoints).__name__}."
            )
        self.checkpoints = sorted(checkpoints)
        if not self.checkpoints:
            raise EmptyInputError("No checkpoints to sweep: pass a non-empty list (e.g. ia.checkpoints.local(...)).")
        if not all(isinstance(checkpoint, Checkpoint) for checkpoint in self.checkpoints):
            raise InvalidInputError("checkpoints must be ia.Checkpoint objects or a glob of checkpoint folders.")
        layers = split_point if isinstance(split_point, (list, tuple)) else [split_point]
        if not layers:
            raise InvalidInputError("split_point must be a layer index, a module path, or a non-empty list of them.")
        for layer in layers:
            if isinstance(layer, bool) or not isinstance(layer, (int, str)) or layer == "":
                raise InvalidInputError(
                    f"split_point must be a layer index, a module path, or a non-empty list of them, got {layer!r}."
                )
        self.layers: list[int | str] = list(layers)
        for name, given in (("texts", texts), ("probe_texts", probe_texts)):
            if isinstance(given, str):
                raise InvalidInputError(
                    f"{name} must be a list of texts, not a single string (it would be split into characters)."
                )
        texts = [text for text in texts if isinstance(text, str) and text.strip()] if texts is not None else []
        if probe_texts is None:
            self.fit_texts, self.probe_texts = texts[0::2], texts[1::2]
        else:
            self.fit_texts = texts
            self.probe_texts = [text for text in probe_texts if isinstance(text, str) and text.strip()]
        if not self.fit_texts or not self.probe_texts:
            raise EmptyInputError(
                "The sweep needs non-empty fit and probe texts (give at least 2 non-blank texts, or probe_texts)."
            )
        if not 0 < early_fraction <= 1:
            raise InvalidInputError(f"early_fraction must be in (0, 1], got {early_fraction}.")
        self.given_reference = self._given_reference(reference)
        self.reference = ReferenceKind.EARLY if self.given_reference else self._reference_kind(reference)
        self.objective = objective
        method_streams(method)  # an unknown method name is our error now, not at the first fit
        self.method = method
        self.early_fraction = early_fraction
        self.total_steps = self._total_steps(total_steps)
        self.early_without_init = check_bool("early_without_init", early_without_init)
        if early_centering == "per_checkpoint" and method == "nmf":
            raise InvalidInputError(
                "early_centering='per_checkpoint' centres the early rows, and method='nmf' needs them non-negative: "
                "use early_centering='pooled' with NMF."
            )
        try:
            self.early_centering = EarlyCentering(early_centering)
        except ValueError:
            raise InvalidInputError(
                f"early_centering must be 'pooled' or 'per_checkpoint', got {early_centering!r}."
            ) from None
        self.n_controls = check_positive_int("n_controls", n_controls)
        self.n_random = None if n_random is None else check_positive_int("n_random", n_random)
        if not isinstance(isoscore_c0, str):
            raise InvalidInputError(
                "A sweep takes isoscore_c0 as 'scaled_identity', 'identity' or 'pooled' (a matrix cannot be recorded "
                "in its config); pass a (d, d) matrix to GradientProbe.run instead."
            )
        self.isoscore = IsoScoreSettings.make(convention=isoscore_convention, zeta=isoscore_zeta, c0=isoscore_c0)
        self.seed = check_seed("seed", seed)
        self.nb_concepts = check_positive_int("nb_concepts", nb_concepts)
        self.max_tokens = _positive_or_none("max_tokens", max_tokens)
        self.max_fit_tokens = _positive_or_none("max_fit_tokens", max_fit_tokens)
        self.max_metric_tokens = check_positive_int("max_metric_tokens", max_metric_tokens)
        if not isinstance(results_dir, (str, os.PathLike)):
            raise InvalidInputError(f"results_dir must be a folder path, got {type(results_dir).__name__}.")
        self.results_dir = Path(results_dir)
        self.device = _device(device)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.automodel = automodel
        self.overwrite = check_bool("overwrite", overwrite)
        self.progress = check_bool("progress", progress)
        if method_kwargs is not None and not isinstance(method_kwargs, dict):
            raise InvalidInputError(f"method_kwargs must be a dict or None, got {type(method_kwargs).__name__}.")
        self.method_kwargs = dict(method_kwargs or {})
        self.include_special = check_bool("include_special", include_special)
        self.recompute_changed = check_bool("recompute_changed", recompute_changed)
        self.skip_bad_checkpoints = check_bool("skip_bad_checkpoints", skip_bad_checkpoints)
        self.prefetch = check_nonnegative_int("prefetch", prefetch)
        self.max_concurrent_downloads = check_positive_int("max_concurrent_downloads", max_concurrent_downloads)
        self.max_cache_gb = _positive_number_or_none("max_cache_gb", max_cache_gb)
        self.hub_timeout = hub_access.check_hub_timeout(hub_timeout)

    @property
    def streams(self) -> bool:
        """Whether the tangents are fitted batch by batch (`partial_fit`); other methods pool the activations."""
        return method_streams(self.method)

    @property
    def tangent_kinds(self) -> list[str]:
        """The tangent kinds each checkpoint and split point gets a row for."""
        if self.given_reference:
            return ["given"]
        return {ReferenceKind.EARLY: ["early"], ReferenceKind.EACH: ["each"], ReferenceKind.BOTH: ["early", "each"]}[
            self.reference
        ]

    @property
    def early(self) -> list[Checkpoint]:
        """The checkpoints whose activations are pooled for the reference tangent."""
        return early_checkpoints(
            self.checkpoints, self.early_fraction, total_steps=self.total_steps, without_init=self.early_without_init
        )

    def _total_steps(self, total_steps: Any) -> int | None:
        if total_steps is None:
            return None
        last = self.checkpoints[-1].step
        if check_positive_int("total_steps", total_steps) < last:
            raise InvalidInputError(
                f"total_steps={total_steps} is before the last checkpoint (step {last}): give the training run's "
                "length, or None to take the last checkpoint's step."
            )
        return total_steps

    @staticmethod
    def _reference_kind(reference: Any) -> ReferenceKind:
        try:
            return ReferenceKind(reference)
        except ValueError:
            raise InvalidInputError(
                f"reference must be 'early', 'each', 'both', a Subspace or a dict of them, got {reference!r}."
            ) from None

    def _given_reference(self, reference: Any) -> dict[Any, Subspace] | None:
        given = None
        if isinstance(reference, Subspace):
            if len(self.layers) != 1:
                raise InvalidInputError("With several split points, give reference as a dict split point -> Subspace.")
            given = {self.layers[0]: reference}
        if isinstance(reference, dict):
            missing = [layer for layer in self.layers if layer not in reference]
            if missing or not all(isinstance(value, Subspace) for value in reference.values()):
                raise InvalidInputError(f"reference must map every split point to a Subspace; missing {missing}.")
            given = dict(reference)
        for subspace in (given or {}).values():  # before any checkpoint is read
            check_control_room(subspace.rank, subspace.dim, option="the given reference's rank k")
        return given

    def config(self) -> dict[str, Any]:
        """The settings that determine the results (what a resume must match), JSON-ready."""
        given = None
        if self.given_reference:
            given = {
                str(layer): _sha([str(subspace.basis.double().sum().item()), str(subspace.basis.shape)])
                for layer, subspace in self.given_reference.items()
            }
        config = {
            "format_version": FORMAT_VERSION,
            "checkpoints": [checkpoint.to_dict() for checkpoint in self.checkpoints],
            "split_points": [layer if isinstance(layer, int) else str(layer) for layer in self.layers],
            "n_fit_texts": len(self.fit_texts),
            "n_probe_texts": len(self.probe_texts),
            "fit_texts_sha": _sha(self.fit_texts),
            "probe_texts_sha": _sha(self.probe_texts),
            "objective": describe_objective(self.objective),
            "method": self.method if isinstance(self.method, str) else getattr(self.method, "__name__", "?"),
            "method_kwargs": {key: repr(value) for key, value in sorted(self.method_kwargs.items())},
            "nb_concepts": self.nb_concepts,
            "reference": self.reference.value if given is None else "given",
            "given_reference": given,
            "early_fraction": self.early_fraction,
            "early_steps": [checkpoint.step for checkpoint in self.early],
            "n_controls": self.n_controls,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "max_fit_tokens": self.max_fit_tokens,
            "max_metric_tokens": self.max_metric_tokens,
            "batch_size": self.batch_size,
            "include_special": self.include_special,
        }
        # Options added after sweeps were first written are recorded when they differ from the defaults, so that
        # older results directories still resume.
        if self.n_random is not None:
            config["n_random"] = self.n_random
        for key, value, default in (
            ("isoscore_convention", self.isoscore.convention.value, IsoScoreConvention.COMPLEMENT.value),
            ("isoscore_zeta", self.isoscore.zeta, DEFAULT_ZETA),
            ("isoscore_c0", self.isoscore.target_name, IsoScoreTarget.SCALED_IDENTITY.value),
        ):
            if value != default:
                config[key] = value
        if self.total_steps is not None:
            config["total_steps"] = self.total_steps
        if self.early_without_init:
            config["early_without_init"] = True
        if self.early_centering is not EarlyCentering.POOLED:
            config["early_centering"] = self.early_centering.value
        if self.autocast_dtype is not None:  # absent otherwise, so that float32 sweeps resume as before
            config["autocast_dtype"] = str(self.autocast_dtype).removeprefix("torch.")
        return config
