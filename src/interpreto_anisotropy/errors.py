# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Errors (`AnisotropyError` and its subclasses) and warning categories (`AnisotropyWarning` ...) of ours.

There is one error class per way a caller would handle it, and one warning category per kind a user would filter;
the message names the option, file or checkpoint and what to do. Each error also derives from the built-in
exception it refines, so code catching `ValueError` or `OSError` keeps working; docs/api/errors.md says how to
filter the warnings and where information goes instead (the logger). The 0.1 names (`EmptyInputError`,
`TruncationWarning`, ...) still import from here, with a `FutureWarning` naming the class that replaced them.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> try:
    ...     ia.Subspace.random(4, 8)
    ... except ia.errors.InvalidInputError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError))
    InvalidInputError True
"""

from __future__ import annotations

import warnings

__all__ = [
    "AnisotropyError",
    "InvalidInputError",
    "NonFiniteError",
    "OutOfOrderError",
    "CheckpointError",
    "ResultsStoreError",
    "SweepLockedError",
    "AnisotropyWarning",
    "ReadingWarning",
    "DegenerateStatisticsWarning",
    "CheckpointWarning",
    "ResultsFileWarning",
    "LiveProbeWarning",
    "EnvironmentWarning",
]

# each class of 0.2, with the 0.1 names it replaced
_REPLACED: dict[str, str] = {
    "InvalidInputError": (
        "EmptyInputError DimensionMismatchError ObjectiveError SplitPointError TokenizerError "
        "ConfigMismatchError TangentMismatchError"
    ),
    "OutOfOrderError": "NotFittedError TrainingProbeError",
    "ResultsStoreError": "StaleResultsError SavedTangentError",
    "ReadingWarning": "ShortSequencesWarning SkippedBatchesWarning TruncationWarning PadTokenWarning LeftPaddingWarning",
    "DegenerateStatisticsWarning": "DroppedAtomsWarning",
    "CheckpointWarning": (
        "SkippedFoldersWarning SkippedCheckpointWarning UnusedWeightsWarning RandomWeightsWarning "
        "NonFiniteWeightsWarning"
    ),
    "ResultsFileWarning": "IncompleteRowWarning AlteredFileWarning MissingDriftWarning",
    "LiveProbeWarning": "LiveResumeWarning EmptyWindowWarning PendingRowsWarning LossScaleWarning",
    "EnvironmentWarning": "HubAccessWarning CacheWarning",
}
#: {0.1 name: the class that replaced it}: each still imports from this module, with a `FutureWarning`.
FORMER_NAMES: dict[str, str] = {old: new for new, olds in _REPLACED.items() for old in olds.split()}


def __getattr__(name: str) -> type:
    """A 0.1 name: the class that replaced it, with a `FutureWarning` that names that class."""
    if name not in FORMER_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = FORMER_NAMES[name]
    warnings.warn(f"{__name__}.{name} is now {__name__}.{new}: use that name", FutureWarning, stacklevel=2)
    return globals()[new]


class AnisotropyError(Exception):
    """Base class of every error of ours: catch it to handle any user mistake the package reports.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> try:
        ...     ia.controls.p_value(0.5, [])
        ... except ia.AnisotropyError as error:
        ...     print(error)
        A p-value needs at least one control statistic.
    """


class InvalidInputError(AnisotropyError, ValueError):
    """An argument, its data or a results directory's settings do not fit: fix the call.

    A wrong type, shape, range or value; no texts, tokens or activations where some are needed; two objects that
    disagree on the width d; a training objective that does not fit the model; a split point the model lacks or
    whose output is not a hidden state; a tokenizer that cannot be used as it is; a saved tangent loaded onto
    another split point or width; a results directory written with another configuration. The message names the
    option (or the file) and what to give instead.
    """


class NonFiniteError(AnisotropyError, FloatingPointError):
    """Activations or gradients contain NaN or infinity."""


class OutOfOrderError(AnisotropyError, RuntimeError):
    """An object was used out of order: an estimator before `fit`, a live `TrainingProbe` attached twice, detached
    when not attached, or stepped when detached. The message says what to call first."""


class CheckpointError(AnisotropyError, OSError):
    """A checkpoint cannot be found, listed, downloaded or loaded (the message names it); a sweep given
    `skip_bad_checkpoints` records it as skipped and goes on."""


class ResultsStoreError(AnisotropyError, OSError):
    """A file the package wrote or reads back cannot be used: a sweep's or a live probe's results directory
    (unreadable, inconsistent, holding results without their settings, or rows of a checkpoint whose content has
    changed since), a saved subspace, or a saved tangent (`TangentExplainer.from_pretrained`: not found, damaged or
    foreign). The message names the file and what to do (often: rerun with overwrite=True)."""


class SweepLockedError(ResultsStoreError):
    """Another sweep is writing the same results directory (the message names its process and host): retry when it
    has finished."""


class AnisotropyWarning(UserWarning):
    """Base class of every warning of ours: filter it to silence (or refuse) them all.

    Examples:
        >>> import warnings
        >>> import interpreto_anisotropy as ia
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error", ia.errors.AnisotropyWarning)  # any warning of ours now raises
        ...     try:
        ...         warnings.warn("texts were cut", ia.errors.ReadingWarning)
        ...     except ia.errors.AnisotropyWarning as caught:
        ...         print(type(caught).__name__)
        ReadingWarning
    """


class ReadingWarning(AnisotropyWarning):
    """Texts or activations were not read quite as given: texts longer than `max_length` truncated (said once per
    read), sequences too short for the objective skipped, batches with a non-finite loss or gradients dropped
    (`on_nonfinite="skip"`, their texts with them), a tokenizer's eos token used as its pad token (padding is masked
    out of every loss and row), or activations of a left-padding tokenizer for a model with learned absolute
    positions (they may sit at shifted positions)."""


class DegenerateStatisticsWarning(AnisotropyWarning):
    """A statistic rests on too little data to be trusted (a tangent's rows span fewer than `nb_concepts`
    dimensions, a dictionary's dead or dependent atoms were dropped, a probe's interval rests on fewer than 20
    sequences, or k / d >= 0.1 makes the normal-control p-values anti-conservative); the message says what to add."""


class CheckpointWarning(AnisotropyWarning):
    """A checkpoint was read with a caveat: folders without a step left out of a glob, a bad checkpoint skipped
    (`skip_bad_checkpoints`; a later run retries it), weights the model does not use, or, with `strict=False`,
    missing, mismatched or non-finite weights (the missing ones are random)."""


class ResultsFileWarning(AnisotropyWarning):
    """A results file is incomplete or altered: a rows file's unterminated last line (left out when read, removed
    when a live run resumes), a tangent or top-tokens file whose bytes are not those the sweep wrote (fitted again,
    with its rows), or a previous checkpoint's tangent missing (yet), so that a row's drift from it is None."""


class LiveProbeWarning(AnisotropyWarning):
    """A live probe's caveat: a resumed run lost the activations pooled for its next fit, a window saw no training
    forward (it has no row), windows awaiting a tangent outgrew `max_pending_bytes` (their rows have no bootstrap
    interval), or the gradients scale as the other `reduction` says (said once per attach)."""


class EnvironmentWarning(AnisotropyWarning):
    """The Hub or a cache on disk failed where it is not needed now (a repository's revisions not listed, each
    being checked when loaded; a cache not written or cleaned): nothing computed is affected."""
