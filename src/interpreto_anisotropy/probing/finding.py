# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One probe's finding in words (what ``print(ProbeResult)`` opens with), and the words a sweep's verdict shares
with it (`interpreto_anisotropy.results.verdict`): the anisotropy share's p-value and sign, the caveat.

Examples:
    >>> sign_meaning(0.1).startswith("positive")
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANISOTROPY_P_EXACT_COLUMN",
    "ANISOTROPY_P_APPROXIMATE_COLUMN",
    "CAVEAT",
    "anisotropy_p_value",
    "change_sentence",
    "fmt",
    "number",
    "probe_lines",
    "sign_meaning",
]

#: The rows' exact p-value of the anisotropy share, preferred when a row has one (rows written before it existed
#: have none).
ANISOTROPY_P_EXACT_COLUMN = "anisotropy_p_value_exact"
#: The paper's normal-control rank p-value of the anisotropy share (approximate), the fallback.
ANISOTROPY_P_APPROXIMATE_COLUMN = "anisotropy_share_p_value"
#: What gradient alignment does not show (the verdict's last line).
CAVEAT = (
    "Alignment is descriptive: gradients that point along the tangent are not evidence that the tangent causes or "
    "drives learning, and energy shares measure no curvature of the activation manifold."
)


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def anisotropy_p_value(row: Mapping[str, Any]) -> tuple[float | None, bool]:
    """A row's p-value of the anisotropy share: the exact one when the row has it, else the approximate one.

    Returns:
        (p-value or None, whether it is exact).
    """
    value = number(row.get(ANISOTROPY_P_EXACT_COLUMN))
    if value is not None:
        return value, True
    return number(row.get(ANISOTROPY_P_APPROXIMATE_COLUMN)), False


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def sign_meaning(share: float) -> str:
    if share > 0:
        return "positive: removing the tangent makes the gradients more isotropic than removing a normal control"
    if share < 0:
        return (
            "negative: removing the tangent makes the gradients LESS isotropic than removing a normal control, so "
            "the tangent holds less of the gradients' anisotropy than a random normal direction does, whatever "
            "energy it holds"
        )
    return "zero: removing the tangent or a normal control changes the gradients' isotropy alike"


def _interval(fields: Mapping[str, Any]) -> str:
    low, high = number(fields.get("ci_low")), number(fields.get("ci_high"))
    if low is None or high is None:
        return "no interval (a single sequence gives none)"
    confidence = number(fields.get("confidence"))
    level = f"{100 * confidence:g} % " if confidence is not None else ""
    return f"{level}bootstrap interval [{low:.4f}, {high:.4f}]"


def _draws(fields: Mapping[str, Any], name: str) -> int:
    values = fields.get(name)
    return len(values) if values is not None else 0


def _changed(name: str, label: str, first: Mapping[str, Any], last: Mapping[str, Any], digits: int) -> str | None:
    """ "{label} {first} at step s0 -> {last} at step s1: {change} ({level} interval [a, b], p of no change)"."""
    before, after, change = number(first.get(name)), number(last.get(name)), number(last.get(f"{name}_change"))
    if before is None or after is None or change is None:
        return None
    low, high = number(last.get(f"{name}_change_low")), number(last.get(f"{name}_change_high"))
    p_change = number(last.get(f"{name}_change_p_value"))
    confidence = number(last.get("confidence"))
    level = f"{100 * confidence:g} % " if confidence is not None else ""
    interval = (
        f"{level}paired bootstrap interval [{low:+.{digits}f}, {high:+.{digits}f}], p of no change {fmt(p_change, 3)}"
        if low is not None and high is not None
        else "no interval" + (": windows of different sequences" if last.get("source") == "live" else "")
    )
    return (
        f"{label} {before:.{digits}f} at step {first['step']} → {after:.{digits}f} at step {last['step']}: "
        f"{change:+.{digits}f} ({interval})"
    )


def change_sentence(first: Mapping[str, Any], last: Mapping[str, Any]) -> str | None:
    """What training added between a curve's first and last rows, in words (None when the rows have no change).

    Args:
        first: The curve's first row (the change's reference, `change_reference_step`).
        last: Its last row, with the change columns of `results.change`.

    Returns:
        E.g. "What training added: energy ratio 1.82 at step 0 → 16.30 at step 60: +14.48 (95 % paired bootstrap
        interval [+9.10, +20.20], p of no change 0.001); energy share ...; anisotropy share ... (no interval)."
    """
    parts = [
        _changed("energy_ratio", "energy ratio", first, last, 2),
        _changed("energy_share", "energy share", first, last, 4),
        _changed("anisotropy_share", "anisotropy share", first, last, 3),
    ]
    found = [part for part in parts if part is not None]
    if not found or last["step"] == first["step"]:
        return None
    return f"What training added: {'; '.join(found)}."


def probe_lines(fields: Mapping[str, Any]) -> list[str]:
    """One probe's finding in words (what ``print(ProbeResult)`` opens with), from its fields.

    Args:
        fields: A `ProbeResult`'s fields by name (``vars(result)`` or ``result.to_dict()``), or a sweep row.

    Returns:
        Lines: the energy share against chance and the controls with its interval, the ratio, the exact and the
        approximate p-values, the anisotropy share with its p-value and its sign's meaning, and the caveat.
    """
    share, ratio = number(fields.get("energy_share")), number(fields.get("energy_ratio"))
    n_controls, n_random = _draws(fields, "control_energy_shares"), _draws(fields, "random_energy_shares")
    lines = [
        f"Finding: the tangent holds {fmt(share, 4)} of the gradient energy ({_interval(fields)}), against "
        f"{fmt(number(fields.get('chance')), 4)} by chance (k/d) and {fmt(number(fields.get('control_mean')), 4)} "
        f"for its {n_controls} normal controls on average: an energy ratio of {fmt(ratio)}.",
        f"p_value_exact = {fmt(number(fields.get('p_value_exact')), 3)} (rank among {n_random} uniformly random "
        f"subspaces, exact; at least 1/{n_random + 1}); p_value = {fmt(number(fields.get('p_value')), 3)} "
        f"(rank among the normal controls, approximate).",
    ]
    aniso = number(fields.get("anisotropy_share"))
    if aniso is not None:
        p_aniso, exact = anisotropy_p_value(fields)
        kind = "exact" if exact else "approximate: the paper's normal-control p"
        lines.append(f"Anisotropy share {aniso:+.3f} (p = {fmt(p_aniso, 3)}, {kind}) is {sign_meaning(aniso)}.")
    return [*lines, CAVEAT]
