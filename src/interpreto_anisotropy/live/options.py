# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The choices of the live probe: which tangent it scores, and how the user's loss weighs the micro-batches.

Examples:
    >>> LiveTangent("early") is LiveTangent.EARLY
    True
"""

from __future__ import annotations

from enum import Enum

__all__ = ["LiveTangent", "ROW_SOURCE"]

#: The ``source`` of every row the live probe writes (a sweep's rows name their checkpoints' source).
ROW_SOURCE = "live"


class LiveTangent(str, Enum):
    """Which tangent a `TrainingProbe` scores each window against.

    Attributes:
        EARLY: A streamed PCA of the activations of the first training steps (`early_steps`, or `early_fraction` of
            `total_steps`), then fixed: the paper's protocol done live. Windows that close before it exists are
            scored retrospectively, from their stored gradient moments.
        GIVEN: A `Subspace` (or fitted `TangentExplainer`) given by the user, fixed.
        REFIT: A streamed PCA refitted every `refit_every` steps on the activations of the steps since the last fit;
            the windows before the first fit are scored retrospectively with it.

    Examples:
        >>> [kind.value for kind in LiveTangent]
        ['early', 'given', 'refit']
    """

    EARLY = "early"
    GIVEN = "given"
    REFIT = "refit"
