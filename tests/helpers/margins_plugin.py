# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A pytest plugin: how close each tolerance comparison came to failing (benchmarks/margins/test_margins.py).

Loaded only through ``-p helpers.margins_plugin`` (with tests/ on PYTHONPATH); it changes no result. It wraps the
comparisons the tests use: ``torch.testing.assert_close``, ``numpy.testing.assert_allclose``, ``np.allclose``,
``np.isclose``, ``torch.allclose``, ``torch.isclose``, ``math.isclose`` and ``pytest.approx`` (its scalar ``==``,
through which sequences, mappings and arrays compare too). The project's own helpers that compare with a tolerance
(tests/helpers/live_kit.py, tests/helpers/tolerances.py) call these, so they are recorded at their call site.
Not recorded: bare ``error < tolerance`` assertions (principal angles, tests/test_probe.py's norm-wise relative
errors) and the golden files' rules (tests/helpers/golden.py reports its own ratios: benchmarks/golden_paths.py).

For each call it computes the worst error as a fraction of its tolerance, elementwise
``max(|a - b| / (atol + rtol * |b|))`` (``max(rel * |b|, abs)`` for pytest.approx, ``max(rel * max(|a|, |b|),
abs)`` for math.isclose, as each defines it), and keeps the largest per call site (the innermost frame in tests/)
and field (``err_msg``/``msg`` when the call names one) and test; the call site is the first frame outside this
plugin and tests/helpers/tolerances.py, so a difference shows at its caller's line. Comparisons with no tolerance
(exact ones) are not recorded. The boolean ones (``allclose``, ``isclose``, ``approx``) are recorded only when they
hold, so that ``assert not np.allclose(...)`` is not read as a near miss; a failed assertion is recorded only when
its test fails, so that one a test expects to fail (``pytest.raises``) is not either.

Options: ``--margins-out PATH`` (JSON written at the end of the session) and ``--matmul-precision`` ("highest",
"high" or "medium": torch.set_float32_matmul_precision for the session).
"""

from __future__ import annotations

import functools
import json
import math
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

ApproxScalar = type(pytest.approx(1.0))

TESTS = Path(__file__).resolve().parents[1]
_SKIPPED = {Path(__file__).resolve(), TESTS / "helpers" / "tolerances.py"}  # helpers whose caller is the site
_state = threading.local()
_records: dict[tuple[str, str, str], dict] = {}
_failures: list[tuple] = []  # this test's failed assertions: recorded only if the test fails
_current = {"test": "<collection>"}


def pytest_addoption(parser):
    parser.addoption("--margins-out", default=None, help="margins_plugin: write the recorded margins (JSON) here")
    parser.addoption("--matmul-precision", default=None, help="margins_plugin: torch.set_float32_matmul_precision")


def pytest_configure(config):
    precision = config.getoption("--matmul-precision")
    if precision:
        torch.set_float32_matmul_precision(precision)
    _install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    _current["test"] = item.nodeid
    _failures.clear()
    try:
        result = yield
    except BaseException:
        for failure in _failures:
            _keep(*failure)
        raise
    finally:
        _failures.clear()
        _current["test"] = "<fixture>"
    return result


def pytest_sessionfinish(session):
    out = session.config.getoption("--margins-out")
    if out:
        Path(out).write_text(json.dumps(sorted(_records.values(), key=lambda r: -r["fraction"]), indent=1))


# ------------------------------------------------------------------------------------------------ recording
def _call_site() -> str:
    """The innermost caller in tests/ (or in any test_*.py file) outside `_SKIPPED`: "tests/file.py:line"."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path not in _SKIPPED and (TESTS in path.parents or path.name.startswith("test_")):
            where = path.relative_to(TESTS.parent) if TESTS in path.parents else path.name
            return f"{where}:{frame.f_lineno}"
        frame = frame.f_back
    return "<outside tests>"


def _record(kind: str, fraction: float, tolerance: str, field: object = "", *, passed: bool = True) -> None:
    if math.isnan(fraction):
        return
    entry = (_call_site(), field if isinstance(field, str) else "", kind, fraction, tolerance)
    if passed:
        _keep(*entry)
    else:
        _failures.append(entry)


def _keep(site: str, field: str, kind: str, fraction: float, tolerance: str) -> None:
    key = (site, field, _current["test"])
    record = _records.setdefault(
        key, {"site": site, "field": field, "test": _current["test"], "kind": kind, "fraction": 0.0, "calls": 0}
    )
    record["calls"] += 1
    if fraction >= record["fraction"]:
        record.update(fraction=float(fraction), tolerance=tolerance)


def _numbers(value) -> np.ndarray | None:
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.dtype == torch.bool:
            return None
        return value.detach().cpu().double().numpy()
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything that is not numbers is not recorded
        return None
    if array.dtype.kind not in "fiu":
        return None
    return array.astype(np.float64)


def _fraction(actual, expected, rtol: float, atol: float) -> float | None:
    """max |a - b| / (atol + rtol |b|) over the finite elements (non-finite ones must be equal; they are skipped)."""
    a, b = _numbers(actual), _numbers(expected)
    if a is None or b is None or (rtol == 0 and atol == 0):
        return None
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        return None
    finite = np.isfinite(a) & np.isfinite(b)
    error, tolerance = np.abs(a - b)[finite], (atol + rtol * np.abs(b))[finite]
    if error.size == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(error == 0, 0.0, error / tolerance)
    return float(np.max(ratios))


def _guarded(function):
    """Record only the outermost wrapped comparison (allclose may call isclose)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if getattr(_state, "inside", False):
            return function.__wrapped_original__(*args, **kwargs)
        _state.inside = True
        try:
            return function(*args, **kwargs)
        finally:
            _state.inside = False

    return wrapper


def _leaves(actual, expected):
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        for key in actual.keys() & expected.keys():
            yield from _leaves(actual[key], expected[key])
    elif isinstance(actual, list | tuple) and isinstance(expected, list | tuple) and len(actual) == len(expected):
        for a, b in zip(actual, expected, strict=True):
            yield from _leaves(a, b)
    else:
        yield actual, expected


def _torch_defaults(a, b) -> tuple[float, float]:
    from torch.testing._comparison import default_tolerances

    tensors = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64) for x in (a, b)]
    try:
        return default_tolerances(*tensors)
    except Exception:  # noqa: BLE001
        return 1e-7, 1e-7


def _wrap_assert_close(original):
    def assert_close(actual, expected, *args, rtol=None, atol=None, **kwargs):
        passed = False
        try:
            result = original(actual, expected, *args, rtol=rtol, atol=atol, **kwargs)
            passed = True
            return result
        finally:
            worst = None
            for a, b in _leaves(actual, expected):
                r, t = (rtol, atol) if rtol is not None else _torch_defaults(a, b)
                fraction = _fraction(a, b, r, t)
                worst = fraction if worst is None or (fraction is not None and fraction > worst) else worst
            if worst is not None:
                tolerance = f"rtol={rtol} atol={atol}" if rtol is not None else "default"
                _record("torch.testing.assert_close", worst, tolerance, kwargs.get("msg", ""), passed=passed)

    assert_close.__wrapped_original__ = original
    return _guarded(functools.wraps(original)(assert_close))


def _wrap_assert_allclose(original):
    def assert_allclose(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
        passed = False
        try:
            result = original(actual, desired, rtol, atol, *args, **kwargs)
            passed = True
            return result
        finally:
            fraction = _fraction(actual, desired, rtol, atol)
            if fraction is not None:
                field = kwargs.get("err_msg", args[1] if len(args) > 1 else "")  # (equal_nan, err_msg, ...)
                tolerance = f"rtol={rtol:g} atol={atol:g}"
                _record("numpy.testing.assert_allclose", fraction, tolerance, field, passed=passed)

    assert_allclose.__wrapped_original__ = original
    return _guarded(functools.wraps(original)(assert_allclose))


def _wrap_boolean(original, name: str, rtol_default: float, atol_default: float):
    def close(a, b, *args, **kwargs):
        result = original(a, b, *args, **kwargs)
        rtol = kwargs.get("rtol", args[0] if args else rtol_default)
        atol = kwargs.get("atol", args[1] if len(args) > 1 else atol_default)
        holds = bool(result.all()) if hasattr(result, "all") else bool(result)
        if holds:
            fraction = _fraction(a, b, rtol, atol)
            if fraction is not None:
                _record(name, fraction, f"rtol={rtol:g} atol={atol:g}")
        return result

    close.__wrapped_original__ = original
    return _guarded(functools.wraps(original)(close))


def _wrap_math_isclose(original):
    def isclose(a, b, *, rel_tol=1e-9, abs_tol=0.0):
        result = original(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
        tolerance = max(rel_tol * max(abs(a), abs(b)), abs_tol)
        if result and tolerance > 0 and math.isfinite(a) and math.isfinite(b):
            _record("math.isclose", abs(a - b) / tolerance, f"rel_tol={rel_tol:g} abs_tol={abs_tol:g}")
        return result

    isclose.__wrapped_original__ = original
    return _guarded(isclose)


def _wrap_approx_eq(original):
    def __eq__(self, actual):  # noqa: N807
        result = original(self, actual)
        if result is True and not getattr(_state, "inside", False):
            try:
                tolerance, error = float(self.tolerance), abs(float(actual) - float(self.expected))
            except (TypeError, ValueError):
                return result
            if tolerance > 0 and math.isfinite(tolerance) and math.isfinite(error):
                _record("pytest.approx", error / tolerance, f"rel={self.rel} abs={self.abs}")
        return result

    return __eq__


def _install() -> None:
    if getattr(np.testing, "_margins_installed", False):
        return
    np.testing._margins_installed = True
    torch.testing.assert_close = _wrap_assert_close(torch.testing.assert_close)
    np.testing.assert_allclose = _wrap_assert_allclose(np.testing.assert_allclose)
    np.allclose = _wrap_boolean(np.allclose, "np.allclose", 1e-5, 1e-8)
    np.isclose = _wrap_boolean(np.isclose, "np.isclose", 1e-5, 1e-8)
    torch.allclose = _wrap_boolean(torch.allclose, "torch.allclose", 1e-5, 1e-8)
    torch.isclose = _wrap_boolean(torch.isclose, "torch.isclose", 1e-5, 1e-8)
    math.isclose = _wrap_math_isclose(math.isclose)
    ApproxScalar.__eq__ = _wrap_approx_eq(ApproxScalar.__eq__)
