# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The one validator of tensors that users hand in: array-likes to real torch tensors, with our errors."""

from __future__ import annotations

import math
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
