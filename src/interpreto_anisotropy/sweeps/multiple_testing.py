# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Multiple-testing control over a sweep's rows: Holm's and Benjamini-Hochberg's adjusted p-values.

Examples:
    >>> holm([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.06, 0.06]
    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.04, 0.04]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd
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

    @property
    def columns(self) -> tuple[str, ...]:
        """The row fields whose values name a row's family (none: one family)."""
        return {
            Family.SPLIT_POINT_AND_TANGENT: ("split_point", "tangent"),
            Family.SPLIT_POINT: ("split_point",),
            Family.TANGENT: ("tangent",),
            Family.ALL: (),
        }[self]

    def key(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        """The family a row belongs to."""
        return tuple(str(row.get(name)) for name in self.columns)


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
    rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
    *,
    column: str,
    correction: Correction | str,
    family: Family | str,
) -> list[float | None]:
    """Adjusted p-values of some rows, family by family (a pandas groupby over the family's columns).

    Args:
        rows: Sweep rows, or their DataFrame (`SweepResult.to_frame`).
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
    frame = rows.reset_index(drop=True) if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if column not in frame:
        return [None] * len(frame)
    p = frame[column].map(_finite_or_nan).astype(np.float64).dropna()
    cells = [frame[name] if name in frame else pd.Series(None, index=frame.index) for name in family.columns]
    members = [cell.loc[p.index].map(_family_name) for cell in cells] or [np.zeros(len(p))]
    adjusted = p.groupby(members, sort=False).transform(method) if len(p) else p
    values: list[float | None] = [None] * len(frame)
    for index, value in adjusted.items():
        values[index] = float(value)
    return values


def _finite_or_nan(value: Any) -> float:
    """A p-value cell as a float: NaN for what holds no finite number (None, text, NaN, inf)."""
    return float(value) if isinstance(value, (int, float)) and np.isfinite(value) else np.nan


def _family_name(value: Any) -> str:
    """A family column's cell as `Family.key` names it (a missing cell reads "None", as `row.get` gives)."""
    return "None" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _enum(kind: type[Enum], value: Any, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member.value) for member in kind)
        raise InvalidInputError(f"{name} must be one of {choices}, got {value!r}.") from None
