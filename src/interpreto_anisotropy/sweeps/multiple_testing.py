# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Multiple-testing control over a sweep's rows: Holm's and Benjamini-Hochberg's adjusted p-values.

A sweep tests one hypothesis per (checkpoint, split point, tangent kind): "the gradients hold no more energy in the
tangent than in a random subspace". Read one at a time, some of many rows fall below 0.05 by chance alone. Adjusted
p-values are compared with the level directly:

* Holm (step-down Bonferroni) controls the family-wise error rate, the chance of any false rejection, under any
  dependence between the tests;
* Benjamini-Hochberg controls the false discovery rate, the expected share of false rejections among the
  rejections, for independent or positively dependent tests (rows of one sweep share texts, so this is an
  assumption).

The family, the set of rows adjusted together, is the user's choice (`Family`): the rows of one split point and
tangent kind (a curve of the figure, the default), of one split point, of one tangent kind, or all rows.

Examples:
    >>> holm([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.06, 0.06]
    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.04, 0.04]
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

import numpy as np
from scipy.stats import false_discovery_control

from ..errors import InvalidInputError

__all__ = ["Correction", "Family", "adjust", "benjamini_hochberg", "holm"]


class Correction(str, Enum):
    """How p-values of a family of rows are adjusted.

    Attributes:
        HOLM: Holm's step-down method (family-wise error rate, any dependence).
        BENJAMINI_HOCHBERG: Benjamini-Hochberg (false discovery rate, independent or positively dependent tests).

    Examples:
        >>> Correction("bh") is Correction.BENJAMINI_HOCHBERG
        True
    """

    HOLM = "holm"
    BENJAMINI_HOCHBERG = "bh"


class Family(str, Enum):
    """Which rows of a sweep are adjusted together.

    Attributes:
        SPLIT_POINT_AND_TANGENT: The rows of one split point and tangent kind (one curve over training).
        SPLIT_POINT: The rows of one split point (every tangent kind).
        TANGENT: The rows of one tangent kind (every split point).
        ALL: Every row of the sweep.

    Examples:
        >>> Family("all") is Family.ALL
        True
    """

    SPLIT_POINT_AND_TANGENT = "split_point_and_tangent"
    SPLIT_POINT = "split_point"
    TANGENT = "tangent"
    ALL = "all"

    def key(self, row: dict[str, Any]) -> tuple[str, ...]:
        """The family a row belongs to."""
        return {
            Family.SPLIT_POINT_AND_TANGENT: (str(row.get("split_point")), str(row.get("tangent"))),
            Family.SPLIT_POINT: (str(row.get("split_point")),),
            Family.TANGENT: (str(row.get("tangent")),),
            Family.ALL: (),
        }[self]


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's adjusted p-values: the i-th smallest is max over j <= i of min(1, (m - j + 1) p_(j)).

    Args:
        p_values: m p-values in [0, 1].

    Returns:
        (m,) adjusted p-values, in the order given.
    """
    p = _checked(p_values)
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg's adjusted p-values (`scipy.stats.false_discovery_control`, method "bh").

    Args:
        p_values: m p-values in [0, 1].

    Returns:
        (m,) adjusted p-values, in the order given.
    """
    p = _checked(p_values)
    return false_discovery_control(p, method="bh") if p.size else p


def _checked(p_values: Sequence[float]) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if not np.all((p >= 0) & (p <= 1)):
        raise InvalidInputError(f"p-values must lie in [0, 1] (and not be NaN), got {p[~((p >= 0) & (p <= 1))][:5]}.")
    return p


def adjust(
    rows: Sequence[dict[str, Any]], *, column: str, correction: Correction | str, family: Family | str
) -> list[float | None]:
    """Adjusted p-values of some rows, family by family.

    Args:
        rows: Sweep rows.
        column: The p-value field to adjust ("p_value", "p_value_exact", ...).
        correction: `Correction` or its value.
        family: `Family` or its value.

    Returns:
        One adjusted p-value per row, in row order; None where the row has no p-value in `column` (rows without
        one are left out of their family).

    Raises:
        InvalidInputError: An unknown correction or family.
    """
    correction, family = _enum(Correction, correction, "correction"), _enum(Family, family, "family")
    method = holm if correction is Correction.HOLM else benjamini_hochberg
    adjusted: list[float | None] = [None] * len(rows)
    families: dict[tuple[str, ...], list[int]] = {}
    for index, row in enumerate(rows):
        value = row.get(column)
        if isinstance(value, (int, float)) and np.isfinite(value):
            families.setdefault(family.key(row), []).append(index)
    for indices in families.values():
        for index, value in zip(indices, method([rows[i][column] for i in indices]), strict=True):
            adjusted[index] = float(value)
    return adjusted


def _enum(kind: type[Enum], value: Any, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member.value) for member in kind)
        raise InvalidInputError(f"{name} must be one of {choices}, got {value!r}.") from None
