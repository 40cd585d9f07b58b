# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Small dense linear algebra on one CPU thread.

Examples:
    >>> with one_thread():
    ...     torch.get_num_threads()
    1
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["one_thread"]


@functools.cache
def _controller() -> Any:
    """threadpoolctl's view of the loaded BLAS and OpenMP libraries, found once (finding them takes ~4 ms; a live
    probe limits the threads at every window), or None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - scikit-learn (an Interpreto dependency) brings it
        return None
    return ThreadpoolController()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one torch thread and, when threadpoolctl is installed, one BLAS / OpenMP thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        controller = _controller()
        with contextlib.nullcontext() if controller is None else controller.limit(limits=1):
            yield
    finally:
        torch.set_num_threads(previous)
