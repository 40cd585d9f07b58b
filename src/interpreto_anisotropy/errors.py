# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Errors (`AnisotropyError` and its subclasses) and warning categories (`AnisotropyWarning` ...) of ours.

Each error also derives from the built-in exception it refines, so code catching `ValueError` keeps working;
docs/api/errors.md says how to filter the warnings and where information goes instead (the logger).

Examples:
    >>> import interpreto_anisotropy as ia
    >>> try:
    ...     ia.Subspace.random(4, 8)
    ... except ia.errors.InvalidInputError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError))
    InvalidInputError True
"""

from __future__ import annotations

__all__ = [
    "AnisotropyError",
    "InvalidInputError",
    "EmptyInputError",
    "DimensionMismatchError",
    "NotFittedError",
    "SplitPointError",
    "TokenizerError",
    "NonFiniteError",
    "ObjectiveError",
    "ConfigMismatchError",
    "CheckpointError",
    "ResultsStoreError",
    "SweepLockedError",
    "StaleResultsError",
    "TrainingProbeError",
    "SavedTangentError",
    "TangentMismatchError",
    "AnisotropyWarning",
    "DegenerateStatisticsWarning",
    "ShortSequencesWarning",
    "SkippedBatchesWarning",
    "TruncationWarning",
    "PadTokenWarning",
    "DroppedAtomsWarning",
    "LeftPaddingWarning",
    "SkippedFoldersWarning",
    "SkippedCheckpointWarning",
    "UnusedWeightsWarning",
    "RandomWeightsWarning",
    "NonFiniteWeightsWarning",
    "HubAccessWarning",
    "CacheWarning",
    "IncompleteRowWarning",
    "MissingDriftWarning",
    "AlteredFileWarning",
    "LiveResumeWarning",
    "EmptyWindowWarning",
    "PendingRowsWarning",
    "LossScaleWarning",
]


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
    """An argument has a wrong type, shape, range or value."""


class EmptyInputError(InvalidInputError):
    """No texts, no tokens, or no activations were given where some are needed."""


class DimensionMismatchError(InvalidInputError):
    """Two objects disagree on the hidden size d (e.g. a checkpoint and a subspace)."""


class NotFittedError(AnisotropyError, RuntimeError):
    """An estimator was used before `fit`."""


class ObjectiveError(InvalidInputError):
    """A training objective does not fit the model: no logits, logits of another shape, or another head."""


class SplitPointError(AnisotropyError, ValueError):
    """A split point is absent from a model, or its output is not a hidden state."""


class TokenizerError(AnisotropyError, ValueError):
    """A tokenizer cannot be used as it is (no pad token, no mask token, ...)."""


class NonFiniteError(AnisotropyError, FloatingPointError):
    """Activations or gradients contain NaN or infinity."""


class ConfigMismatchError(AnisotropyError, ValueError):
    """A results directory was written with another configuration."""


class CheckpointError(AnisotropyError, OSError):
    """A checkpoint cannot be found, listed or loaded."""


class ResultsStoreError(AnisotropyError, OSError):
    """A sweep's results directory is unreadable, inconsistent, or holds results without their settings."""


class SweepLockedError(ResultsStoreError):
    """Another sweep is writing the same results directory (the message names its process and host)."""


class StaleResultsError(ResultsStoreError):
    """Results computed on a checkpoint whose content has changed since (the message names the checkpoints)."""


class TrainingProbeError(AnisotropyError, RuntimeError):
    """A live `TrainingProbe` used out of order: attached twice, detached when not attached, stepped when detached."""


class SavedTangentError(AnisotropyError, OSError):
    """A saved tangent (`TangentExplainer.from_pretrained`) cannot be found, or its folder is damaged or foreign."""


class TangentMismatchError(InvalidInputError):
    """A saved tangent is loaded onto another split point or width d than the one it was fitted at."""


class AnisotropyWarning(UserWarning):
    """Base class of every warning of ours: filter it to silence (or refuse) them all.

    Examples:
        >>> import warnings
        >>> import interpreto_anisotropy as ia
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error", ia.errors.AnisotropyWarning)  # any warning of ours now raises
        ...     try:
        ...         warnings.warn("texts were cut", ia.errors.TruncationWarning)
        ...     except ia.errors.AnisotropyWarning as caught:
        ...         print(type(caught).__name__)
        TruncationWarning
    """


class DegenerateStatisticsWarning(AnisotropyWarning):
    """A statistic rests on too little data to be trusted (a tangent's rows span fewer than `nb_concepts`
    dimensions, a probe's interval rests on fewer than 20 sequences, or k / d >= 0.1 makes the normal-control
    p-values anti-conservative); the message says what to add."""


class ShortSequencesWarning(AnisotropyWarning):
    """Probe sequences shorter than the objective needs (a causal LM needs two tokens) were skipped."""


class SkippedBatchesWarning(AnisotropyWarning):
    """Probe batches with a non-finite loss or gradients were dropped (`on_nonfinite="skip"`), their texts with them;
    the message says how many."""


class TruncationWarning(AnisotropyWarning):
    """Texts longer than `max_length` tokens were truncated: their later tokens are not read (said once per read)."""


class PadTokenWarning(AnisotropyWarning):
    """A tokenizer without a pad token was given its eos token as one (padding is masked out of every loss and row)."""


class DroppedAtomsWarning(AnisotropyWarning):
    """A dictionary's dead or nearly dependent atoms were dropped: the subspace has a lower rank than asked."""


class LeftPaddingWarning(AnisotropyWarning):
    """Activations (not texts) given for a model with learned absolute positions whose tokenizer pads on the left,
    as Interpreto 0.5.2's `get_activations` leaves it: they may sit at shifted positions."""


class SkippedFoldersWarning(AnisotropyWarning):
    """Folders matching a checkpoint glob whose names carry no step were left out."""


class SkippedCheckpointWarning(AnisotropyWarning):
    """A bad checkpoint was recorded as skipped (`skip_bad_checkpoints`); a later run retries it."""


class UnusedWeightsWarning(AnisotropyWarning):
    """A checkpoint holds weights the model does not use (nothing is random)."""


class RandomWeightsWarning(AnisotropyWarning):
    """A checkpoint was loaded with `strict=False` although some of the model's weights are missing or mismatched
    (or its config names more layers than its weights hold): those are random."""


class NonFiniteWeightsWarning(AnisotropyWarning):
    """A checkpoint with NaN or infinite weights was loaded with `strict=False`."""


class HubAccessWarning(AnisotropyWarning):
    """The Hub could not be asked something it is not needed for now (a repository's revisions; each is checked
    when it is loaded)."""


class CacheWarning(AnisotropyWarning):
    """A cache could not be written or cleaned (the demo corpus's, a sweep's evictions from the Hub cache);
    nothing computed is affected."""


class IncompleteRowWarning(AnisotropyWarning):
    """A rows file's last line was unterminated (a live probe appending it, or stopped while writing it): it is
    left out when read, removed when a live run resumes."""


class MissingDriftWarning(AnisotropyWarning):
    """A row's drift from the previous checkpoint is None: that checkpoint's tangent is missing (yet)."""


class AlteredFileWarning(AnisotropyWarning):
    """A tangent or top-tokens file of a sweep's results directory does not hold the bytes the sweep wrote there
    (provenance.jsonl records their sha256): it is fitted again, with the rows it belongs to."""


class LiveResumeWarning(AnisotropyWarning):
    """A resumed live probe lost the activations the stopped run had pooled for its next tangent fit."""


class EmptyWindowWarning(AnisotropyWarning):
    """A live probe's window saw no training forward: it has no row."""


class PendingRowsWarning(AnisotropyWarning):
    """Windows awaiting a live tangent outgrew `max_pending_bytes`: they keep their moments only, and their rows
    will have no bootstrap interval."""


class LossScaleWarning(AnisotropyWarning):
    """The gradients a live probe captures scale as the other `reduction` says (a mean loss declared "sum", or a
    summed one declared "mean"), so that a window weighs its micro-batches' tokens unevenly (said once per attach)."""
