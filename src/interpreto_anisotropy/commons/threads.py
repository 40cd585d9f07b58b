# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Small dense linear algebra on one CPU thread.

Between the big products of a training step, torch's OpenMP threads keep spinning; a LAPACK call (scipy's
eigensolver, small matrix products) that starts its own BLAS threads then fights them for the cores, and a 256 x 256
eigendecomposition can take 30 times longer than on one thread (0.35 s instead of 0.013 s on 2 busy cores). The
live probe's window statistics run inside `one_thread()`.

Examples:
    >>> with one_thread():
    ...     torch.get_num_threads()
    1
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one torch thread and, when threadpoolctl is installed, one BLAS / OpenMP thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - scikit-learn (an Interpreto dependency) brings it
            limits = contextlib.nullcontext()
        else:
            limits = threadpool_limits(1)
        with limits:
            yield
    finally:
        torch.set_num_threads(previous)
