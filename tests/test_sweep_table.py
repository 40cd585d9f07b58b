# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`SweepResult` as a table over pandas: `select` by any column (step included), `to_frame`, `to_csv`, `adjusted`.

Recomputed another way: each selection against a list comprehension over the rows, the CSV against the standard
library's `csv.DictWriter`, the adjusted p-values against Holm applied curve by curve with a loop.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.results.verdict import holm

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def table() -> ia.SweepResult:
    """A real sweep's rows (golden PCA rows at split point 1, SVD rows relabelled as split point 2)."""
    pca = json.loads((GOLDEN / "sweep_rows_pca.json").read_text())
    svd = json.loads((GOLDEN / "sweep_rows_svd.json").read_text())
    relabelled = [{**row, "layer": 2, "split_point": "gpt_neox.layers.2", "drift_previous_step": None} for row in svd]
    return ia.SweepResult(pca + relabelled, {"n_controls": 4})


def test_select_by_any_column_keeps_the_rows_as_they_are(table):
    assert table.select(step=8).rows == [row for row in table.rows if row["step"] == 8]
    assert table.select(step=[0, 20], tangent="each").rows == [
        row for row in table.rows if row["step"] in (0, 20) and row["tangent"] == "each"
    ]
    assert table.select(step=range(2, 9)).steps == [row["step"] for row in table.rows if 2 <= row["step"] < 9]
    assert table.select(method="svd").rows == table.rows[12:]
    at_zero = [row for row in table.rows if row["step"] == 0]
    assert all(a is b for a, b in zip(table.select(step=0).rows, at_zero, strict=True))  # the rows, not copies
    assert table.select(step=None, tangent=None).rows == table.rows
    selected = table.select(step=1)
    assert selected.config == table.config and selected.results_dir == table.results_dir


def test_a_split_point_is_named_by_label_or_path(table):
    by_label, by_path = table.select(split_point=2).rows, table.select(split_point="gpt_neox.layers.2").rows
    assert by_label == by_path == table.rows[12:]
    assert table.select(split_point="2").rows == by_label
    assert table.select(split_point=[1, 2]).rows == table.rows


def test_select_refuses_an_unknown_column_and_finds_no_row_in_a_declared_absent_one(table):
    with pytest.raises(InvalidInputError, match="'stepp'"):
        table.select(stepp=3)
    assert table.select(window_steps=3).rows == []  # a live probe's column, absent from a sweep's rows
    assert ia.SweepResult([]).select(stepp=3).rows == []


def test_to_frame_has_a_line_per_row_and_numeric_columns(table):
    frame = table.to_frame()
    assert len(frame) == len(table) and list(frame.columns) == list(table.rows[0])  # first-seen order
    assert pd.api.types.is_float_dtype(frame["energy_share"]) and pd.api.types.is_integer_dtype(frame["step"])
    assert frame["energy_share"].tolist() == table.column("energy_share")
    assert frame.groupby("tangent")["energy_ratio"].max()["early"] == max(
        table.select(tangent="early").column("energy_ratio")
    )


def test_to_csv_writes_what_the_csv_module_writes(table, tmp_path):
    rows = [*table.rows, {**table.rows[0], "step": 30, "dim": None, "flag": True}]
    bigger = ia.SweepResult(rows)
    columns = bigger.scalar_columns()
    assert "control_energy_shares" not in columns and "flag" in columns
    expected = io.StringIO(newline="")
    writer = csv.DictWriter(expected, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
    path = bigger.to_csv(tmp_path / "rows.csv")
    assert path.read_bytes() == expected.getvalue().encode()


def test_adjusted_is_holm_curve_by_curve(table):
    adjusted = table.adjusted("holm", column="p_value").column("p_value_holm")
    for split_point in ("gpt_neox.layers.1", "gpt_neox.layers.2"):
        for tangent in ("early", "each"):
            at = [
                i for i, row in enumerate(table.rows) if (row["split_point"], row["tangent"]) == (split_point, tangent)
            ]
            expected = holm([table.rows[i]["p_value"] for i in at])
            assert np.array_equal([adjusted[i] for i in at], expected)
    every = table.adjusted("bh", family="all").column("p_value_exact_bh")  # one family: every row at once
    assert np.array_equal(every, false_discovery_control(table.column("p_value_exact"), method="bh"))
