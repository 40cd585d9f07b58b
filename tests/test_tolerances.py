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
    # The terms are single roundings, within eps32 / 2 relatively; known here to 10 eps32, so that every comparison
    # below keeps the 10x margin that benchmarks/margins asks of a tolerance (20x on the terms and their difference).
    rtol = rounding_rtol(torch.float32, n=1, c=10.0)
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

        from helpers.tolerances import assert_difference_close

        def test_compare():
            assert 1.0 == pytest.approx(1.25, abs=0.5)  # 0.5 of its tolerance
            np.testing.assert_allclose([1.0, 2.0], [1.25, 2.0], rtol=1.0)  # 0.25 / 1.25
            torch.testing.assert_close(torch.tensor([1.0]), torch.tensor([1.5]), rtol=0, atol=2.0)  # 0.25
            assert not np.allclose(1.0, 2.0)  # a negative use: not recorded
            with pytest.raises(AssertionError):  # an expected failure: not recorded
                np.testing.assert_allclose(1.0, 2.0, rtol=0.1)
            assert_difference_close(0.25 + 2**-22, 0.25, 1.0, 0.75, rtol=2**-19, err_msg="delta")  # 2^-22 / 2^-18

        def test_fails():
            np.testing.assert_allclose(1.0, 1.5, rtol=0.25, err_msg="missed")  # 0.5 / 0.375: a failure, recorded
        """
    )
    out = pytester.path / "margins.json"
    tests = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tests), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("-p", "helpers.margins_plugin", "--margins-out", str(out))
    result.assert_outcomes(passed=1, failed=1)
    records = {(record["site"], record["field"]): record for record in json.loads(out.read_text())}
    # Every fraction is a ratio of binary fractions: exact in float64 (and float32).
    assert {site: record["fraction"] for site, record in records.items()} == {
        ("test_sample.py:8", ""): 0.5,
        ("test_sample.py:9", ""): 0.25 / 1.25,
        ("test_sample.py:10", ""): 0.25,
        ("test_sample.py:14", "delta"): 2**-22 / (2**-19 * (1.0 + 0.75) + 2**-19 * 0.25),  # at its caller's line
        ("test_sample.py:17", "missed"): 0.5 / 0.375,
    }
