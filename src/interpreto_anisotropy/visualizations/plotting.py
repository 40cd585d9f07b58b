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
_PANEL_WIDTH = 5.2
_PANEL_HEIGHT = 3.9

STEP_LABEL = "training step (symlog scale: linear on [0, 1], log above)"


def format_step(value: float, _position: Any = None) -> str:
    """Tick label of a step: 0, 1, 10, 100, 1k, 10k, 100k, 1M."""
    scale, suffix = next(((scale, suffix) for scale, suffix in ((1e6, "M"), (1e3, "k")) if value >= scale), (1, ""))
    return "" if value < 0 else f"{value / scale:g}{suffix}"


# ---------------------------------------------------------------------------------------------------- helpers
def _series(rows: Sequence[dict[str, Any]], value: str | Callable[[dict[str, Any]], Any]) -> tuple[list, list]:
    """(steps, values) of the rows where `value` (a column, or a function of the row) is a finite number."""
    get = value if callable(value) else lambda row: row.get(value)
    points = [(int(row["step"]), y) for row in rows if (y := _number(get(row))) is not None]
    return [step for step, _ in points], [y for _, y in points]


def _plot_field(ax: Any, rows: Sequence[dict[str, Any]], name: str, **style: Any) -> None:
    """Plot one field of the rows over steps (skipping missing values); nothing when no row has it."""
    x, y = _series(rows, name)
    if x:
        ax.plot(x, y, **style)


def _control_range(rows: Sequence[dict[str, Any]], column: str) -> tuple[list, list, list, list]:
    """(steps, minima, maxima, means) of a per-control list column, over the rows with a finite value in it."""
    lists = [row for row in rows if isinstance(row.get(column), (list, tuple, np.ndarray))]
    finite = [(int(row["step"]), [x for x in map(_number, row[column]) if x is not None]) for row in lists]
    points = [(step, min(values), max(values), float(np.mean(values))) for step, values in finite if values]
    return tuple(list(column) for column in zip(*points, strict=True)) if points else ([], [], [], [])


def _errors(rows: Sequence[dict[str, Any]], column: str, low: str, high: str) -> tuple[list, list, list]:
    """(steps, values, [below, above]) of the rows with a finite `column`: distances to the bounds (0 without one)."""
    x, y = _series(rows, column)
    bounds = [(_number(row.get(low)), _number(row.get(high))) for row in rows if _number(row.get(column)) is not None]
    below = [value - bottom if bottom is not None else 0.0 for value, (bottom, _) in zip(y, bounds, strict=True)]
    return x, y, [below, [top - value if top is not None else 0.0 for value, (_, top) in zip(y, bounds, strict=True)]]


def _rows(result: SweepResult, split_point: str | None, tangent: str | None) -> list[dict[str, Any]]:
    """Rows selected by split point and tangent kind, sorted by step; raises on an empty selection."""
    rows = [row for row in result.select(split_point=split_point, tangent=tangent).rows if row.get("step") is not None]
    if not rows and not result.rows:
        raise InvalidInputError("The sweep has no finished checkpoint yet: nothing to plot.")
    if not rows:
        raise InvalidInputError(
            f"No row of the sweep matches split_point={split_point!r} and tangent={tangent!r}; "
            f"the sweep has split points {result.split_points} and tangents {result.tangents}."
        )
    return sorted(rows, key=lambda row: int(row["step"]))


def _groups(rows: Sequence[dict[str, Any]], key: str | Callable, default: Any = None) -> dict[Any, list]:
    """Rows grouped by `row[key]` (or `key(row)`), groups in order of first appearance."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row) if callable(key) else row.get(key, default), []).append(row)
    return groups


def _per_checkpoint(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step: merges the rows of the tangent kinds, keeping the first non-None value of each field."""
    merged: dict[int, dict[str, Any]] = {}
    for row in rows:
        target = merged.setdefault(int(row["step"]), {})
        target.update({key: value for key, value in row.items() if target.get(key) is None})
    return [merged[step] for step in sorted(merged)]


def _tangent_color(tangent: Any, index: int) -> str:
    return _TANGENT_COLORS.get(tangent, f"C{(index + 3) % 10}")


def _short(split_point: Any, width: int = 40) -> str:
    text = str(split_point)
    return _plain(text if len(text) <= width else "..." + text[-(width - 3) :])


def _plain(text: Any) -> str:
    """`text` as matplotlib shows it verbatim: a "$" pair would start mathtext (and a bad formula would fail)."""
    return str(text).replace("$", r"\$")


def _control_band(ax: Axes, x: list, low: list, high: list, color: str, label: str, prefix: str, kind: Any) -> None:
    """The controls' min-max range as a light band with thin edges."""
    ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0, label=label, gid=f"{prefix}_band:{kind}")
    for name, edge in (("min", low), ("max", high)):
        ax.plot(x, edge, color=color, alpha=0.45, linewidth=0.7, gid=f"{prefix}_{name}:{kind}")


def _new_figure(size: tuple[float, float], n_rows: int, n_columns: int, **options: Any) -> tuple[Figure, Any]:
    """A constrained-layout figure of `size` inches and its grid of axes (always 2-D)."""
    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.subplots(n_rows, n_columns, squeeze=False, **options)


def _split_panels(result: SweepResult, split_point: str | None, tangent: str | None) -> tuple[Figure, list]:
    """A figure of one titled panel per split point of the selection, and its (axes, rows) pairs."""
    splits = _groups(_rows(result, split_point, tangent), "split_point")
    figure, grid = _new_figure((max(_PANEL_WIDTH * len(splits), 7.0), _PANEL_HEIGHT + 1.4), 1, len(splits))
    for ax, split in zip(grid[0], splits, strict=True):
        if len(splits) > 1 or split is not None:
            ax.set_title(f"split point {_short(split)}", fontsize="medium")
    return figure, list(zip(grid[0], splits.values(), strict=True))


def _figure_legend(figure: Figure, axes: Sequence[Axes], extra: Sequence[tuple[Any, str]] = ()) -> None:
    """One legend for the whole figure, below the panels, entries deduplicated by label (then `extra` entries)."""
    handles: dict[str, Any] = {}
    pairs = [pair for ax in axes for pair in zip(*ax.get_legend_handles_labels(), strict=True)]
    for handle, label in [*pairs, *extra]:
        if label and not label.startswith("_"):
            handles.setdefault(label, handle)
    if handles:
        columns = max(1, min(len(handles), int(figure.get_figwidth() // 2.4), 5))
        figure.legend(
            list(handles.values()), list(handles), loc="outside lower center", ncols=columns, fontsize="small"
        )


def _not_recorded(ax: Axes, text: str = "not recorded") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.5")


def _kind_label(tangent: Any, n_tangents: int, text: str) -> str:
    return f"{text} ({_plain(tangent)})" if n_tangents > 1 else text


def _finish(ax: Axes, rows: Sequence[dict], ylabel: str, *, bottom: float | None = None, label: bool = True) -> None:
    """A panel's symlog step axis (linear on [0, 1], log above) over the rows' steps, its y floor and its y label."""
    ax.set_xscale("symlog", linthresh=1.0, linscale=0.6)
    if steps := [int(row["step"]) for row in rows]:
        low, high = min(steps), max(steps)
        ax.set_xlim(low - 0.15 if low <= 1 else low / 1.25, high * 1.25 if high >= 1 else high + 0.15)
    ax.xaxis.set_major_formatter(FuncFormatter(format_step))
    if label:
        ax.set_xlabel(STEP_LABEL, fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    if bottom is not None:
        ax.set_ylim(bottom=bottom)
    ax.set_ylabel(ylabel, fontsize="small")


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
    splits = _groups(_rows(result, split_point, tangent), "split_point")
    kinds_of = {split: _groups(split_rows, "tangent", "early") for split, split_rows in splits.items()}
    n_columns = max(len(kinds) for kinds in kinds_of.values())
    size = (max(_PANEL_WIDTH * n_columns, 7.0), _PANEL_HEIGHT * len(splits) + 1.4)
    figure, grid = _new_figure(size, len(splits), n_columns, sharey="row")
    for row_axes, (split, split_rows) in zip(grid, splits.items(), strict=True):
        for unused in row_axes[len(kinds_of[split]) :]:
            unused.set_visible(False)
        for index, (ax, (kind, kind_rows)) in enumerate(zip(row_axes, kinds_of[split].items(), strict=False)):
            _draw_energy_panel(ax, kind, kind_rows, _tangent_color(kind, index))
            _finish(ax, split_rows, "gradient energy share\n(fraction of ||G||_F^2)", bottom=0.0)
            ax.tick_params(labelleft=True)  # a shared y axis hides the other panels' tick labels otherwise
            ax.set_title(f"{_plain(kind)} tangent, split point {_short(split)}", fontsize="medium")
            # its own legend, below it, in the colours of its own lines (a figure's legend would show the first
            # panel's colour for an entry every panel shares)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize="x-small", frameon=False)
    figure.suptitle("Gradient energy in the tangent subspace vs matched-rank normal controls")
    return figure


#: The lines of an energy panel: column, gid, label, style.
_ENERGY_LINES = (
    ("control_mean", "control_mean", "controls E_N mean", {"linestyle": "--", "linewidth": 1.0}),
    ("analytic_null", "analytic_null", "analytic null (1-E_T)k/(d-k)", {"linestyle": ":", "linewidth": 1.3}),
    ("energy_share", "energy", "tangent E_T", {"marker": "o", "markersize": 4, "linewidth": 1.8}),
)


def _chance(row: dict[str, Any]) -> float | None:
    """A row's chance k/d: its column, else its rank over its width."""
    value = _number(row.get("chance"))
    if value is None and _number(row.get("rank")) and _number(row.get("dim")):
        value = float(row["rank"]) / float(row["dim"])
    return value


def _draw_energy_panel(ax: Axes, kind: Any, kind_rows: Sequence[dict[str, Any]], color: str) -> None:
    """A tangent kind's panel of `plot_energy`: controls' band and mean, analytic null, E_T and its CI, chance k/d."""
    x, low, high, _ = _control_range(kind_rows, "control_energy_shares")
    if x:
        _control_band(ax, x, low, high, color, "controls E_N min-max", "control", kind)
    for column, gid, label, style in _ENERGY_LINES:
        _plot_field(ax, kind_rows, column, gid=f"{gid}:{kind}", label=label, color=color, **style)
    bounded = [row for row in kind_rows if None not in (_number(row.get("ci_low")), _number(row.get("ci_high")))]
    x, y, yerr = _errors(bounded, "energy_share", "ci_low", "ci_high")
    if x:
        style = {"fmt": "none", "ecolor": color, "elinewidth": 1.0, "capsize": 2.5, "label": "bootstrap CI of E_T"}
        bars = ax.errorbar(x, y, yerr=np.maximum(yerr, 0.0), **style)
        for artist in (*bars.lines[1], *bars.lines[2]):
            artist.set_gid(f"ci:{kind}")
    x, y = _series(kind_rows, _chance)
    if y and max(y) - min(y) <= 1e-12:
        ax.axhline(y[0], color="0.35", linestyle="--", linewidth=1.0, label=f"chance k/d = {y[0]:.4g}", gid="chance")
    elif y:
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
    figure, panels = _split_panels(result, split_point, tangent)
    config = {**result.config, **({"level": alpha} if alpha is not None else {})}
    level = verdict_settings(config)[2]
    judged = dict(zip(map(_row_key, result.rows), adjusted_p_values(result.rows, config), strict=True))
    significant = {key for key, p in judged.items() if p is not None and p <= level}
    for ax, split_rows in panels:
        kinds = _groups(split_rows, "tangent", "early")
        for index, (kind, kind_rows) in enumerate(kinds.items()):
            color, label = _tangent_color(kind, index), _kind_label(kind, len(kinds), "E_T / mean E_N")
            _plot_field(ax, kind_rows, "energy_ratio", color=color, linewidth=1.6, label=label, gid=f"ratio:{kind}")
            for filled, gid, face in ((True, "significant", color), (False, "not_significant", "white")):
                x, y = _series([row for row in kind_rows if (_row_key(row) in significant) == filled], "energy_ratio")
                if x:
                    ax.scatter(x, y, s=30, facecolors=face, edgecolors=color, zorder=3, gid=f"{gid}:{kind}")
        ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1.0, label="ratio 1 (as a control)", gid="one")
        _finish(ax, split_rows, "energy ratio E_T / mean E_N (times)", bottom=0.0)
    draws = "random_energy_shares" if p_value_column(result.rows) == "p_value_exact" else "control_energy_shares"
    n_draws = sorted({len(row[draws]) for row in rows if row.get(draws)})
    floors = ", ".join(f"{1 / (r + 1):.3g} (R'={r})" for r in n_draws)
    floors = f"smallest attainable p = 1/(R'+1) = {floors}" if n_draws else "no draws recorded"
    figure.suptitle(f"Tangent energy over mean control energy\n{floors}")
    hollow = Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="0.3")
    filled = Line2D([], [], linestyle="none", marker="o", color="0.3")
    markers = [(filled, f"filled: {marker_legend(result.rows, config)}"), (hollow, "hollow: not significant")]
    _figure_legend(figure, figure.axes, markers)
    return figure


def _row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    """A row's identity in a sweep: its step, split point and tangent kind."""
    return str(row.get("step")), str(row.get("split_point")), str(row.get("tangent"))


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
    figure, panels = _split_panels(result, split_point, tangent)
    for ax, split_rows in panels:
        kinds = _groups(split_rows, "tangent", "early")
        for index, (kind, kind_rows) in enumerate(kinds.items()):
            color = _tangent_color(kind, index)
            x, low, high, mean = _control_range(kind_rows, "delta_isoscore_star_controls")
            if x:
                label = _kind_label(kind, len(kinds), "controls min-max")
                _control_band(ax, x, low, high, color, label, "delta_control", kind)
                label, gid = _kind_label(kind, len(kinds), "controls mean"), f"delta_control_mean:{kind}"
                ax.plot(x, mean, color=color, linestyle="--", linewidth=1.0, label=label, gid=gid)
            label = _kind_label(kind, len(kinds), "tangent removed")
            style = {"marker": "o", "markersize": 4, "linewidth": 1.8, "label": label, "gid": f"delta:{kind}"}
            _plot_field(ax, kind_rows, "delta_isoscore_star", color=color, **style)
        ax.axhline(0.0, color="0.35", linewidth=0.8, gid="zero")
        _finish(ax, split_rows, "Delta IsoScore* of gradients (IsoScore* units)")
    figure.suptitle("Gradient isotropy gained by removing the tangent vs a normal control\n(Delta IsoScore*)")
    _figure_legend(figure, figure.axes)
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
    figure, grid = _new_figure((3 * 4.2, 2 * 3.4 + 1.2), 2, 3)
    axes = list(grid.ravel())
    for position, (ax, (title, column, secondary, ylabel)) in enumerate(zip(axes, ISOTROPY_PANELS, strict=True)):
        for index, (split, split_rows) in enumerate(splits.items()):
            color, merged = f"C{index % 10}", _per_checkpoint(split_rows)
            style = {"marker": "o", "markersize": 3, "linewidth": 1.5, "label": f"split point {_short(split, 28)}"}
            _plot_field(ax, merged, column, color=color, gid=f"isotropy:{column}:{split}", **style)
            if secondary is not None:
                gid = f"isotropy:{secondary}:{split}"
                _plot_field(ax, merged, secondary, color=color, linestyle="--", linewidth=1.0, gid=gid)
        if not ax.lines:
            _not_recorded(ax)
        _finish(ax, rows, ylabel, label=position >= 3)
        ax.set_title(title, fontsize="medium")
    figure.suptitle("Isotropy of the activations over training")
    _figure_legend(figure, axes)
    return figure


#: The lines of `plot_drift`: angle (its column drift_<angle>_angle), colour, line style, marker, label.
_DRIFT_LINES = (
    ("reference_mean", "C0", "-", "o", "vs reference, mean angle"),
    ("reference_max", "C0", "--", None, "vs reference, max angle"),
    ("previous_mean", "C1", "-", "o", "vs previous checkpoint, mean angle"),
    ("previous_max", "C1", "--", None, "vs previous checkpoint, max angle"),
)


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
    figure, panels = _split_panels(result, split_point, tangent)
    for ax, split_rows in panels:
        merged = _per_checkpoint(split_rows)
        for name, color, style, marker, label in _DRIFT_LINES:
            line = {"color": color, "linestyle": style, "marker": marker, "label": label, "gid": f"drift:{name}"}
            _plot_field(ax, merged, f"drift_{name}_angle", markersize=3.5, linewidth=1.5, **line)
        if not ax.lines:
            _not_recorded(ax, "drift not recorded")
        _finish(ax, split_rows, "principal angle (radians, as the drift_* columns)")
        top = max((np.max(line.get_ydata()) for line in ax.lines), default=math.pi / 2)
        ax.set_ylim(0.0, min(math.pi / 2, max(math.radians(5.0), 1.15 * float(top))))
        ax.secondary_yaxis("right", functions=(np.degrees, np.radians)).set_ylabel("degrees", fontsize="small")
    figure.suptitle("Tangent drift: principal angles between checkpoints' own tangents")
    _figure_legend(figure, [ax for ax, _ in panels])
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
    figure, ((ax,),) = _new_figure((7.0, _PANEL_HEIGHT + 1.4), 1, 1)  # as wide as a figure of 1 split point
    for index, (split, split_rows) in enumerate(_groups(rows, "split_point").items()):
        style = {"marker": "o", "markersize": 3.5, "linewidth": 1.6, "label": f"split point {_short(split, 28)}"}
        color = f"C{index % 10}"
        _plot_field(ax, _per_checkpoint(split_rows), "loss", color=color, gid=f"loss:{split}", **style)
    if not ax.lines:
        _not_recorded(ax, "loss not recorded")
    _finish(ax, rows, "loss on the probe texts (nats per loss term)")
    figure.suptitle("Training loss of each checkpoint on the probe texts")
    _figure_legend(figure, [ax])
    return figure


_BREAKDOWNS = (("frequency", "by token frequency (types ranked by count)"), ("position", "by position in the text"))


def plot_energy_by_bucket(
    result: SweepResult, *, split_point: str | None = None, tangent: str | None = None
) -> Figure:
    """Energy share of one tangent kind (default: early) within each token frequency and position bucket."""
    rows = _rows(result, split_point, None)
    kinds = list(dict.fromkeys(row.get("tangent") for row in rows))
    kind = tangent or ("early" if "early" in kinds else kinds[0])
    splits = _groups([row for row in rows if row.get("tangent") == kind], "split_point")
    if not splits:
        raise InvalidInputError(f"The sweep has no row of tangent kind {kind!r}.")
    figure, axes = _new_figure((11, 3.3 * len(splits) + 0.8), len(splits), 2)
    for line, (split, split_rows) in zip(axes, splits.items(), strict=True):
        for ax, (prefix, title) in zip(line, _BREAKDOWNS, strict=True):
            _draw_buckets(ax, split_rows, prefix)
            ax.set_title(f"split point {_plain(split)}: {title}" if len(splits) > 1 else title, fontsize="medium")
    figure.suptitle(f"Energy share of the {_plain(kind)} tangent within token buckets (dashed: its controls' mean)")
    handles = [Line2D([], [], color="0.3", linestyle=style) for style in ("-", "--")]
    labels = ["tangent", "controls' mean"]
    figure.legend(handles=handles, labels=labels, loc="outside lower center", ncols=2, fontsize="small")
    return figure


def _draw_buckets(ax: Any, rows: list[dict[str, Any]], prefix: str) -> None:
    """One breakdown's panel: a line per bucket for the tangent (solid) and its controls' mean (dashed)."""
    labels = next((row.get(f"{prefix}_buckets") for row in rows if row.get(f"{prefix}_buckets")), None) or []
    colors = colormaps["viridis"].resampled(max(len(labels), 2))
    for index, label in enumerate(labels):
        for field, style, marker, width, name in (
            (f"{prefix}_energy_share", "-", "o", 1.4, label),
            (f"{prefix}_control_share", "--", None, 0.9, None),
        ):
            points = [
                (row["step"], values[index])
                for row in rows
                if (values := row.get(field)) and index < len(values) and values[index] is not None
            ]
            if points:
                steps, shares = zip(*points, strict=True)
                line = {"color": colors(index), "marker": marker, "markersize": 3, "linewidth": width, "label": name}
                ax.plot(steps, shares, style, gid=f"{field}:{index}", **line)
    if not labels:
        _not_recorded(ax)
    _finish(ax, rows, "energy share")
    if labels:
        ax.legend(fontsize="x-small", title="bucket", title_fontsize="x-small")


#: The panels: (statistic, y label); the anisotropy share's change has no interval.
_CHANGE_PANELS = (
    ("energy_ratio", "change of the energy ratio (E_T / mean E_N)"),
    ("energy_share", "change of the energy share E_T (fraction)"),
    ("anisotropy_share", "change of the anisotropy share (no interval)"),
)
_CHANGE_COLORS = {"early": "C0", "each": "C1", "given": "C2", "refit": "C4"}


def plot_change(result: SweepResult, *, split_point: str | None = None, tangent: str | None = None) -> Figure:
    """Each checkpoint's change from the first of its curve (energy ratio, energy share, anisotropy share)."""
    splits = _groups(_rows(result, split_point, tangent), "split_point")
    size = (4.6 * len(_CHANGE_PANELS), 3.4 * len(splits) + 1.4)
    figure, grid = _new_figure(size, len(splits), len(_CHANGE_PANELS))
    for axes, (split, split_rows) in zip(grid, splits.items(), strict=True):
        for ax, (name, label) in zip(axes, _CHANGE_PANELS, strict=True):
            _draw_change(ax, name, split_rows)
            _finish(ax, split_rows, label)
            ax.set_title(_plain(f"split point {str(split)[-40:]}"), fontsize="medium")
    figure.suptitle("What training added: change from the first checkpoint (95 % paired bootstrap intervals)")
    handles = {text: handle for ax in grid.flat for handle, text in zip(*ax.get_legend_handles_labels(), strict=True)}
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles))
    return figure


def _draw_change(ax: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """One statistic's change over the steps, a line per tangent kind, its interval as error bars."""
    for index, (kind, kind_rows) in enumerate(_groups(rows, "tangent", "early").items()):
        x, y, yerr = _errors(kind_rows, f"{name}_change", f"{name}_change_low", f"{name}_change_high")
        if x:
            color, label = _CHANGE_COLORS.get(kind, f"C{(index + 5) % 10}"), _plain(f"{kind} tangent")
            line = {"marker": "o", "markersize": 3.5, "linewidth": 1.5, "capsize": 3, "label": label}
            ax.errorbar(x, y, yerr=np.maximum(yerr, 0.0), color=color, gid=f"change:{name}:{kind}", **line)
    ax.axhline(0.0, color="0.5", linestyle="--", linewidth=1.0, label="no change")
    if not ax.containers:
        _not_recorded(ax, "change not recorded")


_LIVE, _SWEEP = "C0", "C3"


def _curves(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Rows by (split point, tangent kind), both as text, each curve in step order."""
    ordered = sorted(rows, key=lambda row: int(row["step"]))
    return _groups(ordered, lambda row: (str(row.get("split_point")), str(row.get("tangent"))))


def _panels(live: SweepResult, sweep: SweepResult) -> list[tuple[str, str, list[dict], str, list[dict]]]:
    """(split point, live kind, live rows, sweep kind, sweep rows) for each live split point the sweep also has."""
    sweep_curves = _curves(sweep.rows)
    panels = []
    for (split, kind), rows in _curves(live.rows).items():
        kinds = [sweep_kind for sweep_split, sweep_kind in sweep_curves if sweep_split == split]
        if kinds:
            chosen = kind if kind in kinds else kinds[0]
            panels.append((split, kind, rows, chosen, sweep_curves[(split, chosen)]))
    if not panels:
        raise InvalidInputError(
            f"The live rows (split points {live.split_points}) and the sweep's ({sweep.split_points}) share no split "
            "point: sweep the checkpoints of the live run at one of its split points."
        )
    return panels


def _draw_live_and_sweep(ax: Axes, live_rows: list[dict], kind: str, sweep_rows: list[dict], sweep_kind: str) -> None:
    """The live curve (its controls' band, E_T) and the sweep's points (E_T with intervals, controls' mean)."""
    steps, low, high, _ = _control_range(live_rows, "control_energy_shares")
    if steps:
        style = {"alpha": 0.18, "linewidth": 0, "gid": f"live_band:{kind}", "label": "live: controls E_N min-max"}
        ax.fill_between(steps, low, high, color=_LIVE, **style)
    label = f"live: {kind} tangent E_T (training batches, each window)"
    style = {"linewidth": 1.5, "marker": ".", "markersize": 3, "gid": f"live_energy:{kind}", "label": label}
    _plot_field(ax, live_rows, "energy_share", color=_LIVE, **style)
    steps, values, yerr = _errors(sweep_rows, "energy_share", "ci_low", "ci_high")
    if steps:
        label = f"post hoc: {sweep_kind} tangent E_T (probe texts, saved checkpoints)"
        style = {"fmt": "o", "markersize": 4, "color": _SWEEP, "capsize": 2.5, "label": label}
        ax.errorbar(steps, values, yerr=np.maximum(yerr, 0), **style).lines[0].set_gid(f"sweep_energy:{sweep_kind}")
    label, gid = "post hoc: controls E_N mean", f"sweep_control_mean:{sweep_kind}"
    _plot_field(ax, sweep_rows, "control_mean", color=_SWEEP, linestyle="--", linewidth=1.0, gid=gid, label=label)


def plot_live_vs_sweep(live: SweepResult, sweep: SweepResult) -> Figure:
    """A `TrainingProbe`'s energy share at every window next to the sweep's, per live curve the sweep probed."""
    if not live.rows or not sweep.rows:
        raise InvalidInputError("Both the live rows and the sweep need rows to be drawn side by side.")
    panels = _panels(live, sweep)
    figure, grid = _new_figure((max(5.2 * len(panels), 7.0), 5.0), 1, len(panels))
    for ax, (split, kind, live_rows, sweep_kind, sweep_rows) in zip(grid[0], panels, strict=True):
        _draw_live_and_sweep(ax, live_rows, kind, sweep_rows, sweep_kind)
        chance = {row["rank"] / row["dim"] for row in live_rows if row.get("rank") and row.get("dim")}
        if len(chance) == 1:
            ax.axhline(chance.pop(), color="grey", linestyle="--", linewidth=0.8, label="chance k/d")
        ylabel = "gradient energy share (fraction of ||G||_F^2)"
        _finish(ax, [*live_rows, *sweep_rows], ylabel, bottom=0.0)
        ax.set_title(f"split point {split}", fontsize="medium")
    handles, labels = grid[0][0].get_legend_handles_labels()
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
