# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What training added: each checkpoint's change from the first checkpoint of its curve, with its paired bootstrap
interval (`results.change`), in energy ratio, energy share and anisotropy share."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from ..errors import EmptyInputError
from .steps import step_axis

if TYPE_CHECKING:  # pragma: no cover
    from ..results.table import SweepResult

__all__ = ["plot_change"]

#: The panels: (statistic, y label); the anisotropy share's change has no interval.
_PANELS = (
    ("energy_ratio", "change of the energy ratio (E_T / mean E_N)"),
    ("energy_share", "change of the energy share E_T (fraction)"),
    ("anisotropy_share", "change of the anisotropy share (no interval)"),
)
_COLORS = {"early": "C0", "each": "C1", "given": "C2", "refit": "C4"}
_PANEL_WIDTH, _PANEL_HEIGHT = 4.6, 3.4


def plot_change(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """The change of each checkpoint from the first of its curve, with its paired bootstrap interval.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one row of panels each).
        tangent: Plot only this tangent kind (default: every kind, one line each).

    Returns:
        The figure: energy ratio, energy share and anisotropy share changes ("not recorded" for rows written
        before the change columns existed).

    Raises:
        EmptyInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_change(table).savefig("change.png")  # doctest: +SKIP
    """
    selected = split_point is not None or tangent is not None
    rows = result.select(split_point=split_point, tangent=tangent).rows if selected else result.rows
    if not rows:
        raise EmptyInputError(f"No row of the sweep to plot (split_point={split_point!r}, tangent={tangent!r}).")
    splits: dict[Any, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda row: int(row["step"])):
        splits.setdefault(row.get("split_point"), []).append(row)
    figure = Figure(figsize=(_PANEL_WIDTH * len(_PANELS), _PANEL_HEIGHT * len(splits) + 1.4), layout="constrained")
    grid = figure.subplots(len(splits), len(_PANELS), squeeze=False)
    for axes, (split, split_rows) in zip(grid, splits.items(), strict=True):
        steps = sorted({int(row["step"]) for row in split_rows})
        for ax, (name, label) in zip(axes, _PANELS, strict=True):
            _draw_panel(ax, name, split_rows)
            step_axis(ax, steps)
            ax.set_ylabel(label, fontsize="small")
            ax.set_title(f"split point {str(split)[-40:]}".replace("$", r"\$"), fontsize="medium")
    figure.suptitle("What training added: change from the first checkpoint (95 % paired bootstrap intervals)")
    handles = {text: handle for ax in grid.flat for handle, text in zip(*ax.get_legend_handles_labels(), strict=True)}
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles))
    return figure


def _draw_panel(ax: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """One statistic's change over the steps, a line per tangent kind, its interval as error bars."""
    kinds: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        kinds.setdefault(row.get("tangent", "early"), []).append(row)
    drawn = False
    for index, (kind, kind_rows) in enumerate(kinds.items()):
        points = [row for row in kind_rows if _number(row.get(f"{name}_change")) is not None]
        if not points:
            continue
        x = [int(row["step"]) for row in points]
        y = [float(row[f"{name}_change"]) for row in points]
        low = [_number(row.get(f"{name}_change_low")) for row in points]
        high = [_number(row.get(f"{name}_change_high")) for row in points]
        below = [value - bound if bound is not None else 0.0 for value, bound in zip(y, low, strict=True)]
        above = [bound - value if bound is not None else 0.0 for value, bound in zip(y, high, strict=True)]
        color = _COLORS.get(kind, f"C{(index + 5) % 10}")
        ax.errorbar(
            x, y, yerr=[below, above], color=color, marker="o", markersize=3.5, linewidth=1.5, capsize=3,
            label=f"{kind} tangent".replace("$", r"\$"), gid=f"change:{name}:{kind}",
        )  # fmt: skip
        drawn = True
    ax.axhline(0.0, color="0.5", linestyle="--", linewidth=1.0, label="no change")
    if not drawn:
        ax.text(0.5, 0.5, "change not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
