# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A live probe's curve next to the post-hoc sweep of the same training's checkpoints.

Examples:
    >>> figure = plot_live_vs_sweep(ia.SweepResult.load("runs/demo/live"), ia.SweepResult.load("runs/demo/sweep"))
    >>> figure.savefig("live.png")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

from ..errors import EmptyInputError
from ..probing.result import number as _finite
from .steps import step_axis

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from ..results.table import SweepResult

__all__ = ["plot_live_vs_sweep"]

_LIVE, _SWEEP = "C0", "C3"


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """The steps and finite values of one column (rows without a finite value left out)."""
    points = [(int(row["step"]), value) for row in rows if (value := _finite(row.get(key))) is not None]
    return [step for step, _ in points], [value for _, value in points]


def _by(rows: list[dict[str, Any]], *keys: str) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda row: int(row["step"])):
        groups.setdefault(tuple(str(row.get(key)) for key in keys), []).append(row)
    return groups


def _panels(live: SweepResult, sweep: SweepResult) -> list[tuple[str, str, list[dict], str, list[dict]]]:
    """(split point, live kind, live rows, sweep kind, sweep rows) for each live split point the sweep also has."""
    sweep_groups = _by(sweep.rows, "split_point", "tangent")
    panels = []
    for (split, kind), rows in _by(live.rows, "split_point", "tangent").items():
        kinds = [sweep_kind for sweep_split, sweep_kind in sweep_groups if sweep_split == split]
        if kinds:
            chosen = kind if kind in kinds else kinds[0]
            panels.append((split, kind, rows, chosen, sweep_groups[(split, chosen)]))
    if not panels:
        raise EmptyInputError(
            f"The live rows (split points {live.split_points}) and the sweep's ({sweep.split_points}) share no split "
            "point: sweep the checkpoints of the live run at one of its split points."
        )
    return panels


def _draw_live(ax: Axes, rows: list[dict[str, Any]], kind: str) -> None:
    band = [
        (int(row["step"]), min(values), max(values))
        for row in rows
        if (values := [value for value in row.get("control_energy_shares") or [] if _finite(value) is not None])
    ]
    if band:
        steps, low, high = zip(*band, strict=True)
        ax.fill_between(
            steps,
            low,
            high,
            color=_LIVE,
            alpha=0.18,
            linewidth=0,
            gid=f"live_band:{kind}",
            label="live: controls E_N min-max",
        )
    steps, values = _series(rows, "energy_share")
    if steps:
        ax.plot(
            steps,
            values,
            color=_LIVE,
            linewidth=1.5,
            marker=".",
            markersize=3,
            gid=f"live_energy:{kind}",
            label=f"live: {kind} tangent E_T (training batches, each window)",
        )


def _draw_sweep(ax: Axes, rows: list[dict[str, Any]], kind: str) -> None:
    points = [
        (int(row["step"]), value, _finite(row.get("ci_low")), _finite(row.get("ci_high")))
        for row in rows
        if (value := _finite(row.get("energy_share"))) is not None
    ]
    if points:
        steps = [point[0] for point in points]
        values = [point[1] for point in points]
        below = [value - low if low is not None else 0.0 for _, value, low, _ in points]
        above = [high - value if high is not None else 0.0 for _, value, _, high in points]
        container = ax.errorbar(
            steps,
            values,
            yerr=[np.maximum(below, 0), np.maximum(above, 0)],
            fmt="o",
            markersize=4,
            color=_SWEEP,
            capsize=2.5,
            label=f"post hoc: {kind} tangent E_T (probe texts, saved checkpoints)",
        )
        container.lines[0].set_gid(f"sweep_energy:{kind}")
    steps, values = _series(rows, "control_mean")
    if steps:
        ax.plot(
            steps,
            values,
            color=_SWEEP,
            linestyle="--",
            linewidth=1.0,
            gid=f"sweep_control_mean:{kind}",
            label="post hoc: controls E_N mean",
        )


def plot_live_vs_sweep(live: SweepResult, sweep: SweepResult) -> Figure:
    """The live probe's energy share at every window next to the post-hoc sweep's at each checkpoint.

    Args:
        live: The rows of a `TrainingProbe` (its results directory, `SweepResult.load`).
        sweep: The sweep of checkpoints of the same training.

    Returns:
        The figure, one panel per split point and tangent kind of the live run that the sweep also probed.

    Raises:
        EmptyInputError: No split point in common, or no rows.
    """
    if not live.rows or not sweep.rows:
        raise EmptyInputError("Both the live rows and the sweep need rows to be drawn side by side.")
    panels = _panels(live, sweep)
    figure = Figure(figsize=(max(5.2 * len(panels), 7.0), 5.0), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (split, kind, live_rows, sweep_kind, sweep_rows) in zip(axes, panels, strict=True):
        _draw_live(ax, live_rows, kind)
        _draw_sweep(ax, sweep_rows, sweep_kind)
        chance = {row["rank"] / row["dim"] for row in live_rows if row.get("rank") and row.get("dim")}
        if len(chance) == 1:
            ax.axhline(chance.pop(), color="grey", linestyle="--", linewidth=0.8, label="chance k/d")
        step_axis(ax, sorted({int(row["step"]) for row in [*live_rows, *sweep_rows]}))
        ax.set_ylim(bottom=0.0)
        ax.set_ylabel("gradient energy share (fraction of ||G||_F^2)", fontsize="small")
        ax.set_title(f"split point {split}", fontsize="medium")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(2, len(panels)), fontsize="small")
    figure.suptitle("Live probe during training vs post-hoc sweep of the saved checkpoints")
    return figure
