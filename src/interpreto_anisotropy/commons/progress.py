# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package's progress bars: tqdm's, shown when asked, unless `TQDM_DISABLE` or the package's switch hides them;
and quiet calls into transformers (`quiet_transformers`: no "Loading weights" bar, no warning meant for its own users)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
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
