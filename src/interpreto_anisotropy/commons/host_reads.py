# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Moving batches to the device and reading device values back without stalling the device's queue; small dense
linear algebra on one CPU thread (`one_thread`)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Copy a batch to `device` without blocking the host (CPU tensors go to CUDA through pinned memory)."""
    return {key: copied_to(value, device) for key, value in batch.items()}


def copied_to(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """`tensor` on `device`, copied without blocking the host (a CPU tensor goes to CUDA through pinned memory)."""
    device = torch.device(device)
    if device.type == "cpu":
        return tensor.to(device)
    pinned = tensor.pin_memory() if device.type == "cuda" and tensor.device.type == "cpu" else tensor
    return pinned.to(device, non_blocking=True)


class LaggedRead:
    """Read a device scalar on the host one step late, so that the read does not wait for queued work."""

    def __init__(self) -> None:
        self._pending: tuple[torch.Tensor, torch.cuda.Event] | None = None

    def push(self, value: torch.Tensor) -> torch.Tensor | None:
        """Start reading `value`; return the latest value whose read has completed (None before any has)."""
        if value.device.type != "cuda":
            return value.cpu()
        host = torch.empty(value.shape, dtype=value.dtype, pin_memory=True)
        host.copy_(value.detach(), non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(value.device))
        previous, self._pending = self._pending, (host, event)
        if previous is None:
            return None
        previous[1].synchronize()
        return previous[0]


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
