# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What the package shows: its progress bars, transformers kept quiet, and results in a notebook (repr, HTML)."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
from collections.abc import Iterator, Sequence
from html import escape
from typing import Any

from tqdm.auto import tqdm

#: Set to 1 (true, yes, on) to hide every bar of the package.
DISABLE_ENV_VAR = "INTERPRETO_ANISOTROPY_DISABLE_PROGRESS_BARS"
_switched_off: bool | None = None  # set by disable_/enable_progress_bars; None: the environment variable says


def disable_progress_bars() -> None:
    """Hide every progress bar of the package, whatever a call's `progress` asks."""
    global _switched_off
    _switched_off = True


def enable_progress_bars() -> None:
    """Let calls show their bars again (`TQDM_DISABLE` still hides them), whatever the environment variable says."""
    global _switched_off
    _switched_off = False


def are_progress_bars_disabled() -> bool:
    """Whether the package's switch is off (`disable_progress_bars`, else the environment variable)."""
    return _env_flag(DISABLE_ENV_VAR) if _switched_off is None else _switched_off


def shows(progress: bool | None) -> bool:
    """Whether a bar asked for with `progress` (True, False, or None: when interactive) shows now."""
    if are_progress_bars_disabled() or _env_flag("TQDM_DISABLE"):
        return False
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)  # a terminal, or a Jupyter kernel (no terminal, yet tqdm's bars show)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def progress_bar(iterable: Any = None, *, progress: bool | None, **options: Any) -> tqdm:
    """A tqdm bar over `iterable` (tqdm's keyword `options`: `total`, `desc`, `unit`, ...), shown as `shows` says."""
    return tqdm(iterable, **options) if shows(progress) else tqdm(iterable, disable=True, **options)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and its warnings (errors still show) inside the block; restore after."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def number(value: Any, digits: int = 4) -> str:
    """A value as a repr shows it: numbers plainly, floats to `digits` significant digits, the rest as `repr`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))  # numpy's integers too, without their type's name
    return "nan" if math.isnan(value) else f"{float(value):.{digits}g}"


def short_repr(kind: str, fields: Sequence[tuple[str, Any]], *, tail: Sequence[str] = ()) -> str:
    """`kind(name=value, ...; tail; ...)`, each value through `number`."""
    return f"{kind}({'; '.join([', '.join(f'{name}={number(value)}' for name, value in fields), *tail])})"


def html_table(
    title: str, header: Sequence[str] | None, rows: Sequence[Sequence[Any]], *, notes: Sequence[str] = ()
) -> str:
    """A titled HTML table (a header row when `header`), then `notes` as paragraphs; every cell is escaped."""
    head = "" if header is None else "<tr>" + "".join(f"<th>{escape(str(cell))}</th>" for cell in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    said = "".join(f"<p>{escape(line)}</p>" for line in notes)
    return f"<div><strong>{escape(title)}</strong>{said}<table>{head}{body}</table></div>"
