# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The verdict of a sweep: what its rows found, curve by curve, in numbers and in words; the multiple-testing control
it rests on (Holm's and Benjamini-Hochberg's adjusted p-values); and the draws behind its p-values (a seed of their
own for every row, and enough random subspaces for Holm to pass).

Examples:
    >>> verdict = sweep_verdict(table.rows, table.config)  # doctest: +SKIP
    >>> print(verdict_text(verdict))  # doctest: +SKIP
    >>> holm([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.06, 0.06]
    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.04, 0.04]
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control

from ..commons.options import MAX_SEED
from ..errors import DegenerateStatisticsWarning, InvalidInputError
from ..probing.result import CAVEAT, anisotropy_p_value, change_sentence, fmt, number, sign_meaning


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
        """The row fields whose values name a row's family (none: one family), as the value names them."""
        return () if self is Family.ALL else tuple(self.value.split("_and_"))

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
    # a cell without a finite number is no p-value; a missing family cell reads "None", as `Family.key` names it
    p = frame[column].map(lambda v: float(v) if isinstance(v, (int, float)) and np.isfinite(v) else np.nan)
    p = p.astype(np.float64).dropna()
    cells = [frame[name] if name in frame else pd.Series(None, index=frame.index) for name in family.columns]
    members = [cell.loc[p.index].map(lambda v: "None" if pd.isna(v) else str(v)) for cell in cells]
    members = members or [np.zeros(len(p))]
    adjusted = (p.groupby(members, sort=False).transform(method) if len(p) else p).reindex(frame.index)
    return [None if np.isnan(value) else float(value) for value in adjusted]


def _enum(kind: type[Enum], value: Any, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member.value) for member in kind)
        raise InvalidInputError(f"{name} must be one of {choices}, got {value!r}.") from None


#: The level at which a sweep's default number of random subspaces lets Holm's correction pass.
HOLM_LEVEL = 0.05


def row_seed(seed: int, *, step: int, split_point: str, kind: str) -> int:
    """The seed of one row's controls and random subspaces: the first 4 bytes of the SHA-256 of its identity."""
    identity = json.dumps([int(seed), int(step), str(split_point), str(kind)])
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % MAX_SEED


def family_size(family: str, *, checkpoints: int, split_points: int, kinds: int) -> int:
    """m, the rows of the largest `Family` a verdict adjusts together: the checkpoints, times the split points and
    tangent kinds (per split point) the family spans."""
    sizes = {"split_point": split_points, "tangent": kinds}  # a family spans the columns that do not name it
    return checkpoints * math.prod(size for name, size in sizes.items() if name not in Family(family).columns)


def floor_passes(n_random: int, family_size: int, level: float = HOLM_LEVEL) -> bool:
    """Whether the floor 1 / (R' + 1) of `p_value_exact` lies below level / m, so Holm over m rows can pass."""
    return (n_random + 1) * level > family_size


def default_n_random(family_size: int, *, n_controls: int, level: float = HOLM_LEVEL) -> int:
    """The smallest R' >= n_controls whose floor 1 / (R' + 1) lies below level / m (`floor_passes`)."""
    n_random = max(n_controls, math.floor(family_size / level))
    while not floor_passes(n_random, family_size, level):
        n_random += 1
    return n_random


def warn_if_cannot_pass(n_random: int, family_size: int, level: float = HOLM_LEVEL) -> None:
    """Warn (`DegenerateStatisticsWarning`) when an explicit R' cannot let Holm pass over m rows at `level`."""
    if not floor_passes(n_random, family_size, level):
        warnings.warn(
            f"n_random={n_random}: the smallest p_value_exact is 1/{n_random + 1} = {1 / (n_random + 1):.4g}, not "
            f"below alpha/m = {level}/{family_size} = {level / family_size:.4g} for the {family_size} rows of the "
            f"family, so p_value_exact_holm can never reach {level}. Leave n_random unset (None) or give "
            f"n_random={default_n_random(family_size, n_controls=1, level=level)} or more.",
            DegenerateStatisticsWarning,
            stacklevel=3,
        )


_METHODS = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
_RATES = {"holm": "family-wise error rate", "bh": "false discovery rate"}
#: Each `Family` value in words, as a sentence says which rows were adjusted together.
FAMILY_NAMES = {
    "split_point_and_tangent": "within each curve (one split point and tangent kind)",
    "split_point": "within each split point (every tangent kind)",
    "tangent": "within each tangent kind (every split point)",
    "all": "over every row of the sweep",
}
#: Each `Family` value in a few words, as a figure's legend names it.
_FAMILY_SHORT = {name: words.split(" (")[0] for name, words in FAMILY_NAMES.items()} | {"all": "over all rows"}


@dataclass(frozen=True)
class CurveVerdict:
    """What one curve (split point, tangent kind) of a sweep found.

    Attributes:
        split_point: The curve's split point (module path).
        tangent: Its tangent kind ("early", "each", "given").
        n_rows: Its rows (checkpoints).
        peak_ratio, peak_step: The largest energy ratio and its step (None without a finite ratio).
        last_ratio, last_step: The energy ratio of the last checkpoint and its step.
        p_column: The p-value field tested ("p_value_exact", else "p_value").
        n_tested: Rows with a p-value in `p_column`.
        n_raw: Rows with a p-value at or below the level, before correction.
        n_significant: Rows whose adjusted p-value is at or below the level, with the verdict's correction.
        n_surviving: Rows whose adjusted p-value is at or below the level, by correction ("holm" and "bh"), over
            the verdict's family; ``n_surviving[correction]`` is `n_significant`.
        resolution: Why passing is impossible and how many draws it needs ("" when it is possible).
        anisotropy_share, anisotropy_p: The last checkpoint's anisotropy share and its p-value (None if absent).
        anisotropy_p_exact: Whether `anisotropy_p` is an exact p-value (else the approximate normal-control one).
        n_positive_anisotropy: Rows with a positive anisotropy share (of those that have one).
        n_anisotropy: Rows with an anisotropy share.
        change: What training added from the first to the last checkpoint, in words ("" without change columns).
    """

    split_point: str
    tangent: str
    n_rows: int
    peak_ratio: float | None
    peak_step: int | None
    last_ratio: float | None
    last_step: int
    p_column: str
    n_tested: int
    n_raw: int
    n_significant: int
    n_surviving: Mapping[str, int]
    resolution: str
    anisotropy_share: float | None
    anisotropy_p: float | None
    anisotropy_p_exact: bool
    n_positive_anisotropy: int
    n_anisotropy: int
    change: str = ""


@dataclass(frozen=True)
class Verdict:
    """The verdict of a sweep: one `CurveVerdict` per curve, and how significance was decided.

    Attributes:
        curves: One per (split point, tangent kind), in the rows' order.
        correction: "holm" or "bh".
        family: The `Family` value the p-values were adjusted over.
        level: The significance level.
        p_column: The p-value field tested: "p_value_exact" when the rows have it, else "p_value".
        caveat: What alignment does not show.
    """

    curves: tuple[CurveVerdict, ...]
    correction: str
    family: str
    level: float
    p_column: str = "p_value_exact"
    caveat: str = CAVEAT


def p_value_column(rows: Sequence[Mapping[str, Any]]) -> str:
    """The p-value field a verdict tests: "p_value_exact" when the rows have it, else "p_value"."""
    return "p_value_exact" if any(number(row.get("p_value_exact")) is not None for row in rows) else "p_value"


def resolution_note(tested: Sequence[Mapping[str, Any]], column: str, level: float, correction: str = "holm") -> str:
    """Why no row of the largest family can pass `level`, when the p-values' floor 1/(R + 1) forbids it ("" else).

    Args:
        tested: The rows of one family or more, each with a p-value in `column` (families are the curves).
        column: "p_value_exact" (draws: ``random_energy_shares``) or "p_value" (``control_energy_shares``).
        level: The significance level.
        correction: "holm" or "bh".

    Returns:
        A sentence starting with a space, or "".
    """
    draws = "random_energy_shares" if column == "p_value_exact" else "control_energy_shares"
    counts = [len(row[draws]) for row in tested if isinstance(row.get(draws), list) and row[draws]]
    curves = Counter((str(row.get("split_point")), str(row.get("tangent"))) for row in tested)
    if not counts or not curves:
        return ""
    holm = Correction(correction) is Correction.HOLM
    draws_per_row = min(counts)
    largest = max(curves.values()) if holm else 1
    if largest / (draws_per_row + 1) <= level:
        return ""
    needed = math.ceil(largest / level) - 1
    option = "n_random" if column == "p_value_exact" else "n_controls"
    method = f"over a curve of {largest} rows Holm" if holm else "Benjamini-Hochberg"
    return (
        f" With {draws_per_row} draws the smallest {column} is 1/{draws_per_row + 1} = {1 / (draws_per_row + 1):.3f},"
        f" so {method} cannot go below {level} whatever the margins: ask for "
        f"{option}={needed} or more to make it possible."
    )


def verdict_settings(
    config: Mapping[str, Any] | None = None,
    *,
    correction: str | None = None,
    family: str | None = None,
    level: float | None = None,
) -> tuple[str, str, float]:
    """(correction, family, level) of a verdict, checked: those given, else the config's (its ``level`` or
    ``alpha``), else Holm within each curve at 0.05."""
    config = config or {}
    correction = _enum(Correction, correction or config.get("correction") or "holm", "correction").value
    family = _enum(Family, family or config.get("family") or "split_point_and_tangent", "family").value
    level = float(level if level is not None else (config.get("level") or config.get("alpha") or 0.05))
    return correction, family, level


def adjusted_p_values(
    rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None
) -> list[float | None]:
    """The p-value each of every row of a sweep (not a selection) is judged by, significant at or below the level
    in the verdict, the figures and the tables: `p_value_column`'s, adjusted as `verdict_settings` say."""
    correction, family, _ = verdict_settings(config)
    return adjust(rows, column=p_value_column(rows), correction=correction, family=family)


def adjusted_by(rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None) -> tuple[str, float]:
    """What the verdict judges a row by ("p_value_exact adjusted by Holm within each curve (...)"), and its level."""
    correction, family, level = verdict_settings(config)
    return f"{p_value_column(rows)} adjusted by {_METHODS[correction]} {FAMILY_NAMES[family]}", level


def marker_legend(rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None) -> str:
    """What a filled marker means, as a figure's legend says it: "significant: exact p, Holm within each curve, ..."."""
    correction, family, level = verdict_settings(config)
    kind = "exact p" if p_value_column(rows) == "p_value_exact" else "approximate p (rows without an exact p)"
    return f"significant: {kind}, {_METHODS[correction]} {_FAMILY_SHORT[family]}, level {level:g}"


def sweep_verdict(
    rows: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    *,
    correction: str | None = None,
    family: str | None = None,
    level: float | None = None,
) -> Verdict:
    """The verdict of a sweep's rows, curve by curve.

    Args:
        rows: The sweep's rows (`SweepResult.rows`).
        config: Its settings; their ``correction``, ``family`` and ``level`` (or ``alpha``), when present, are the
            defaults of the arguments below.
        correction: "holm" or "bh" (default: the config's, else "holm").
        family: The rows adjusted together, a `Family` value (default: the config's, else one curve).
        level: The significance level (default: the config's, else 0.05).

    Returns:
        The `Verdict`.
    """
    correction, family, level = verdict_settings(config, correction=correction, family=family, level=level)
    column = p_value_column(rows)
    adjusted = {method.value: adjust(rows, column=column, correction=method, family=family) for method in Correction}
    groups: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault((str(row.get("split_point")), str(row.get("tangent"))), []).append(index)
    curves = []
    for (split_point, tangent), indices in groups.items():
        curve = [rows[i] for i in indices]
        ratios = [(value, int(row["step"])) for row in curve if (value := number(row.get("energy_ratio"))) is not None]
        peak = max(ratios, key=lambda item: item[0], default=(None, None))
        last, first = max(curve, key=lambda row: int(row["step"])), min(curve, key=lambda row: int(row["step"]))
        tested = [row for row in curve if number(row.get(column)) is not None]
        surviving = {
            method: sum(values[i] is not None and values[i] <= level for i in indices)
            for method, values in adjusted.items()
        }
        note = ""
        if surviving[correction] == 0:  # the rows of the curve's family, as one curve: resolution_note counts them
            members = Family(family).key
            relatives = [
                row for row in rows if members(row) == members(curve[0]) and number(row.get(column)) is not None
            ]
            note = resolution_note(
                [{**row, "split_point": "", "tangent": ""} for row in relatives], column, level, correction
            )
        shares = [value for row in curve if (value := number(row.get("anisotropy_share"))) is not None]
        p_aniso, exact = anisotropy_p_value(last)
        curves.append(
            CurveVerdict(
                split_point=split_point,
                tangent=tangent,
                n_rows=len(curve),
                peak_ratio=peak[0],
                peak_step=peak[1],
                last_ratio=number(last.get("energy_ratio")),
                last_step=int(last["step"]),
                p_column=column,
                n_tested=len(tested),
                n_raw=sum(row[column] <= level for row in tested),
                n_significant=surviving[correction],
                n_surviving=surviving,
                resolution=note.strip(),
                anisotropy_share=number(last.get("anisotropy_share")),
                anisotropy_p=p_aniso,
                anisotropy_p_exact=exact,
                n_positive_anisotropy=sum(value > 0 for value in shares),
                n_anisotropy=len(shares),
                change=change_sentence(first, last) or "",
            )
        )
    return Verdict(tuple(curves), correction, family, level, column)


def curve_sentences(curve: CurveVerdict, verdict: Verdict) -> tuple[str, ...]:
    """A curve's verdict in words: heading, ratio, significance, anisotropy, and what training added (if known)."""
    ratio = (
        f"The energy ratio (tangent share / mean normal-control share) peaks at {fmt(curve.peak_ratio)} "
        f"(step {curve.peak_step}) and is {fmt(curve.last_ratio)} at the last checkpoint (step {curve.last_step})."
        if curve.peak_ratio is not None
        else "No energy ratio was computed."
    )
    significance = (
        f"{curve.n_significant} of {curve.n_tested} checkpoints significant ({curve.p_column} adjusted by "
        f"{_METHODS[verdict.correction]}, level {verdict.level:g}; {curve.n_raw} before correction)."
        + (f" {curve.resolution}" if curve.resolution else "")
    )
    anisotropy = "No anisotropy share was computed."
    if curve.anisotropy_share is not None:
        kind = "exact" if curve.anisotropy_p_exact else "approximate: the paper's normal-control p"
        anisotropy = (
            f"Anisotropy share at step {curve.last_step}: {curve.anisotropy_share:+.3f} "
            f"(p = {fmt(curve.anisotropy_p, 3)}, {kind}), {sign_meaning(curve.anisotropy_share)}; positive at "
            f"{curve.n_positive_anisotropy} of {curve.n_anisotropy} checkpoints."
        )
    heading = f"Split point {curve.split_point}, {curve.tangent} tangent ({curve.n_rows} checkpoints):"
    return (heading, ratio, significance, anisotropy, *((curve.change,) if curve.change else ()))


def method_sentence(verdict: Verdict) -> str:
    """How significance was decided: the tested p-value, the correction, the family and the level."""
    how = f"{_METHODS[verdict.correction]} ({_RATES[verdict.correction]}) {FAMILY_NAMES[verdict.family]}"
    tested = (
        "p_value_exact (the tangent's rank among uniformly random subspaces, exact under the null)"
        if verdict.p_column == "p_value_exact"
        else "p_value (the paper's rank among normal controls, approximate: these rows have no exact p-value)"
    )
    return f"Significance: {tested} adjusted by {how}, at level {verdict.level:g}."


def verdict_text(verdict: Verdict) -> str:
    """The verdict as one plain-text block (what `SweepResult.summary()` returns and the CLI prints last): one block
    per curve, then the method and the caveat."""
    lines = ["Finding"]
    for curve in verdict.curves:
        heading, *sentences = curve_sentences(curve, verdict)
        lines += [heading, *(f"  {sentence}" for sentence in sentences)]
    return "\n".join([*lines, method_sentence(verdict), verdict.caveat])
