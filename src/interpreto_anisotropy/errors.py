# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Errors raised by interpreto-anisotropy.

Every user mistake surfaces as a subclass of `AnisotropyError` whose message says what to do,
never as a bare traceback from deep inside torch or transformers. Each error also derives from the built-in
exception it refines (`ValueError`, `RuntimeError`, `OSError`, `FloatingPointError`), so code that already
catches those keeps working. Statistics computed from too little data to be trusted are warned about with
`DegenerateStatisticsWarning`, a `UserWarning`.

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
    "DegenerateStatisticsWarning",
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


class DegenerateStatisticsWarning(UserWarning):
    """A statistic was computed from too little data to be trusted; the message says what to add.

    Warned when a tangent's rows span fewer than `nb_concepts` dimensions (its extra directions are arbitrary),
    when a probe's interval of the energy share rests on fewer than 20 sequences (its measured coverage falls short
    of its level there), and when a tangent's k / d is large enough (>= 0.1) for the normal-control p-values to be
    known anti-conservative. To refuse such results instead,
    turn it into an error: `warnings.simplefilter("error", DegenerateStatisticsWarning)`.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> issubclass(ia.errors.DegenerateStatisticsWarning, UserWarning)
        True
    """
