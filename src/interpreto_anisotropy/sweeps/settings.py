# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's settings: its `SweepConfig` with the values resolved from its data, and the config a resume must match."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any

import torch

from ..commons.options import check_positive_int
from ..errors import EmptyInputError, InvalidInputError
from ..metrics.isotropy import DEFAULT_ZETA
from ..probing.anisotropy import IsoScoreConvention, IsoScoreSettings, IsoScoreTarget
from ..probing.objectives import MaskedLM, describe_objective
from ..reading.batching import autocast_dtype as autocast_dtype_from
from ..tangents.explainers import check_method_kwargs, method_streams
from ..tangents.subspace import Subspace
from . import checkpoints as checkpoint_tools
from .checkpoints import Checkpoint
from .config import SweepConfig
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


def _split_texts(texts: Sequence[str], probe_texts: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(fit texts, probe texts), blank texts dropped; without `probe_texts`, even texts fit and odd texts probe."""
    for name, given in (("texts", texts), ("probe_texts", probe_texts)):
        if isinstance(given, str):
            raise InvalidInputError(
                f"{name} must be a list of texts, not a single string (it would be split into characters)."
            )
    texts = [text for text in texts if isinstance(text, str) and text.strip()] if texts is not None else []
    if probe_texts is None:
        fit, probe = texts[0::2], texts[1::2]
    else:
        fit, probe = texts, [text for text in probe_texts if isinstance(text, str) and text.strip()]
    if not fit or not probe:
        raise EmptyInputError(
            "The sweep needs non-empty fit and probe texts (give at least 2 non-blank texts, or probe_texts)."
        )
    return fit, probe


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


def _device(device: str | None) -> str:
    """The device name given (checked by torch), or cuda when available, else cpu."""
    if not device:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InvalidInputError(f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}.") from None
    return device


def _sha(items: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(item.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class SweepSettings:
    """A `SweepConfig` with what a sweep resolves from it and its data: the checkpoints (sorted, a glob listed),
    the fit and probe texts, the early checkpoints, the training length and masking of a preset, the device.

    Args:
        config: The sweep's options, checked.
        checkpoints: `Checkpoint`s or a glob of local checkpoint folders.
        texts: Texts that fit the tangents (and, without `probe_texts`, every other one probes).
        probe_texts: Held-out probe texts.

    Raises:
        EmptyInputError: No checkpoints, or no texts.
        InvalidInputError: Checkpoints or texts of the wrong kind, or a `total_steps` before the last checkpoint.

    Examples:
        >>> settings = SweepSettings(SweepConfig(split_point=1, results_dir="runs/toy/sweep"),
        ...                          "runs/toy/checkpoint-*", texts=texts)  # doctest: +SKIP
        >>> settings.config()["nb_concepts"]  # doctest: +SKIP
        16
    """

    def __init__(
        self,
        config: SweepConfig,
        checkpoints: Sequence[Checkpoint] | str | os.PathLike,
        *,
        texts: Sequence[str],
        probe_texts: Sequence[str] | None = None,
    ):
        self.options = config
        self.autocast_dtype = autocast_dtype_from(config.autocast_dtype)
        if isinstance(checkpoints, (str, os.PathLike)):
            checkpoints = checkpoint_tools.local(checkpoints)
        total_steps = config.total_steps
        if total_steps is None:
            total_steps = getattr(checkpoints, "total_steps", None)  # a preset's CheckpointList knows its run
        self.objective = _preset_masking(config.objective, getattr(checkpoints, "objective", None))
        if not isinstance(checkpoints, Iterable):
            raise InvalidInputError(
                "checkpoints must be ia.checkpoints.Checkpoint objects or a glob of checkpoint folders, got "
                f"{type(checkpoints).__name__}."
            )
        self.checkpoints = sorted(checkpoints)
        if not self.checkpoints:
            raise EmptyInputError("No checkpoints to sweep: pass a non-empty list (e.g. ia.checkpoints.local(...)).")
        if not all(isinstance(checkpoint, Checkpoint) for checkpoint in self.checkpoints):
            raise InvalidInputError(
                "checkpoints must be ia.checkpoints.Checkpoint objects or a glob of checkpoint folders."
            )
        # the same checkpoint twice is one; two of one step are refused (one would be dropped without a word)
        self.checkpoints = [c for i, c in enumerate(self.checkpoints) if i == 0 or c != self.checkpoints[i - 1]]
        checkpoint_tools._check_unique_steps(self.checkpoints, InvalidInputError)
        self.layers: list[int | str] = list(config.split_point)
        self.fit_texts, self.probe_texts = _split_texts(texts, probe_texts)
        self.given_reference = self._given_reference(config.reference)
        self.reference = ReferenceKind.EARLY if self.given_reference else ReferenceKind(config.reference)
        self.total_steps = self._total_steps(total_steps)
        self.early_centering = EarlyCentering(config.early_centering)
        self.isoscore = IsoScoreSettings.make(
            convention=config.isoscore_convention, zeta=config.isoscore_zeta, c0=config.isoscore_c0
        )
        self.device = _device(config.device)
        self.method_kwargs = dict(config.method_kwargs or {})
        check_method_kwargs(config.method, self.method_kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "options":  # not set yet (while unpickling)
            raise AttributeError(name)
        return getattr(self.options, name)

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

    def _given_reference(self, reference: Any) -> dict[Any, Subspace] | None:
        """The user's reference subspaces by split point (`SweepConfig` checked them), or None."""
        if isinstance(reference, Subspace):
            return {self.layers[0]: reference}
        return dict(reference) if isinstance(reference, dict) else None

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
        for key, default in (("family", "split_point_and_tangent"), ("correction", "holm"), ("level", 0.05)):
            if getattr(self.options, key) != default:  # how the rows are judged (`extension.READING`)
                config[key] = getattr(self.options, key)
        if self.total_steps is not None:
            config["total_steps"] = self.total_steps
        if self.early_without_init:
            config["early_without_init"] = True
        if self.early_centering is not EarlyCentering.POOLED:
            config["early_centering"] = self.early_centering.value
        if self.autocast_dtype is not None:  # absent otherwise, so that float32 sweeps resume as before
            config["autocast_dtype"] = str(self.autocast_dtype).removeprefix("torch.")
        for key in ("call", "tokenizer_source"):  # which hidden state and which tokens: absent when not given
            if getattr(self.options, key) is not None:
                config[key] = getattr(self.options, key)
        return config
