# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's reference draws: a seed of their own for every row, and enough random subspaces for Holm to pass.

Examples:
    >>> default_n_random(16, n_controls=20)
    320
    >>> 1 / (320 + 1) < 0.05 / 16
    True
    >>> default_n_random(family_size("all", checkpoints=16, split_points=3, kinds=1), n_controls=20)
    960
    >>> row_seed(0, step=100, split_point="gpt_neox.layers.1", kind="early") < 2**32
    True
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings

from ..commons.options import MAX_SEED
from ..errors import DegenerateStatisticsWarning

__all__ = ["HOLM_LEVEL", "default_n_random", "family_size", "floor_passes", "row_seed", "warn_if_cannot_pass"]

#: The level at which a sweep's default number of random subspaces lets Holm's correction pass.
HOLM_LEVEL = 0.05


def row_seed(seed: int, *, step: int, split_point: str, kind: str) -> int:
    """The seed of one row's controls and random subspaces, in [0, 2**32).

    Args:
        seed: The sweep's seed.
        step: The checkpoint's training step.
        split_point: The split point's module path.
        kind: The tangent kind ("early", "each" or "given").

    Returns:
        The first 4 bytes of the SHA-256 of these, as an integer (the same in every process and Python run).
    """
    identity = json.dumps([int(seed), int(step), str(split_point), str(kind)])
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % MAX_SEED


def family_size(family: str, *, checkpoints: int, split_points: int, kinds: int) -> int:
    """m, the rows of the largest family a sweep's verdict adjusts together (`multiple_testing.Family`).

    Args:
        family: "split_point_and_tangent" (a curve: one row per checkpoint), "split_point" (every tangent kind),
            "tangent" (every split point) or "all".
        checkpoints: The checkpoints of the results directory.
        split_points: Its split points.
        kinds: Its tangent kinds per split point (2 for reference "both").

    Returns:
        checkpoints, times the split points and tangent kinds the family spans.
    """
    spans = {
        "split_point_and_tangent": 1,
        "split_point": kinds,
        "tangent": split_points,
        "all": split_points * kinds,
    }
    return checkpoints * spans[family]


def floor_passes(n_random: int, family_size: int, level: float = HOLM_LEVEL) -> bool:
    """Whether the floor 1 / (R' + 1) of `p_value_exact` lies below level / m, so Holm over m rows can pass."""
    return (n_random + 1) * level > family_size


def default_n_random(family_size: int, *, n_controls: int, level: float = HOLM_LEVEL) -> int:
    """The smallest R' >= n_controls whose floor 1 / (R' + 1) lies below level / m.

    Args:
        family_size: m, the rows of the largest family (`family_size`; of the default family: the checkpoints).
        n_controls: R; R' is never below it (both p-values keep at least the same resolution).
        level: The family-wise level alpha.

    Returns:
        R' = max(R, floor(m / alpha)), checked against `floor_passes` (float rounding included).
    """
    n_random = max(n_controls, math.floor(family_size / level))
    while not floor_passes(n_random, family_size, level):
        n_random += 1
    return n_random


def warn_if_cannot_pass(n_random: int, family_size: int, level: float = HOLM_LEVEL) -> None:
    """Warn (`DegenerateStatisticsWarning`) when an explicit R' cannot let Holm pass over m rows at `level`."""
    if floor_passes(n_random, family_size, level):
        return
    warnings.warn(
        f"n_random={n_random}: the smallest p_value_exact is 1/{n_random + 1} = {1 / (n_random + 1):.4g}, not below "
        f"alpha/m = {level}/{family_size} = {level / family_size:.4g} for the {family_size} rows of the family, so "
        f"p_value_exact_holm can never reach {level}. Leave n_random unset (None) or give "
        f"n_random={default_n_random(family_size, n_controls=1, level=level)} or more.",
        DegenerateStatisticsWarning,
        stacklevel=3,
    )
