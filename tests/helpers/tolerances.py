# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tolerances for differences of close quantities (ΔIsoScore*, the anisotropy share, and the like).

Two computations of the same quantity (live and post hoc, two ranks and one process, float32 and float64) agree
on each *term* x, y to a relative tolerance ``rtol`` that the tests check on the terms themselves: rounding of a
sum of n products in precision eps is at most about ``c * eps * sqrt(n)`` relatively (a random walk of n
roundings, each below eps/2; c a small constant for the terms' other operations), and the tests' term tolerances
are chosen above it (e.g. 1e-6 for float32 products over a 64-wide hidden state: 1.2e-7 * 8 = 1e-6).

A difference d = x - y carries its terms' absolute errors, not a share of itself:

    |d_1 - d_2| <= |x_1 - x_2| + |y_1 - y_2| <= rtol * (|x| + |y|).

So its relative error is rtol * (|x| + |y|) / |d|, unbounded as x and y get close (ΔIsoScore* of 0.03 between
IsoScore*s of 0.8: 50 times the terms'), and it moves with the CPU, the BLAS kernel and the thread count. Such a
difference is compared with the terms' rtol *plus* ``atol = rtol * (|x| + |y|)`` (`difference_atol`): no looser
than the terms, and exactly what their agreement allows. A bug in the difference itself (a wrong sign, a wrong
term) moves it by the order of the terms, far above this atol.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def rounding_rtol(dtype: torch.dtype | np.dtype, n: int, *, c: float = 1.0) -> float:
    """``c * eps(dtype) * sqrt(n)``: the relative rounding of a sum of `n` products in `dtype` (random walk)."""
    eps = torch.finfo(dtype).eps if isinstance(dtype, torch.dtype) else float(np.finfo(dtype).eps)
    return c * eps * math.sqrt(n)


def difference_atol(*terms, rtol: float) -> float:
    """``rtol * (|x| + |y| + ...)``: the absolute tolerance of a difference of `terms` each known to `rtol`.

    Each term may be a number or an array (its largest magnitude is taken).
    """
    return rtol * sum(float(np.max(np.abs(np.asarray(term, dtype=np.float64)), initial=0.0)) for term in terms)


def assert_difference_close(actual, expected, *terms, rtol: float, err_msg: str = "") -> None:
    """`actual` equals `expected` (a difference of `terms`, each known to `rtol`) to ``rtol`` plus the terms'
    `difference_atol`."""
    atol = difference_atol(*terms, rtol=rtol)
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol,
        err_msg=err_msg,
    )  # fmt: skip
