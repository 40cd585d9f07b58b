# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""An emulated accelerator, "emu", that fails as CUDA fails and counts what would make the host wait for it.

No GPU in CI, and the CPU keeps every tensor on one device: a tensor made on the CPU that meets the model's tensors,
or a read of a device value inside a per-batch loop, only shows on a real GPU. Here PyTorch's spare backend
(PrivateUse1) is renamed "emu"; its tensors are `EmulatedTensor`, a wrapper subclass holding CPU values, and
`EmulatedDevice` (a `TorchDispatchMode`) runs every operation on the CPU values after checking it as CUDA would:

* CPU and emu tensors in one operation raise `DeviceMixError` (0-dim CPU tensors are allowed, as CUDA allows them;
  an emu tensor indexed by CPU indices is allowed, a CPU tensor indexed by emu indices is not);
* a random draw on the emu device with a CPU generator raises, as on CUDA;
* every read back to the host (`.item()`, `bool(t)`, `.tolist()`, `.cpu()`, `nonzero`, `masked_select`, boolean-mask
  indexing, ...) and every blocking host-to-device copy (`torch.tensor(list, device=...)`, `.to(device)` without
  `non_blocking=True`) is counted by the `file:line` of our package that asked for it (`syncs`), other libraries'
  under `ELSEWHERE`. On CUDA each of these waits for the device's queue.

`model.to(EMU)` moves a model (its parameters become `EmulatedTensor`), and autograd runs through it.
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import interpreto_anisotropy as ia

NAME = "emu"
PACKAGE = str(Path(ia.__file__).parent)
ELSEWHERE = "<not our code>"

#: Operations that read device values on the host (CUDA synchronises the stream for each).
HOST_READS = {
    "_local_scalar_dense",
    "is_nonzero",
    "equal",
    "nonzero",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "bincount",
    "argwhere",
}
INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}
_RANDOM = {"rand", "randn", "randint", "randperm", "normal", "uniform_", "normal_", "bernoulli", "bernoulli_"}


class DeviceMixError(RuntimeError):
    """CPU and emu tensors met in one operation (CUDA raises a RuntimeError there)."""


class _Backend:
    """`torch.emu`: what torch asks of a device module (autocast, seeding, availability).

    Available only inside an `EmulatedDevice` block: outside it, libraries that probe every backend (a Trainer saving
    RNG states, accelerate's memory checks) must see no such device, as on a machine without one.
    """

    @staticmethod
    def is_available() -> bool:
        return bool(_ACTIVE)

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1 if _ACTIVE else 0

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        pass

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.empty(0, dtype=torch.uint8)

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        pass

    @staticmethod
    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass


def _register() -> torch.device:
    if torch._C._get_privateuse1_backend_name() != NAME:
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(NAME, backend_module=_Backend())
    return torch.device(NAME, 0)


EMU = _register()


class EmulatedTensor(torch.Tensor):
    """A tensor on the emu device; its values are `value`, a CPU tensor of the same shape, strides and dtype."""

    value: torch.Tensor

    @staticmethod
    def __new__(cls, value: torch.Tensor, requires_grad: bool = False):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            value.shape,
            strides=value.stride(),
            storage_offset=value.storage_offset(),
            dtype=value.dtype,
            layout=value.layout,
            device=EMU,
            requires_grad=requires_grad,
        )

    def __init__(self, value: torch.Tensor, requires_grad: bool = False):
        self.value = value

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        with EmulatedDevice():  # outside a mode (results read after a run): checked, not counted
            return func(*args, **(kwargs or {}))

    def __repr__(self) -> str:
        return f"EmulatedTensor({self.value!r})"

    def tolist(self) -> Any:
        """A read back to the host, as on CUDA (counted by the active `EmulatedDevice`)."""
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False) -> Any:
        """Refused, as for a CUDA tensor (`force=True`: copied to the host first, counted)."""
        if not force:
            raise TypeError(f"can't convert {NAME}:0 device type tensor to numpy. Use Tensor.cpu() first.")
        return self.cpu().numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.numpy()

    def __deepcopy__(self, memo: dict) -> EmulatedTensor:
        copied = EmulatedTensor(self.value.detach().clone(), requires_grad=self.requires_grad)
        if getattr(self, "_is_param", False):
            copied._is_param = True
        memo[id(self)] = copied
        return copied


def _is_emu_device(device: Any) -> bool:
    return device is not None and torch.device(device).type == NAME


_ACTIVE: list[EmulatedDevice] = []


def _kernel(name: str):
    """Register a PrivateUse1 kernel: `torch.tensor(data, device=EMU)` reaches these below the Python modes."""
    return torch.library.impl(f"aten::{name}", "privateuseone")


@_kernel("empty.memory_format")
def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return EmulatedTensor(torch.empty(size, dtype=dtype, layout=layout))


@_kernel("empty_strided")
def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return EmulatedTensor(torch.empty_strided(size, stride, dtype=dtype, layout=layout))


@_kernel("_copy_from")
def _copy_from(source, destination, non_blocking=False):
    if _ACTIVE:
        _ACTIVE[-1]._count()  # `torch.tensor(data, device=...)`: a blocking host-to-device copy
    _unwrap(destination).copy_(_unwrap(source))
    return destination


class EmulatedDevice(TorchDispatchMode):
    """Runs emu tensors' operations on their CPU values, refusing device mixes and counting host synchronisations.

    Attributes:
        syncs: `file:line` of our package -> how many reads or blocking copies it caused (`ELSEWHERE`: other code).
    """

    def __init__(self):
        super().__init__()
        self.syncs: Counter[str] = Counter()
        self.counting = True

    def __enter__(self):
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc_info):
        _ACTIVE.remove(self)
        return super().__exit__(*exc_info)

    @contextmanager
    def paused(self):
        """Operations inside are run and checked, but not counted (e.g. moving a model once, before a run)."""
        self.counting, before = False, self.counting
        try:
            yield
        finally:
            self.counting = before

    def ours(self) -> Counter[str]:
        """The synchronisations caused by our package, by `file:line`."""
        return Counter({site: n for site, n in self.syncs.items() if site != ELSEWHERE})

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        tensors = [value for value in flat if isinstance(value, torch.Tensor)]
        on_device = [value for value in tensors if isinstance(value, EmulatedTensor)]
        device_kwarg = _is_emu_device(kwargs.get("device"))
        if not on_device and not device_kwarg:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name == "_to_copy":
            return self._to_copy(args[0], kwargs)
        if name == "copy_":
            return self._copy(args[0], args[1], kwargs.get("non_blocking", args[2] if len(args) > 2 else False))
        self._check(name, args, kwargs, tensors)
        if name in HOST_READS or (name in INDEXING and _has_device_mask(args[1])):
            self._count()
        cpu_args, cpu_kwargs = tree_map(_unwrap, (args, kwargs))
        if device_kwarg:
            cpu_kwargs["device"] = torch.device("cpu")
        result = func(*cpu_args, **cpu_kwargs)
        if name in ("_local_scalar_dense", "is_nonzero", "equal"):
            return result
        inputs = {id(_unwrap(value)): value for value in on_device}
        return tree_map(lambda out: _wrap(out, inputs), result)

    # ------------------------------------------------------------------ checks
    def _check(self, name: str, args: tuple, kwargs: dict, tensors: list[torch.Tensor]) -> None:
        if name in INDEXING:
            indexed, indices = args[0], [i for i in _flat(args[1]) if isinstance(i, torch.Tensor)]
            if not isinstance(indexed, EmulatedTensor) and any(isinstance(i, EmulatedTensor) for i in indices):
                raise DeviceMixError(
                    f"{name}: indices on {NAME} into a CPU tensor (CUDA: indices should be either on cpu or on the "
                    "same device as the indexed tensor)"
                )
            if isinstance(indexed, EmulatedTensor) and any(i.device.type == "cpu" and i.dim() > 0 for i in indices):
                self._count()  # CUDA copies CPU indices to the device, blocking
            tensors = [args[0], *[value for value in args[2:] if isinstance(value, torch.Tensor)]]
        cpu = [value for value in tensors if not isinstance(value, EmulatedTensor) and value.dim() > 0]
        if cpu:
            raise DeviceMixError(
                f"{name}: expected all tensors to be on the same device, but found {NAME} and cpu tensors "
                f"(CPU shapes {[tuple(value.shape) for value in cpu]})"
            )
        generator = kwargs.get("generator")
        if name in _RANDOM and generator is not None and generator.device.type != NAME:
            raise DeviceMixError(f"{name}: a {generator.device.type} generator for a draw on {NAME}")

    def _to_copy(self, source: torch.Tensor, kwargs: dict) -> torch.Tensor:
        target = kwargs.get("device")
        to_device = _is_emu_device(target) or (target is None and isinstance(source, EmulatedTensor))
        cpu_kwargs = {**kwargs, "device": torch.device("cpu")}
        cpu_kwargs.pop("non_blocking", None)
        if isinstance(source, EmulatedTensor) and not to_device:
            self._count()  # a read back to the host
        elif not isinstance(source, EmulatedTensor) and not kwargs.get("non_blocking", False):
            self._count()  # a blocking host-to-device copy
        copied = torch.ops.aten._to_copy.default(_unwrap(source), **cpu_kwargs)
        return EmulatedTensor(copied) if to_device else copied

    def _copy(self, destination: torch.Tensor, source: torch.Tensor, non_blocking: bool) -> torch.Tensor:
        if isinstance(destination, EmulatedTensor) != isinstance(source, EmulatedTensor):
            if isinstance(source, EmulatedTensor) or not non_blocking:
                self._count()
        _unwrap(destination).copy_(_unwrap(source))
        return destination

    def _count(self) -> None:
        if self.counting:
            self.syncs[_our_caller() or ELSEWHERE] += 1


def _flat(indices: Any) -> list:
    return list(indices) if isinstance(indices, (list, tuple)) else [indices]


def _has_device_mask(indices: Any) -> bool:
    return any(isinstance(i, EmulatedTensor) and i.dtype in (torch.bool, torch.uint8) for i in _flat(indices))


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, EmulatedTensor) else value


def _wrap(value: Any, inputs: dict[int, torch.Tensor]) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    if id(value) in inputs:  # an in-place operation returns its input
        return _with_value_layout(inputs[id(value)])
    return EmulatedTensor(value)


def _with_value_layout(tensor: EmulatedTensor) -> EmulatedTensor:
    """The wrapper's sizes and strides set to its value's after an in-place view (`squeeze_` in `vector @ matrix`)."""
    value = tensor.value
    if tensor.shape != value.shape or tensor.stride() != value.stride():
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
            torch.ops.aten.as_strided_.default(tensor, value.shape, value.stride(), value.storage_offset())
    return tensor


def _our_caller() -> str | None:
    """The innermost frame of our package, unless another library (transformers, tqdm) stands between."""
    frame = sys._getframe(3)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(PACKAGE):
            return f"{Path(filename).relative_to(PACKAGE).as_posix()}:{frame.f_lineno}"
        if not any(part in filename for part in ("torch", "contextlib", "_python_dispatch", __file__)):
            return None
        frame = frame.f_back
    return None
