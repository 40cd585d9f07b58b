# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Matplotlib figures of a checkpoint sweep (`SweepResult`).

Examples:
    >>> table = ia.SweepResult.load("runs/toy/sweep")
    >>> figures = plot_sweep(table)            # {"energy": Figure, "energy_ratio": ..., ...}
    >>> figures["energy"].savefig("energy.png", dpi=120)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from ..errors import InvalidInputError
from ..probing.result import number as _number

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from ..results.table import SweepResult

__all__ = [
    "plot_sweep",
    "plot_energy",
    "plot_energy_ratio",
    "plot_change",
    "plot_delta_isoscore",
    "plot_isotropy",
    "plot_drift",
    "plot_loss",
    "plot_energy_by_bucket",
    "plot_live_vs_sweep",
    "FIGURES",
    "STEP_LABEL",
    "ISOTROPY_PANELS",
]

#: The panels of `plot_isotropy`: (title, main column, optional secondary column drawn dashed, y label).
ISOTROPY_PANELS: tuple[tuple[str, str, str | None, str], ...] = (
    (
        "Mean cosine similarity\n(solid: raw; dashed: centred)",
        "activation_mean_cosine",
        "activation_mean_cosine_centered",
        "cosine (-1 to 1)",
    ),
    ("IsoScore", "activation_isoscore", None, "IsoScore (0 to 1, 1 = isotropic)"),
    ("IsoScore*", "activation_isoscore_star", None, "IsoScore* (0 to 1, 1 = isotropic)"),
    (
        "Partition isotropy I(W)\n(solid: centred; dashed: uncentred)",
        "activation_partition_isotropy",
        "activation_partition_isotropy_uncentered",
        "I(W) (0 to 1, 1 = isotropic)",
    ),
    ("Effective rank", "activation_effective_rank", None, "effective rank (dimensions)"),
    ("Rogue dimensions", "activation_rogue_top_share", None, "variance share of top dimensions (0 to 1)"),
)

_TANGENT_COLORS = {"early": "C0", "each": "C1", "given": "C2"}
_SPLIT_COLORS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")
_PANEL_WIDTH = 5.2
_PANEL_HEIGHT = 3.9

STEP_LABEL = "training step (symlog scale: linear on [0, 1], log above)"


def format_step(value: float, _position: Any = None) -> str:
    """Tick label of a step: 0, 1, 10, 100, 1k, 10k, 100k, 1M."""
    if value < 0:
        return ""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def step_axis(ax: Axes, steps: Sequence[int], *, label: bool = True) -> None:
    """Symlog x axis on the steps (linear on [0, 1], log above), with a little room at both ends."""
    ax.set_xscale("symlog", linthresh=1.0, linscale=0.6)
    if steps:
        low, high = min(steps), max(steps)
        ax.set_xlim(low - 0.15 if low <= 1 else low / 1.25, high * 1.25 if high >= 1 else high + 0.15)
    ax.xaxis.set_major_formatter(FuncFormatter(format_step))
    if label:
        ax.set_xlabel(STEP_LABEL, fontsize="small")
    ax.grid(True, which="major", alpha=0.3)


# ---------------------------------------------------------------------------------------------------- helpers
def _finite(value: Any) -> float | None:
    """`value` as a float if it is a finite number, else None."""
    if value is None or isinstance(value, (bool, str, list, dict)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _finite_list(values: Any) -> list[float]:
    """The finite numbers of a per-control list (empty when missing)."""
    if not isinstance(values, (list, tuple, np.ndarray)):
        return []
    return [number for number in (_finite(value) for value in values) if number is not None]


def _series(rows: Sequence[dict[str, Any]], value: Callable[[dict[str, Any]], Any]) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows where `value(row)` is a finite number."""
    points = [
        (int(row["step"]), y) for row in rows if (y := _finite(value(row))) is not None and row.get("step") is not None
    ]
    return [step for step, _ in points], [y for _, y in points]


def _field(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda row: row.get(name)


def _plot_field(ax: Any, rows: Sequence[dict[str, Any]], name: str, **style: Any) -> None:
    """Plot one field of the rows over steps (skipping missing values); nothing when no row has it."""
    x, y = _series(rows, _field(name))
    if x:
        ax.plot(x, y, **style)


def _rows(result: SweepResult, split_point: str | None, tangent: str | None) -> list[dict[str, Any]]:
    """Rows selected by split point and tangent kind, sorted by step; raises on an empty selection."""
    selected = split_point is not None or tangent is not None
    rows = result.select(split_point=split_point, tangent=tangent).rows if selected else result.rows
    rows = [row for row in rows if row.get("step") is not None]
    if not rows:
        if not result.rows:
            raise InvalidInputError("The sweep has no finished checkpoint yet: nothing to plot.")
        raise InvalidInputError(
            f"No row of the sweep matches split_point={split_point!r} and tangent={tangent!r}; "
            f"the sweep has split points {result.split_points} and tangents {result.tangents}."
        )
    return sorted(rows, key=lambda row: int(row["step"]))


def _groups(rows: Sequence[dict[str, Any]], key: str, default: Any = None) -> dict[Any, list[dict[str, Any]]]:
    """Rows grouped by `row[key]`, groups in order of first appearance."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get(key, default), []).append(row)
    return groups


def _per_checkpoint(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step: merges the rows of the tangent kinds, keeping the first non-None value of each field."""
    merged: dict[int, dict[str, Any]] = {}
    for row in rows:
        target = merged.setdefault(int(row["step"]), {})
        for key, value in row.items():
            if target.get(key) is None:
                target[key] = value
    return [merged[step] for step in sorted(merged)]


def _tangent_color(tangent: Any, index: int) -> str:
    return _TANGENT_COLORS.get(tangent, _SPLIT_COLORS[(index + 3) % len(_SPLIT_COLORS)])


def _short(split_point: Any, width: int = 40) -> str:
    text = str(split_point)
    return _plain(text if len(text) <= width else "..." + text[-(width - 3) :])


def _plain(text: Any) -> str:
    """`text` as matplotlib shows it verbatim: a "$" pair would start mathtext (and a bad formula would fail)."""
    return str(text).replace("$", r"\$")


def _min_max_band(ax: Any, x: list, low: list, high: list, color: str, label: str, gid: str) -> None:
    """The controls' min-max range as a light band."""
    ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0, label=label, gid=gid)


def _new_figure(n_panels: int) -> tuple[Figure, list[Axes]]:
    width = max(_PANEL_WIDTH * n_panels, 7.0)
    figure = Figure(figsize=(width, _PANEL_HEIGHT + 1.4), layout="constrained")
    axes = figure.subplots(1, n_panels, squeeze=False, sharey=False)[0]
    return figure, list(axes)


def _figure_legend(figure: Figure, axes: Sequence[Axes], extra: Sequence[tuple[Any, str]] = ()) -> None:
    """One legend for the whole figure, below the panels, entries deduplicated by label (then `extra` entries)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label and not label.startswith("_"):
                handles.setdefault(label, handle)
    for handle, label in extra:
        handles.setdefault(label, handle)
    if handles:
        columns = max(1, min(len(handles), int(figure.get_figwidth() // 2.4), 5))
        figure.legend(
            list(handles.values()), list(handles), loc="outside lower center", ncols=columns, fontsize="small"
        )


def _panel_title(ax: Axes, split_point: Any, n_panels: int) -> None:
    if n_panels > 1 or split_point is not None:
        ax.set_title(f"split point {_short(split_point)}", fontsize="medium")


def _kind_label(tangent: Any, n_tangents: int, text: str) -> str:
    return f"{text} ({_plain(tangent)})" if n_tangents > 1 else text


def _all_steps(rows: Sequence[dict[str, Any]]) -> list[int]:
    return sorted({int(row["step"]) for row in rows})


# ---------------------------------------------------------------------------------------------------- figures
def plot_energy(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """Gradient energy share of the tangent over training, against its matched-rank normal controls.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one panel each).
        tangent: Plot only this tangent kind ("early", "each", "given"; default: every kind present).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_energy(table, tangent="early").savefig("energy.png")
    """
    rows = _rows(result, split_point, tangent)
    splits = _groups(rows, "split_point")
    kinds_of = {split: _groups(split_rows, "tangent", "early") for split, split_rows in splits.items()}
    n_columns = max(len(kinds) for kinds in kinds_of.values())
    figure = Figure(
        figsize=(max(_PANEL_WIDTH * n_columns, 7.0), _PANEL_HEIGHT * len(splits) + 1.4), layout="constrained"
    )
    grid = figure.subplots(len(splits), n_columns, squeeze=False, sharey="row")
    for row_axes, (split, split_rows) in zip(grid, splits.items(), strict=True):
        for unused in row_axes[len(kinds_of[split]) :]:
            unused.set_visible(False)
        for index, (ax, (kind, kind_rows)) in enumerate(zip(row_axes, kinds_of[split].items(), strict=False)):
            _draw_energy_panel(ax, kind, kind_rows, _tangent_color(kind, index))
            _draw_chance(ax, kind_rows)
            step_axis(ax, _all_steps(split_rows))
            ax.set_ylim(bottom=0.0)
            ax.tick_params(labelleft=True)  # a shared y axis hides the other panels' tick labels otherwise
            ax.set_ylabel("gradient energy share\n(fraction of ||G||_F^2)", fontsize="small")
            ax.set_title(f"{_plain(kind)} tangent, split point {_short(split)}", fontsize="medium")
            # its own legend, below it, in the colours of its own lines (a figure's legend would show the first
            # panel's colour for an entry every panel shares)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize="x-small", frameon=False)
    figure.suptitle("Gradient energy in the tangent subspace vs matched-rank normal controls")
    return figure


def _draw_energy_panel(ax: Axes, kind: Any, kind_rows: Sequence[dict[str, Any]], color: str) -> None:
    """One tangent kind's panel of `plot_energy` (its title names the kind, so the labels do not): the control band,
    the controls' mean, the analytic null, E_T and its bootstrap interval."""
    _draw_control_band(ax, kind, kind_rows, color)
    _plot_field(
        ax,
        kind_rows,
        "control_mean",
        gid=f"control_mean:{kind}",
        label="controls E_N mean",
        color=color,
        linestyle="--",
        linewidth=1.0,
    )
    _plot_field(
        ax,
        kind_rows,
        "analytic_null",
        gid=f"analytic_null:{kind}",
        label="analytic null (1-E_T)k/(d-k)",
        color=color,
        linestyle=":",
        linewidth=1.3,
    )
    _plot_field(
        ax,
        kind_rows,
        "energy_share",
        gid=f"energy:{kind}",
        label="tangent E_T",
        color=color,
        marker="o",
        markersize=4,
        linewidth=1.8,
    )
    _draw_energy_interval(ax, kind, kind_rows, color)


def _draw_control_band(ax: Axes, kind: Any, kind_rows: Sequence[dict[str, Any]], color: str) -> None:
    """The band between the smallest and largest control energy share E_N of each step, with thin edges."""
    band = [
        (int(row["step"]), min(values), max(values))
        for row in kind_rows
        if (values := _finite_list(row.get("control_energy_shares")))
    ]
    if band:
        x, low, high = (list(column) for column in zip(*band, strict=True))
        _min_max_band(ax, x, low, high, color, "controls E_N min-max", f"control_band:{kind}")
        ax.plot(x, low, color=color, alpha=0.45, linewidth=0.7, gid=f"control_min:{kind}")
        ax.plot(x, high, color=color, alpha=0.45, linewidth=0.7, gid=f"control_max:{kind}")


def _draw_energy_interval(ax: Axes, kind: Any, kind_rows: Sequence[dict[str, Any]], color: str) -> None:
    """The bootstrap confidence interval of E_T, as error bars."""
    ci = [
        (int(row["step"]), value, value - low, high - value)
        for row in kind_rows
        if (value := _finite(row.get("energy_share"))) is not None
        and (low := _finite(row.get("ci_low"))) is not None
        and (high := _finite(row.get("ci_high"))) is not None
    ]
    if ci:
        x, y, below, above = (list(column) for column in zip(*ci, strict=True))
        container = ax.errorbar(
            x,
            y,
            yerr=[np.maximum(below, 0.0), np.maximum(above, 0.0)],
            fmt="none",
            ecolor=color,
            elinewidth=1.0,
            capsize=2.5,
            label="bootstrap CI of E_T",
        )
        for artist in (*container.lines[1], *container.lines[2]):
            artist.set_gid(f"ci:{kind}")


def _draw_chance(ax: Axes, rows: Sequence[dict[str, Any]]) -> None:
    """Chance k/d: a horizontal dashed line if the same in every row, else a dashed line over the steps."""

    def chance(row: dict[str, Any]) -> Any:
        value = _finite(row.get("chance"))
        if value is None and _finite(row.get("rank")) and _finite(row.get("dim")):
            value = float(row["rank"]) / float(row["dim"])
        return value

    x, y = _series(rows, chance)
    if not y:
        return
    if max(y) - min(y) <= 1e-12:
        ax.axhline(y[0], color="0.35", linestyle="--", linewidth=1.0, label=f"chance k/d = {y[0]:.4g}", gid="chance")
    else:
        ax.plot(x, y, color="0.35", linestyle="--", linewidth=1.0, label="chance k/d", gid="chance")


def plot_energy_ratio(
    result: SweepResult, *, split_point: str | None = None, tangent: str | None = None, alpha: float | None = None
) -> Figure:
    """Energy ratio E_T / mean(E_N) over training, its points filled where the verdict calls them significant.

    A point is filled when its exact p-value (`p_value_exact`), adjusted within the sweep's family by its correction
    (`SweepConfig.family`, `.correction`: Holm within each curve by default), is at or below the level: the
    verdict's own decision (`results.verdict.adjusted_p_values`), whatever part of the sweep is drawn.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one panel each).
        tangent: Plot only this tangent kind (default: every kind present).
        alpha: The significance level (default: the sweep's `level`, else 0.05).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_energy_ratio(table).savefig("ratio.png")
    """
    from ..results.verdict import adjusted_p_values, marker_legend, p_value_column, verdict_settings

    rows = _rows(result, split_point, tangent)
    config = {**result.config, **({"level": alpha} if alpha is not None else {})}
    level = verdict_settings(config)[2]
    judged = dict(zip(map(_row_key, result.rows), adjusted_p_values(result.rows, config), strict=True))
    panels = _groups(rows, "split_point")
    figure, axes = _new_figure(len(panels))
    for ax, (split, split_rows) in zip(axes, panels.items(), strict=True):
        kinds = _groups(split_rows, "tangent", "early")
        for index, (kind, kind_rows) in enumerate(kinds.items()):
            significant = [(p := judged.get(_row_key(row))) is not None and p <= level for row in kind_rows]
            _draw_ratio(ax, kind, kind_rows, significant, _tangent_color(kind, index), len(kinds))
        ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1.0, label="ratio 1 (as a control)", gid="one")
        step_axis(ax, _all_steps(split_rows))
        ax.set_ylim(bottom=0.0)
        ax.set_ylabel("energy ratio E_T / mean E_N (times)", fontsize="small")
        _panel_title(ax, split, len(panels))
    draws = "random_energy_shares" if p_value_column(result.rows) == "p_value_exact" else "control_energy_shares"
    n_draws = sorted({len(row[draws]) for row in rows if row.get(draws)})
    figure.suptitle(f"Tangent energy over mean control energy\n{_p_value_floors(n_draws)}")
    _figure_legend(figure, axes, _significance_markers(marker_legend(result.rows, config)))
    return figure


def _row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    """A row's identity in a sweep: its step, split point and tangent kind."""
    return str(row.get("step")), str(row.get("split_point")), str(row.get("tangent"))


def _draw_ratio(
    ax: Axes, kind: Any, kind_rows: Sequence[dict[str, Any]], significant: Sequence[bool], color: str, n_kinds: int
) -> None:
    """One tangent kind's E_T / mean(E_N) line, its points filled where `significant`, hollow elsewhere."""
    points = [
        (int(row["step"]), ratio, sig)
        for row, sig in zip(kind_rows, significant, strict=True)
        if (ratio := _finite(row.get("energy_ratio"))) is not None
    ]
    if not points:
        return
    ax.plot(
        [step for step, _, _ in points],
        [ratio for _, ratio, _ in points],
        color=color,
        linewidth=1.6,
        label=_kind_label(kind, n_kinds, "E_T / mean E_N"),
        gid=f"ratio:{kind}",
    )
    filled = [(step, ratio) for step, ratio, sig in points if sig]
    hollow = [(step, ratio) for step, ratio, sig in points if not sig]
    if filled:
        ax.scatter(
            *zip(*filled, strict=True), s=30, color=color, edgecolors=color, zorder=3, gid=f"significant:{kind}"
        )
    if hollow:
        ax.scatter(
            *zip(*hollow, strict=True),
            s=30,
            facecolors="white",
            edgecolors=color,
            zorder=3,
            gid=f"not_significant:{kind}",
        )


def _p_value_floors(n_draws: Sequence[int]) -> str:
    """The smallest attainable p-value 1/(R' + 1) of each number R' of draws behind the tested p-value."""
    if not n_draws:
        return "no draws recorded"
    floors = ", ".join(f"{1 / (r + 1):.3g} (R'={r})" for r in n_draws)
    return f"smallest attainable p = 1/(R'+1) = {floors}"


def _significance_markers(meaning: str) -> list[tuple[Line2D, str]]:
    """Legend entries of the filled (significant, as the verdict decides) and hollow markers."""
    return [
        (Line2D([], [], linestyle="none", marker="o", color="0.3"), f"filled: {meaning}"),
        (
            Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="0.3"),
            "hollow: not significant",
        ),
    ]


def plot_delta_isoscore(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """Change of the gradients' IsoScore* when the tangent is projected out, against the controls.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one panel each).
        tangent: Plot only this tangent kind (default: every kind present).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_delta_isoscore(table).savefig("delta_isoscore.png")
    """
    rows = _rows(result, split_point, tangent)
    panels = _groups(rows, "split_point")
    figure, axes = _new_figure(len(panels))
    for ax, (split, split_rows) in zip(axes, panels.items(), strict=True):
        kinds = _groups(split_rows, "tangent", "early")
        for index, (kind, kind_rows) in enumerate(kinds.items()):
            color = _tangent_color(kind, index)
            n_kinds = len(kinds)
            band = [
                (int(row["step"]), min(values), max(values), float(np.mean(values)))
                for row in kind_rows
                if (values := _finite_list(row.get("delta_isoscore_star_controls")))
            ]
            if band:
                x, low, high, mean = (list(column) for column in zip(*band, strict=True))
                label = _kind_label(kind, n_kinds, "controls min-max")
                _min_max_band(ax, x, low, high, color, label, f"delta_control_band:{kind}")
                ax.plot(x, low, color=color, alpha=0.45, linewidth=0.7, gid=f"delta_control_min:{kind}")
                ax.plot(x, high, color=color, alpha=0.45, linewidth=0.7, gid=f"delta_control_max:{kind}")
                ax.plot(
                    x,
                    mean,
                    color=color,
                    linestyle="--",
                    linewidth=1.0,
                    label=_kind_label(kind, n_kinds, "controls mean"),
                    gid=f"delta_control_mean:{kind}",
                )
            x, y = _series(kind_rows, _field("delta_isoscore_star"))
            if x:
                ax.plot(
                    x,
                    y,
                    color=color,
                    marker="o",
                    markersize=4,
                    linewidth=1.8,
                    label=_kind_label(kind, n_kinds, "tangent removed"),
                    gid=f"delta:{kind}",
                )
        ax.axhline(0.0, color="0.35", linewidth=0.8, gid="zero")
        step_axis(ax, _all_steps(split_rows))
        ax.set_ylabel("Delta IsoScore* of gradients (IsoScore* units)", fontsize="small")
        _panel_title(ax, split, len(panels))
    figure.suptitle("Gradient isotropy gained by removing the tangent vs a normal control\n(Delta IsoScore*)")
    _figure_legend(figure, axes)
    return figure


def plot_isotropy(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """Isotropy of the activations over training: six small multiples, one line per split point.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one line each).
        tangent: Use only the rows of this tangent kind (default: every row).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_isotropy(table).savefig("isotropy.png")
    """
    rows = _rows(result, split_point, tangent)
    splits = _groups(rows, "split_point")
    figure = Figure(figsize=(3 * 4.2, 2 * 3.4 + 1.2), layout="constrained")
    axes = list(figure.subplots(2, 3, squeeze=False).ravel())
    steps = _all_steps(rows)
    for position, (ax, (title, column, secondary, ylabel)) in enumerate(zip(axes, ISOTROPY_PANELS, strict=True)):
        for index, (split, split_rows) in enumerate(splits.items()):
            color = _SPLIT_COLORS[index % len(_SPLIT_COLORS)]
            merged = _per_checkpoint(split_rows)
            label = f"split point {_short(split, 28)}"
            x, y = _series(merged, _field(column))
            if x:
                ax.plot(
                    x,
                    y,
                    color=color,
                    marker="o",
                    markersize=3,
                    linewidth=1.5,
                    label=label,
                    gid=f"isotropy:{column}:{split}",
                )
            if secondary is not None:
                x, y = _series(merged, _field(secondary))
                if x:
                    ax.plot(
                        x,
                        y,
                        color=color,
                        linestyle="--",
                        linewidth=1.0,
                        gid=f"isotropy:{secondary}:{split}",
                    )
        if not ax.lines:
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")
        step_axis(ax, steps, label=position >= 3)
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(ylabel, fontsize="small")
    figure.suptitle("Isotropy of the activations over training")
    _figure_legend(figure, axes)
    return figure


def plot_drift(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """Drift of the tangent over training: principal angles between checkpoints' own tangents, in radians.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one panel each).
        tangent: Use only the rows of this tangent kind (default: every row; drift describes the checkpoint).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_drift(table).savefig("drift.png")
    """
    rows = _rows(result, split_point, tangent)
    panels = _groups(rows, "split_point")
    figure, axes = _new_figure(len(panels))
    series = (
        ("reference", "mean", "C0", "-", "vs reference, mean angle"),
        ("reference", "max", "C0", "--", "vs reference, max angle"),
        ("previous", "mean", "C1", "-", "vs previous checkpoint, mean angle"),
        ("previous", "max", "C1", "--", "vs previous checkpoint, max angle"),
    )
    for ax, (split, split_rows) in zip(axes, panels.items(), strict=True):
        merged = _per_checkpoint(split_rows)
        for against, statistic, color, style, label in series:
            column = f"drift_{against}_{statistic}_angle"
            x, y = _series(merged, _field(column))
            if x:
                ax.plot(
                    x,
                    y,
                    color=color,
                    linestyle=style,
                    marker="o" if statistic == "mean" else None,
                    markersize=3.5,
                    linewidth=1.5,
                    label=label,
                    gid=f"drift:{against}_{statistic}",
                )
        if not ax.lines:
            ax.text(0.5, 0.5, "drift not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")
        step_axis(ax, _all_steps(split_rows))
        top = max((np.max(line.get_ydata()) for line in ax.lines), default=math.pi / 2)
        ax.set_ylim(0.0, min(math.pi / 2, max(math.radians(5.0), 1.15 * float(top))))
        ax.set_ylabel("principal angle (radians, as the drift_* columns)", fontsize="small")
        degrees = ax.secondary_yaxis("right", functions=(np.degrees, np.radians))
        degrees.set_ylabel("degrees", fontsize="small")
        _panel_title(ax, split, len(panels))
    figure.suptitle("Tangent drift: principal angles between checkpoints' own tangents")
    _figure_legend(figure, axes)
    return figure


def plot_loss(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """The training loss of each checkpoint on the probe texts (the ``loss`` column), one line per split point.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one line each).
        tangent: Use only the rows of this tangent kind (default: every row).

    Returns:
        The figure.

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_loss(table).savefig("loss.png")
    """
    rows = _rows(result, split_point, tangent)
    figure, (ax,) = _new_figure(1)
    for index, (split, split_rows) in enumerate(_groups(rows, "split_point").items()):
        x, y = _series(_per_checkpoint(split_rows), _field("loss"))
        if x:
            ax.plot(
                x,
                y,
                color=_SPLIT_COLORS[index % len(_SPLIT_COLORS)],
                marker="o",
                markersize=3.5,
                linewidth=1.6,
                label=f"split point {_short(split, 28)}",
                gid=f"loss:{split}",
            )
    if not ax.lines:
        ax.text(0.5, 0.5, "loss not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")
    step_axis(ax, _all_steps(rows))
    ax.set_ylabel("loss on the probe texts (nats per loss term)", fontsize="small")
    figure.suptitle("Training loss of each checkpoint on the probe texts")
    _figure_legend(figure, [ax])
    return figure


_BREAKDOWNS = (("frequency", "by token frequency (types ranked by count)"), ("position", "by position in the text"))


def plot_energy_by_bucket(
    result: SweepResult, *, split_point: str | None = None, tangent: str | None = None
) -> Figure:
    """Energy share of the tangent within each token frequency bucket and position bucket, checkpoint by checkpoint.

    Args:
        result: The sweep.
        split_point: Plot only this split point (default: every split point, one row each).
        tangent: The tangent kind to show.

    Returns:
        The figure ("not recorded" panels for rows written before the breakdown existed).

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_energy_by_bucket(table).savefig("buckets.png")  # doctest: +SKIP
    """
    rows = result.select(split_point=split_point).rows
    if not rows:
        raise InvalidInputError("The sweep has no row to plot (for this split point).")
    kinds = list(dict.fromkeys(row.get("tangent") for row in rows))
    kind = tangent or ("early" if "early" in kinds else kinds[0])
    rows = [row for row in rows if row.get("tangent") == kind]
    if not rows:
        raise InvalidInputError(f"The sweep has no row of tangent kind {kind!r}.")
    splits = list(dict.fromkeys(row.get("split_point") for row in rows))
    figure = Figure(figsize=(11, 3.3 * len(splits) + 0.8), layout="constrained")
    axes = figure.subplots(len(splits), 2, squeeze=False)
    for line, split in enumerate(splits):
        split_rows = sorted((row for row in rows if row.get("split_point") == split), key=lambda row: row["step"])
        for column, (prefix, title) in enumerate(_BREAKDOWNS):
            _draw_buckets(axes[line][column], split_rows, prefix)
            shown = str(split).replace("$", r"\$")  # a $ would start matplotlib's mathtext
            axes[line][column].set_title(
                f"split point {shown}: {title}" if len(splits) > 1 else title, fontsize="medium"
            )
    shown_kind = str(kind).replace("$", r"\$")
    figure.suptitle(f"Energy share of the {shown_kind} tangent within token buckets (dashed: its controls' mean)")
    figure.legend(
        handles=[Line2D([], [], color="0.3", linestyle=style) for style in ("-", "--")],
        labels=["tangent", "controls' mean"],
        loc="outside lower center",
        ncols=2,
        fontsize="small",
    )
    return figure


def _draw_buckets(ax: Any, rows: list[dict[str, Any]], prefix: str) -> None:
    labels = next((row.get(f"{prefix}_buckets") for row in rows if row.get(f"{prefix}_buckets")), None)
    if not labels:
        ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")
        step_axis(ax, sorted({row["step"] for row in rows}))
        ax.set_ylabel("energy share", fontsize="small")
        return
    colors = colormaps["viridis"].resampled(max(len(labels), 2))
    for index, label in enumerate(labels):
        for field, style, name in ((f"{prefix}_energy_share", "-", label), (f"{prefix}_control_share", "--", None)):
            points = [
                (row["step"], values[index])
                for row in rows
                if (values := row.get(field)) and index < len(values) and values[index] is not None
            ]
            if points:
                steps, shares = zip(*points, strict=True)
                ax.plot(
                    steps,
                    shares,
                    style,
                    color=colors(index),
                    marker="o" if style == "-" else None,
                    markersize=3,
                    linewidth=1.4 if style == "-" else 0.9,
                    label=name,
                    gid=f"{field}:{index}",
                )
    step_axis(ax, sorted({row["step"] for row in rows}))
    ax.set_ylabel("energy share", fontsize="small")
    ax.legend(fontsize="x-small", title="bucket", title_fontsize="x-small")


#: The panels: (statistic, y label); the anisotropy share's change has no interval.
_CHANGE_PANELS = (
    ("energy_ratio", "change of the energy ratio (E_T / mean E_N)"),
    ("energy_share", "change of the energy share E_T (fraction)"),
    ("anisotropy_share", "change of the anisotropy share (no interval)"),
)
_CHANGE_COLORS = {"early": "C0", "each": "C1", "given": "C2", "refit": "C4"}
_CHANGE_WIDTH, _CHANGE_HEIGHT = 4.6, 3.4


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
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_change(table).savefig("change.png")  # doctest: +SKIP
    """
    splits = _groups(_rows(result, split_point, tangent), "split_point")
    figure = Figure(
        figsize=(_CHANGE_WIDTH * len(_CHANGE_PANELS), _CHANGE_HEIGHT * len(splits) + 1.4), layout="constrained"
    )
    grid = figure.subplots(len(splits), len(_CHANGE_PANELS), squeeze=False)
    for axes, (split, split_rows) in zip(grid, splits.items(), strict=True):
        steps = sorted({int(row["step"]) for row in split_rows})
        for ax, (name, label) in zip(axes, _CHANGE_PANELS, strict=True):
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
    drawn = False
    for index, (kind, kind_rows) in enumerate(_groups(rows, "tangent", "early").items()):
        points = [row for row in kind_rows if _number(row.get(f"{name}_change")) is not None]
        if not points:
            continue
        x = [int(row["step"]) for row in points]
        y = [float(row[f"{name}_change"]) for row in points]
        low = [_number(row.get(f"{name}_change_low")) for row in points]
        high = [_number(row.get(f"{name}_change_high")) for row in points]
        below = [value - bound if bound is not None else 0.0 for value, bound in zip(y, low, strict=True)]
        above = [bound - value if bound is not None else 0.0 for value, bound in zip(y, high, strict=True)]
        color = _CHANGE_COLORS.get(kind, f"C{(index + 5) % 10}")
        ax.errorbar(
            x, y, yerr=[below, above], color=color, marker="o", markersize=3.5, linewidth=1.5, capsize=3,
            label=f"{kind} tangent".replace("$", r"\$"), gid=f"change:{name}:{kind}",
        )  # fmt: skip
        drawn = True
    ax.axhline(0.0, color="0.5", linestyle="--", linewidth=1.0, label="no change")
    if not drawn:
        ax.text(0.5, 0.5, "change not recorded", transform=ax.transAxes, ha="center", va="center", color="0.5")


_LIVE, _SWEEP = "C0", "C3"


def _live_series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """The steps and finite values of one column (rows without a finite value left out)."""
    points = [(int(row["step"]), value) for row in rows if (value := _number(row.get(key))) is not None]
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
        raise InvalidInputError(
            f"The live rows (split points {live.split_points}) and the sweep's ({sweep.split_points}) share no split "
            "point: sweep the checkpoints of the live run at one of its split points."
        )
    return panels


def _draw_live(ax: Axes, rows: list[dict[str, Any]], kind: str) -> None:
    band = [
        (int(row["step"]), min(values), max(values))
        for row in rows
        if (values := [value for value in row.get("control_energy_shares") or [] if _number(value) is not None])
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
    steps, values = _live_series(rows, "energy_share")
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
        (int(row["step"]), value, _number(row.get("ci_low")), _number(row.get("ci_high")))
        for row in rows
        if (value := _number(row.get("energy_share"))) is not None
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
    steps, values = _live_series(rows, "control_mean")
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
        InvalidInputError: No split point in common, or no rows.
    """
    if not live.rows or not sweep.rows:
        raise InvalidInputError("Both the live rows and the sweep need rows to be drawn side by side.")
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


FIGURES: dict[str, Callable[..., Figure]] = {
    "energy": plot_energy,
    "energy_ratio": plot_energy_ratio,
    "change": plot_change,
    "delta_isoscore": plot_delta_isoscore,
    "isotropy": plot_isotropy,
    "drift": plot_drift,
    "loss": plot_loss,
    "buckets": plot_energy_by_bucket,
}
"""The figures of `plot_sweep`, by name, in display order."""


def plot_sweep(
    result: SweepResult, *, split_point: str | None = None, tangent: str | None = None
) -> dict[str, Figure]:
    """Every figure of a sweep: energy, energy ratio, Delta IsoScore*, activation isotropy, tangent drift, loss.

    Args:
        result: The sweep (a finished or partial one).
        split_point: Plot only this split point (default: every split point).
        tangent: Plot only this tangent kind ("early", "each", "given"; default: every kind present).

    Returns:
        ``{"energy": ..., "energy_ratio": ..., "delta_isoscore": ..., "isotropy": ..., "drift": ..., "loss": ...}``,
        each a `matplotlib.figure.Figure` (see the functions of the same names, ``plot_<name>``).

    Raises:
        InvalidInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> figures = plot_sweep(ia.SweepResult.load("runs/toy/sweep"))
        >>> for name, figure in figures.items():
        ...     figure.savefig(f"{name}.png", dpi=120)
    """
    _rows(result, split_point, tangent)  # fail early, once, on an empty selection
    return {name: plot(result, split_point=split_point, tangent=tangent) for name, plot in FIGURES.items()}


#: The x-axis label of every figure over training.
