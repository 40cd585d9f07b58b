# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""torch.distributed helpers: sharding, exact all-reduce of streamed sums, gathering of Python objects."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

from .accumulators import MomentAccumulator


def is_distributed() -> bool:
    """Whether a process group with more than one rank is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank (0 outside a process group)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 outside a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def is_main_process() -> bool:
    """Whether this process writes files and shows progress (rank 0)."""
    return rank() == 0


def init_from_environment() -> bool:
    """Initialise the default process group when launched by `torchrun` (WORLD_SIZE > 1) and not yet initialised."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or not dist.is_available():
        return False
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return is_distributed()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of `tensor` over ranks (a new tensor on `tensor`'s device; `tensor` itself when not distributed)."""
    if not is_distributed():
        return tensor
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    buffer = tensor.detach().to(device, copy=True)
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    return buffer.to(tensor.device)


def all_reduce_moments(moments: MomentAccumulator) -> MomentAccumulator:
    """Merge every rank's moments into one accumulator, identical on all ranks (exact: the sums are added)."""
    if not is_distributed():
        return moments
    shift = moments.shift if moments.shift is not None else torch.zeros(moments.dim, dtype=torch.float64)
    shift = broadcast_object(shift.detach().cpu(), src=0).to(moments.device)
    s1, s2 = moments._moved_to(shift)
    merged = MomentAccumulator(moments.dim, moments.device, shift=shift)
    merged.s1 = all_reduce_sum(s1)
    merged.s2 = all_reduce_sum(s2)
    merged.n = all_reduce_sum(moments.n.reshape(1)).reshape(())
    return merged


def all_gather_objects(value: Any) -> list[Any]:
    """Every rank's `value`, in rank order (`[value]` when not distributed)."""
    if not is_distributed():
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def broadcast_object(value: Any, *, src: int = 0) -> Any:
    """Rank `src`'s `value` on every rank."""
    if not is_distributed():
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def barrier() -> None:
    """Wait for every rank (no-op when not distributed)."""
    if is_distributed():
        dist.barrier()
