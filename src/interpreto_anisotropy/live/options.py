# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's settings: its tangent (`LiveTangent`) and every other option (`LiveConfig`), checked once."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, get_args, get_type_hints

from ..commons.options import check_bool, check_number, check_positive_int, check_seed, config_of
from ..errors import DegenerateStatisticsWarning, InvalidInputError
from ..reading.split_point import check_call
from ..results.verdict import HOLM_LEVEL, default_n_random, floor_passes, warn_if_cannot_pass

__all__ = ["LiveConfig", "LiveTangent", "MAX_LIVE_N_RANDOM", "MAX_PENDING_BYTES", "ROW_SOURCE", "window_n_random"]

#: The ``source`` of every row the live probe writes (a sweep's rows name their checkpoints' source).
ROW_SOURCE = "live"

#: Default bound on the memory of windows awaiting a tangent (their float64 G^T G, and gradient rows): 1 GiB.
MAX_PENDING_BYTES = 2**30

#: The most random subspaces R' a window draws when `n_random` is None: enough for Holm over 500 windows; scoring
#: them takes about 24 s a window and split point at d=768 on one CPU thread (`_SECONDS` each).
MAX_LIVE_N_RANDOM = 10_000

#: Seconds to score one random subspace at d=768, k=32, on one CPU thread (docs/performance.md: 2.2-2.5 s per 1000).
_SECONDS = 2.4e-3


class LiveTangent(str, Enum):
    """Which tangent a `TrainingProbe` scores each window against (windows before a fit are scored retrospectively).

    Attributes:
        EARLY: A streamed PCA of the first steps' activations (`early_steps`, or `early_fraction` of `total_steps`).
        GIVEN: A `Subspace` (or fitted `TangentExplainer`) given by the user, fixed.
        REFIT: A streamed PCA refitted every `refit_every` steps on the activations since the last fit.

    Examples:
        >>> [kind.value for kind in LiveTangent]
        ['early', 'given', 'refit']
    """

    EARLY = "early"
    GIVEN = "given"
    REFIT = "refit"


@dataclass(frozen=True, kw_only=True)
class LiveConfig:
    """The settings of a `TrainingProbe` (and of an `AnisotropyCallback`), checked once when it is made; the same
    names given as keyword arguments (`TrainingProbe(model, ..., every=10)`) override those of `config=`.
    docs/how-to/live-probe.md says what each does in full.

    Attributes:
        nb_concepts: Rank k of a fitted ("early", "refit") tangent.
        every: Optimizer steps per window (one row per split point per window).
        early_steps: "early": the optimizer steps whose activations fit the tangent (None: `early_fraction` x
            `total_steps`).
        early_fraction: "early": the share of `total_steps` used when `early_steps` is None, in (0, 1].
        total_steps: The run's length in optimizer steps (for `early_fraction` and `n_random`); None: unknown.
        refit_every: "refit": optimizer steps between fits, a multiple of `every`.
        n_controls: Matched-rank normal controls per tangent (seeded as in `GradientProbe.run`).
        n_random: Random k-subspaces R' per window for `p_value_exact`; None: enough for Holm at 0.05 over a split
            point's windows (`window_n_random`), or `n_controls` when `total_steps` is unknown.
        seed: Seed of the controls and of the bootstrap, in [0, 2**32).
        n_bootstrap: Bootstrap resamples of sequences per window.
        confidence: Level of the bootstrap interval, in (0, 1).
        objective: "auto" (from the model's head), "causal_lm", "masked_lm" or "sequence_classification".
        reduction: "sum", or "mean" over a micro-batch's loss terms (Hugging Face models' `loss`; undone).
        loss_scale: A constant (> 0) the differentiated loss was multiplied by (e.g. 1 / accumulation steps); undone.
        on_nonfinite: "raise" or "skip" a micro-batch with non-finite dL/dh (always skipped with a gradient scaler).
        include_special: Special tokens are gradient rows too.
        call: Which call of a split-point module run several times per forward to read: "first", "last" or an
            index, as for `GradientProbe(..., call=...)`; None: the module must run once per forward.
        max_pending_bytes: Bound in bytes on the windows awaiting a tangent, all split points together: their
            float64 moments (d^2 x 8 bytes a window; beyond, consecutive windows merge), then their gradient rows
            (beyond, no bootstrap interval, with a warning).
        flush_seconds: Append the closed windows' rows to rows.jsonl at most this often, in seconds (always when
            detaching; 0: at every window).

    Raises:
        InvalidInputError: An option of the wrong type, out of its range, or not finite, naming it.

    Examples:
        >>> LiveConfig(every=10, early_steps=100, call="last").call
        'last'
        >>> LiveConfig(flush_seconds=-1)
        Traceback (most recent call last):
        ...
        interpreto_anisotropy.errors.InvalidInputError: flush_seconds must be a finite number >= 0, got -1.
    """

    nb_concepts: int = 16
    every: int = 1
    early_steps: int | None = None
    early_fraction: float = 0.3
    total_steps: int | None = None
    refit_every: int | None = None
    n_controls: int = 20
    n_random: int | None = None
    seed: int = 0
    n_bootstrap: int = 1000
    confidence: float = 0.95
    objective: Literal["auto", "causal_lm", "masked_lm", "sequence_classification"] = "auto"
    reduction: Literal["sum", "mean"] = "sum"
    loss_scale: float = 1.0
    on_nonfinite: Literal["raise", "skip"] = "raise"
    include_special: bool = False
    call: Literal["first", "last"] | int | None = None
    max_pending_bytes: int = MAX_PENDING_BYTES
    flush_seconds: float = 10.0

    def __post_init__(self) -> None:
        for name in ("nb_concepts", "every", "n_controls", "n_bootstrap", "max_pending_bytes"):
            check_positive_int(name, getattr(self, name))
        for name in ("early_steps", "total_steps", "refit_every", "n_random"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_number("early_fraction", self.early_fraction, above=0, at_most=1)
        check_seed("seed", self.seed)
        check_number("confidence", self.confidence, above=0, below=1)
        check_number("loss_scale", self.loss_scale, above=0)
        check_number("flush_seconds", self.flush_seconds, at_least=0)
        check_bool("include_special", self.include_special)
        check_call(self.call)
        hints = get_type_hints(LiveConfig)
        for name in ("objective", "reduction", "on_nonfinite"):
            choices = get_args(hints[name])
            if not isinstance(value := getattr(self, name), str) or value not in choices:
                raise InvalidInputError(f"{name} must be one of {list(choices)}, got {value!r}.")

    @classmethod
    def of(cls, config: LiveConfig | None, options: Mapping[str, Any]) -> LiveConfig:
        """`config` (default settings if None) with `options` (field name -> value) in place of its fields."""
        return config_of(cls, config, options, owner="live probe")


def window_n_random(settings: LiveConfig) -> int:
    """R' of every window: `n_random`, else the least that lets Holm pass over a split point's windows (capped)."""
    windows = None if settings.total_steps is None else math.ceil(settings.total_steps / settings.every)
    if settings.n_random is not None:
        if windows is not None:
            warn_if_cannot_pass(settings.n_random, windows)
        return settings.n_random
    if windows is None:
        return settings.n_controls
    needed = default_n_random(windows, n_controls=settings.n_controls)
    if needed <= MAX_LIVE_N_RANDOM:
        return needed
    n_random = max(MAX_LIVE_N_RANDOM, settings.n_controls)
    resolved = math.ceil((n_random + 1) * HOLM_LEVEL) - 1  # the most windows Holm can pass over with R'
    while not floor_passes(n_random, resolved):
        resolved -= 1
    warnings.warn(
        f"Holm at {HOLM_LEVEL} over the {windows} windows of a split point (total_steps={settings.total_steps}, every={settings.every}) needs R' = {needed} random subspaces a window (about {needed * _SECONDS:.0f} s a window at d=768, k=32, on one CPU thread); each window draws {n_random} (about {n_random * _SECONDS:.0f} s), enough for Holm over {resolved} windows, so no p_value_exact_holm of this run can reach {HOLM_LEVEL}. Use every={math.ceil(settings.total_steps / resolved)} or more for a verdict over the whole run, or give n_random explicitly.",
        DegenerateStatisticsWarning,
        stacklevel=3,
    )
    return n_random
