# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The tolerance of a difference of close quantities (tests/helpers/tolerances.py) and the margin recorder
(tests/helpers/margins_plugin.py, run by benchmarks/margins/test_margins.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tolerances import assert_difference_close, difference_atol, rounding_rtol

pytest_plugins = ["pytester"]


def test_a_difference_keeps_its_terms_rounding_and_no_more():
    """Two IsoScore*-like terms of 0.8 rounded to float32: their difference is known to their rounding, not to a
    share of itself; a difference off by the order of the terms (a wrong sign) is still refused."""
    generator = np.random.default_rng(0)
    x = 0.8 + generator.normal(0, 1e-2, 1000)
    y = x - 3e-4 * generator.uniform(1, 2, 1000)  # differences of order 1e-4, as ΔIsoScore* can be
    exact = x - y
    rounded = x.astype(np.float32).astype(np.float64) - y.astype(np.float32).astype(np.float64)
    rtol = rounding_rtol(torch.float32, n=1)  # the terms are single roundings: eps32 relatively
    np.testing.assert_allclose(x.astype(np.float32), x, rtol=rtol)
    assert np.max(np.abs(rounded - exact) / np.abs(exact)) > 10 * rtol  # a relative test of the difference fails
    assert_difference_close(rounded, exact, x, y, rtol=rtol)
    with pytest.raises(AssertionError):
        assert_difference_close(-rounded, exact, x, y, rtol=rtol)
    assert difference_atol(0.5, [-0.25, 0.75], rtol=1e-6) == pytest.approx(1.25e-6, rel=1e-12)


def test_the_margins_plugin_records_each_comparisons_worst_fraction_of_its_tolerance(pytester, monkeypatch):
    pytester.makepyfile(
        test_sample="""
        import numpy as np
        import pytest
        import torch

        def test_compare():
            assert 1.0 == pytest.approx(1.05, abs=0.1)  # 0.5 of its tolerance
            np.testing.assert_allclose([1.0, 2.0], [1.01, 2.0], rtol=0.1)  # 0.01 / 0.101
            torch.testing.assert_close(torch.tensor([1.0]), torch.tensor([1.2]), rtol=0, atol=0.8)  # 0.25
            assert not np.allclose(1.0, 2.0)  # a negative use: not recorded
        """
    )
    out = pytester.path / "margins.json"
    tests = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tests), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("-p", "helpers.margins_plugin", "--margins-out", str(out))
    result.assert_outcomes(passed=1)
    records = {record["kind"]: record for record in json.loads(out.read_text())}
    assert set(records) == {"pytest.approx", "numpy.testing.assert_allclose", "torch.testing.assert_close"}
    assert records["pytest.approx"]["fraction"] == pytest.approx(0.5, rel=1e-9)
    assert records["numpy.testing.assert_allclose"]["fraction"] == pytest.approx(0.01 / 0.101, rel=1e-9)
    assert records["torch.testing.assert_close"]["fraction"] == pytest.approx(0.25, rel=1e-6)
    lines = {kind: int(record["site"].removeprefix("test_sample.py:")) for kind, record in records.items()}
    assert lines == {"pytest.approx": 6, "numpy.testing.assert_allclose": 7, "torch.testing.assert_close": 8}
