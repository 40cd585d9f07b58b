# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The training-step axis every sweep figure shares: symlog (step 0 visible), ticks 0, 1, 10, ..., 1k, 1M."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

__all__ = ["STEP_LABEL", "format_step", "step_axis"]

#: The x-axis label of every figure over training.
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
