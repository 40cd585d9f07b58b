# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tensors users hand in, checked; batches moved to the device and values read back without stalling its queue."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..errors import InvalidInputError, NonFiniteError


def as_real_tensor(x: Any, *, name: str, ndim: int | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A torch tensor, NumPy array or nested list as a real floating tensor (a tensor keeps its device and graph)."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biufc":
            raise InvalidInputError(f"{name} must be an array of numbers, got dtype {x.dtype}.")
        x = torch.from_numpy(x)
    elif not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError) as error:
            raise InvalidInputError(f"{name} must be a torch tensor or an array, got {type(x).__name__}.") from error
    if x.is_complex():
        raise InvalidInputError(f"{name} must be real, got dtype {x.dtype}.")
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point():
        x = x.float()
    if ndim is not None and x.dim() != ndim:
        raise InvalidInputError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}.")
    return x


def check_finite(x: torch.Tensor, *, name: str) -> None:
    """Raise `NonFiniteError` if `x` holds NaN or infinity."""
    if bool(torch.isfinite(x.detach().sum())):
        return
    if not bool(torch.isfinite(x).all()):
        raise NonFiniteError(f"{name} holds NaN or infinite values; clean or drop them before calling this.")


def as_float_tensor(x: Any, *, name: str = "input", ndim: int | None = 2) -> torch.Tensor:
    """`as_real_tensor` (float32 for integers, floating dtypes kept) and `check_finite` in one call."""
    x = as_real_tensor(x, name=name, ndim=ndim)
    check_finite(x, name=name)
    return x


def scaled_by_power_of_two(x: torch.Tensor, *, dim: int | None = None) -> torch.Tensor:
    """`x` divided by a power of two that brings its largest magnitude (over all of `x`, or along `dim`) into [0.5, 2)."""
    if x.numel() == 0:
        return x
    peak = x.detach().abs()
    peak = peak.amax() if dim is None else peak.amax(dim=dim, keepdim=True)
    _, exponent = torch.frexp(peak)
    largest = math.frexp(torch.finfo(x.dtype).max)[1] - 1  # 2**largest is the largest finite power of two
    return x / torch.ldexp(torch.ones_like(peak), exponent.clamp(max=largest))


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
    """threadpoolctl's view of the BLAS and OpenMP libraries, found once (it takes ~4 ms), or None without it."""
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
