# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Adjusted p-values over a sweep's rows: Holm against its step-down definition written as a loop,
Benjamini-Hochberg against its step-up definition and scipy, families of rows, and the table's method."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import false_discovery_control

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.results.verdict import adjust, benjamini_hochberg, holm

P_VALUES = st.lists(st.floats(0, 1), min_size=1, max_size=40)


def _holm_loop(p):
    """Holm by its definition: walk up the sorted p-values, multiplier m - i, never decreasing, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def _bh_loop(p):
    """Benjamini-Hochberg by its definition: walk down the sorted p-values, p m / rank, never increasing."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, p[index] * m / rank)
        adjusted[index] = running
    return adjusted


@given(P_VALUES)
def test_holm_equals_its_definition(p):
    np.testing.assert_allclose(holm(p), _holm_loop(p), rtol=1e-12, atol=0)


@given(P_VALUES)
def test_benjamini_hochberg_equals_its_definition_and_scipy(p):
    np.testing.assert_allclose(benjamini_hochberg(p), _bh_loop(p), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(benjamini_hochberg(p), false_discovery_control(p, method="bh"), rtol=1e-12)


@given(P_VALUES)
def test_adjusted_p_values_are_ordered_like_the_raw_ones_and_bounded(p):
    raw, strict, lenient = np.array(p), holm(p), benjamini_hochberg(p)
    assert np.all(strict >= raw - 1e-15) and np.all(lenient >= raw - 1e-15) and np.all(strict <= 1)
    assert np.all(strict >= lenient - 1e-12)  # controlling the family-wise rate is the stricter
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(strict[order]) >= -1e-15) and np.all(np.diff(lenient[order]) >= -1e-15)


def _rows():
    rows = []
    for split_point in ("layers.0", "layers.1"):
        for tangent in ("early", "each"):
            for step, p in zip((0, 10, 20), (0.01, 0.2, 0.04), strict=True):
                rows.append({"step": step, "split_point": split_point, "tangent": tangent, "p_value": p})
    rows[-1]["p_value"] = None  # a row without a p-value is left out of its family
    return rows


@pytest.mark.parametrize(
    ("family", "groups"),
    [("all", 1), ("split_point", 2), ("tangent", 2), ("split_point_and_tangent", 4)],
)
def test_each_family_is_adjusted_on_its_own(family, groups):
    rows = _rows()
    adjusted = adjust(rows, column="p_value", correction="holm", family=family)
    assert adjusted[-1] is None
    keys = {
        "all": lambda r: (),
        "split_point": lambda r: r["split_point"],
        "tangent": lambda r: r["tangent"],
        "split_point_and_tangent": lambda r: (r["split_point"], r["tangent"]),
    }[family]
    by_family: dict = {}
    for index, row in enumerate(rows[:-1]):
        by_family.setdefault(keys(row), []).append(index)
    assert len(by_family) == groups
    for indices in by_family.values():
        expected = _holm_loop([rows[i]["p_value"] for i in indices])
        assert [adjusted[i] for i in indices] == pytest.approx(expected)


def test_a_table_adds_the_adjusted_column_and_prefers_the_exact_p_value():
    table = ia.SweepResult(_rows())
    holm_table = table.adjusted()
    assert holm_table.column("p_value_holm")[:3] == pytest.approx(_holm_loop([0.01, 0.2, 0.04]))
    assert "p_value_holm" not in table.rows[0]  # a copy: the table itself is unchanged
    exact = ia.SweepResult([{**row, "p_value_exact": 0.5} for row in _rows()])
    assert "p_value_exact_bh" in exact.adjusted("bh").rows[0]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"correction": "bonferroni"}, "correction.*'bonferroni'"),
        ({"family": "checkpoint"}, "family.*'checkpoint'"),
    ],
)
def test_unknown_corrections_and_families_are_refused(options, named):
    with pytest.raises(InvalidInputError, match=named):
        adjust(_rows(), column="p_value", **{"correction": "holm", "family": "all", **options})


def test_p_values_outside_the_unit_interval_are_refused():
    with pytest.raises(InvalidInputError, match=r"p-values.*\[1\.5\]"):
        holm([0.5, 1.5])
