# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The files of a results directory: ``rows.jsonl`` read and checked line by line, ``config.json``, row order."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ..commons.columns import type_problem
from ..commons.json_files import load_json, parse_json, read_text, read_whole_lines
from ..errors import IncompleteRowWarning, ResultsStoreError

__all__ = [
    "ROWS_FILE",
    "CONFIG_FILE",
    "MAX_STEP",
    "read_rows",
    "row_problem",
    "is_skipped",
    "row_key",
    "check_rows",
    "read_config",
    "sort_rows",
]

#: The rows of a sweep, one JSON object a line, in its results directory.
ROWS_FILE = "rows.jsonl"
#: The settings of a sweep (what a resume must match), in its results directory.
CONFIG_FILE = "config.json"


def read_rows(path: Path, *, appended: bool = False) -> list[dict[str, Any]]:
    """Rows of a ``rows.jsonl`` file (empty when it does not exist), each checked (`row_problem`).

    Args:
        path: The file.
        appended: The file grows by appends while it is read (a live probe's): an unterminated last line is a row
            still being written, or one its writer was killed writing (the next live run cuts it). It is left out,
            with a warning, instead of refused.

    Raises:
        ResultsStoreError: A file too large or not UTF-8, or a line that is not a sweep row (not JSON, nested too
            deep, a `step` that is not an integer in [0, 10**15), a `layer` naming a path or holding markup,
            a number field holding something else), naming the file and the line.
    """
    if not path.exists():
        return []
    text = _whole_lines(path) if appended else read_text(path)
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn = number == len(lines) and not text.endswith("\n")
        cut = " (an interrupted or edited last line)" if torn else ""
        fix = "delete that line (a resume recomputes its checkpoint), or rerun with overwrite=True."
        try:
            row = parse_json(line, path, line=number)
        except ResultsStoreError:
            raise ResultsStoreError(f"Line {number} of {path} is not a sweep row{cut}: {fix}") from None
        problem = row_problem(row)
        if problem is not None:
            raise ResultsStoreError(f"Line {number} of {path} is not a sweep row{cut}: {fix} Found: {problem}.")
        rows.append(row)
    return rows


def _whole_lines(path: Path) -> str:
    """The file's text up to its last newline; warns when an unterminated tail was left out."""
    whole, cut = read_whole_lines(path)
    if cut:
        warnings.warn(
            f"The last line of {path} is unterminated: a live probe is appending it, or was stopped while writing "
            "it (the next live run into this folder removes it). The rows before it are read; it is left out.",
            IncompleteRowWarning,
            stacklevel=4,
        )
    return whole


#: Steps are below this (a crafted step of 10**30 is refused, not carried into file names and tensors).
MAX_STEP = 10**15
_NAME_FIELDS = ("split_point", "tangent", "checkpoint")
_MARKUP = set("<>") | {chr(code) for code in range(32)}
_LAYER = _MARKUP | set("\"'&`/\\")  # a layer also names files and folders


def row_problem(row: Any) -> str | None:
    """What makes `row` no sweep row, None when it is one."""
    if not isinstance(row, dict):
        return "not a JSON object"
    if not _is_step(row.get("step")):
        return f"step {_shown(row.get('step'))} is not an integer in [0, 10**15)"
    if "layer" not in row:
        return "no layer"
    problem = _name_problem(row["layer"], allow_int=True, forbidden=_LAYER)
    if problem:
        return f"layer {_shown(row['layer'])} {problem}"
    for name in _NAME_FIELDS:
        problem = _name_problem(row.get(name), allow_int=False, forbidden=_MARKUP) if name in row else None
        if problem and row[name] is not None:
            return f"{name} {_shown(row[name])} {problem}"
    return type_problem(row)


def _name_problem(value: Any, *, allow_int: bool, forbidden: set[str]) -> str | None:
    """Why `value` cannot name a split point, a tangent kind or a checkpoint (None when it can)."""
    if allow_int and isinstance(value, int) and not isinstance(value, bool):
        return None
    if not isinstance(value, str):
        return "is not a string" + (" or an integer" if allow_int else "")
    if not value.strip() or value in (".", "..") or forbidden & set(value):
        return "is empty, a path, or holds markup or control characters"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_step(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_STEP


def is_skipped(row: dict[str, Any]) -> bool:
    """Whether a row records a checkpoint the sweep skipped (it holds why, not numbers)."""
    return bool(row.get("skipped"))


def row_key(row: dict[str, Any]) -> tuple[int, str, str]:
    """A row's identity in its sweep: (step, split point as given, tangent kind)."""
    return row["step"], str(row["layer"]), str(row.get("tangent", "early"))


def check_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Refuse rows that a sweep cannot have written together: one key twice, or different numbers of controls.

    Raises:
        ResultsStoreError: Naming the file and the rows.
    """
    seen: set[tuple[int, str, str]] = set()
    duplicates = sorted({row_key(row) for row in rows if row_key(row) in seen or seen.add(row_key(row))})
    if duplicates:
        raise ResultsStoreError(
            f"{path} holds rows twice for (step, split point, tangent) {duplicates[:5]}: two runs wrote it at once. "
            "Delete the duplicated lines, or rerun with overwrite=True."
        )
    controls = {
        len(row["control_energy_shares"]) for row in rows if isinstance(row.get("control_energy_shares"), list)
    }
    if len(controls) > 1:
        raise ResultsStoreError(
            f"{path} mixes rows with {sorted(controls)} normal controls: they come from sweeps with other settings. "
            "Rerun with overwrite=True."
        )


def read_config(path: Path) -> dict[str, Any]:
    """A sweep's ``config.json``.

    Raises:
        ResultsStoreError: An unreadable or malformed file, naming it.
    """
    advice = "Rerun the sweep with overwrite=True to start afresh."
    try:
        config = load_json(path, advice=advice)
    except ResultsStoreError as error:
        raise ResultsStoreError(f"{path} is not a readable sweep config: {error}") from None
    if not isinstance(config, dict):
        raise ResultsStoreError(f"{path} is not a sweep config. Rerun the sweep with overwrite=True to start afresh.")
    wrong = [key for key, fits in _CONFIG_SHAPES.items() if key in config and not fits(config[key])]
    if wrong:
        raise ResultsStoreError(
            f"{path} has {', '.join(wrong)} of a wrong type: it was not written by a sweep (or was edited). Rerun "
            "the sweep with overwrite=True to start afresh."
        )
    return config


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: The shape of the config keys a resumed run reads to merge itself in (`extension.merge_configs`).
_CONFIG_SHAPES: dict[str, Any] = {
    "checkpoints": lambda v: isinstance(v, list) and all(isinstance(c, dict) and _int(c.get("step")) for c in v),
    "split_points": lambda v: isinstance(v, list) and all(_int(p) or isinstance(p, str) for p in v),
    "reference": lambda v: v in ("early", "each", "both", "given", "refit"),  # refit: a live probe's
    "given_reference": lambda v: v is None or isinstance(v, dict),
    "early_steps": lambda v: isinstance(v, list) and all(_int(step) for step in v),
    "early_fraction": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by step, then split point, then tangent kind."""
    order = {"early": 0, "given": 1, "each": 2}
    return sorted(rows, key=lambda row: (row["step"], str(row.get("split_point")), order.get(row.get("tangent"), 3)))
