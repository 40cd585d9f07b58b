# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Quiet calls into transformers: no "Loading weights" progress bar, no warning meant for its own users.

Examples:
    >>> with quiet_transformers():
    ...     pass  # AutoModel.from_pretrained(...) here shows no progress bar
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["quiet_transformers"]


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
