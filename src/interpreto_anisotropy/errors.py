# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Errors (`AnisotropyError` and its subclasses) and warning categories (`AnisotropyWarning` ...) of ours.

One error class per way a caller would handle it, one warning category per kind a user would filter; each error
also derives from the built-in exception it refines (`ValueError`, `OSError`, ...). docs/api/errors.md says when
each is raised or warned, and how to filter them. The 0.1 names (`EmptyInputError`, `TruncationWarning`, ...) still
import from here, with a `FutureWarning` naming the class that replaced them.

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
    """An argument, its data or a results directory's settings do not fit: the message says what to give instead."""


class NonFiniteError(AnisotropyError, FloatingPointError):
    """Activations or gradients contain NaN or infinity."""


class OutOfOrderError(AnisotropyError, RuntimeError):
    """An object was used out of order (an estimator before `fit`, a live probe stepped when detached, ...)."""


class CheckpointError(AnisotropyError, OSError):
    """A checkpoint cannot be found, listed, downloaded or loaded (`skip_bad_checkpoints` skips it)."""


class ResultsStoreError(AnisotropyError, OSError):
    """A results directory, saved subspace or saved tangent cannot be used: the message names the file."""


class SweepLockedError(ResultsStoreError):
    """Another sweep is writing the same results directory (the message names it): retry when it has finished."""


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
    """Texts or activations were not read quite as given (truncated, skipped, padded with eos, left-padded)."""


class DegenerateStatisticsWarning(AnisotropyWarning):
    """A statistic rests on too little data to be trusted; the message says what to add."""


class CheckpointWarning(AnisotropyWarning):
    """A checkpoint was read with a caveat (skipped, unused or missing weights, folders without a step)."""


class ResultsFileWarning(AnisotropyWarning):
    """A results file is incomplete or altered (a torn last row, bytes changed, a previous tangent missing)."""


class LiveProbeWarning(AnisotropyWarning):
    """A live probe's caveat (lost pooled activations, an empty window, pending rows dropped, a loss scale)."""


class EnvironmentWarning(AnisotropyWarning):
    """The Hub or a cache on disk failed where it is not needed now: nothing computed is affected."""


__all__ = [name for name, value in dict(globals()).items() if isinstance(value, type) and value.__module__ == __name__]
