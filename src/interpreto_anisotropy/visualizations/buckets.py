# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The energy share by token frequency and by position over training: which tokens carry the tangent's energy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..errors import EmptyInputError
from .steps import step_axis

if TYPE_CHECKING:  # pragma: no cover
    from ..results.table import SweepResult

__all__ = ["plot_energy_by_bucket"]

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
        EmptyInputError: If the sweep, or its selection, has no row.

    Examples:
        >>> plot_energy_by_bucket(table).savefig("buckets.png")  # doctest: +SKIP
    """
    rows = result.select(split_point=split_point).rows
    if not rows:
        raise EmptyInputError("The sweep has no row to plot (for this split point).")
    kinds = list(dict.fromkeys(row.get("tangent") for row in rows))
    kind = tangent or ("early" if "early" in kinds else kinds[0])
    rows = [row for row in rows if row.get("tangent") == kind]
    if not rows:
        raise EmptyInputError(f"The sweep has no row of tangent kind {kind!r}.")
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
