# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A closed window as a sweep row: a sweep row's identity fields (``checkpoint`` "live-{step}", ``source`` "live"),
every `ProbeResult` field but the per-sequence lists (a window's sequences are its own: nothing pairs them with
another window's), and the window's (``window_*``, ``retrospective``, ``tangent_fitted_at``); each column's
meaning is in `results.schema` (docs/columns.md).
"""

from __future__ import annotations

from typing import Any

from ..probing.result import PER_SEQUENCE_FIELDS, ProbeResult
from .options import ROW_SOURCE

__all__ = ["live_row", "figures"]

#: The `ProbeResult` fields a `TrainingProbe` logs after each window (`figures`): the exact p-values the finding
#: uses, with the anisotropy share, and the paper's approximate `p_value` after them.
LOGGED_FIELDS = tuple(
    "energy_share control_mean energy_ratio p_value_exact anisotropy_share anisotropy_p_value_exact p_value "
    "oracle_energy_share isoscore_star delta_isoscore_star".split()
)


def live_row(
    result: ProbeResult,
    *,
    step: int,
    first_step: int,
    micro_batches: int,
    layer: int | str,
    path: str,
    kind: str,
    retrospective: bool,
    fitted_at: int | None,
) -> dict[str, Any]:
    """The sweep row of one window at one split point (`results.schema` has each column's meaning)."""
    return {
        "step": step,
        "checkpoint": f"live-{step}",
        "source": ROW_SOURCE,
        "revision": None,
        "layer": layer if isinstance(layer, int) else str(layer),
        "split_point": path,
        "tangent": kind,
        **{key: value for key, value in result.to_dict().items() if key not in PER_SEQUENCE_FIELDS},
        "window_first_step": first_step,
        "window_steps": step - first_step + 1,
        "window_micro_batches": micro_batches,
        "retrospective": retrospective,
        "tangent_fitted_at": fitted_at,
    }


def figures(row: dict[str, Any]) -> dict[str, float]:
    """The logged figures of a row, keyed ``anisotropy/<split point>/<field>`` (None values left out)."""
    return {
        f"anisotropy/{row['layer']}/{name}": float(row[name]) for name in LOGGED_FIELDS if row.get(name) is not None
    }
