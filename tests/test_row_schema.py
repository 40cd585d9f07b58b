# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The row schema (`results.schema.COLUMNS`): every field a probe, a sweep or a live probe writes is declared once,
with a kind its values have; the rows written are the JSON lines they always were; the checks refuse what is not.

Recomputed another way: the committed golden rows (a real sweep's, `tests/golden/sweep_rows_*.json`) and a real
`ProbeResult` (`tests/golden/probe_*.json`) are checked field by field against the kinds, and `row_line` against
`json.dumps`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from interpreto_anisotropy.errors import ResultsStoreError
from interpreto_anisotropy.live.rows import live_row
from interpreto_anisotropy.probing.result import ProbeResult
from interpreto_anisotropy.results.schema import COLUMNS, Kind, describe, read_rows, row_line, type_problem

GOLDEN = Path(__file__).resolve().parent / "golden"
SWEEP_ROWS = [row for name in ("pca", "svd") for row in json.loads((GOLDEN / f"sweep_rows_{name}.json").read_text())]


def _probe_result() -> ProbeResult:
    return ProbeResult.from_dict(json.loads((GOLDEN / "probe_gpt_neox.json").read_text()))


def test_each_column_is_declared_once():
    names = [column.name for column in COLUMNS]
    assert len(names) == len(set(names))
    assert all(isinstance(column.kind, Kind) and column.meaning for column in COLUMNS)


def test_every_probe_result_field_is_declared_with_the_kind_of_its_value():
    fields = {field.name for field in dataclasses.fields(ProbeResult)}
    assert not {name for name in fields if describe(name) is None}
    written = _probe_result().to_dict()
    assert set(written) == fields
    assert type_problem(written) is None
    assert describe("control_energy_shares").kind is Kind.NUMBERS and describe("extra").kind is Kind.MAPPING


def test_a_sweeps_rows_are_declared_and_written_as_before(tmp_path):
    assert {name for row in SWEEP_ROWS for name in row if describe(name) is None} == set()
    for row in SWEEP_ROWS:
        assert row_line(row) == json.dumps(row) + "\n"  # the bytes of rows.jsonl do not change
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(map(row_line, SWEEP_ROWS)))
    assert read_rows(path) == SWEEP_ROWS


def test_a_live_row_is_declared():
    row = live_row(
        _probe_result(), step=9, first_step=5, micro_batches=10, layer=1, path="gpt_neox.layers.1",
        kind="early", retrospective=True, fitted_at=None,
    )  # fmt: skip
    assert row_line(row) == json.dumps(row) + "\n"
    assert describe("retrospective").kind is Kind.FLAG and describe("window_steps").kind is Kind.INTEGER


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (Kind.INTEGER, [0, 3, None], [1.5, True, "3"]),
        (Kind.NUMBER, [0, 0.25, None], [True, "0.25", [0.25]]),
        (Kind.TEXT, ["early", None], [3, ["early"]]),
        (Kind.LABEL, [1, "gpt_neox.layers.1"], [1.0, False]),
        (Kind.FLAG, [True, False, None], [0, "yes"]),
        (Kind.NUMBERS, [[0.1, 2, None], []], [[0.1, "x"], [True], 0.1]),
        (Kind.TEXTS, [["0-1 %"], []], [[1], "0-1 %"]),
        (Kind.MAPPING, [{}, {"aux": 1.0}], [[], "x"]),
        (Kind.REPORT, [], [None, 0.1, "[0.1, 0.2]"]),
    ],
)
def test_kinds_accept_their_json_values_only(kind, good, bad):
    assert all(kind.accepts(value) for value in good)
    assert not any(kind.accepts(value) for value in bad)


def test_writing_an_undeclared_or_mistyped_field_is_refused():
    row = dict(SWEEP_ROWS[0])
    with pytest.raises(ResultsStoreError, match=r"\['my_new_column'\].*results/schema\.py"):
        row_line({**row, "my_new_column": 1.0})
    with pytest.raises(ResultsStoreError, match=r"energy_share '0\.5'"):
        row_line({**row, "energy_share": "0.5"})
    with pytest.raises(ResultsStoreError, match=r"\bci\b.*report"):
        row_line({**row, "ci": [0.1, 0.2]})


def test_reading_a_mistyped_field_names_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps(SWEEP_ROWS[0]), json.dumps({**SWEEP_ROWS[1], "frequency_buckets": [1, 2]})]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsStoreError, match=r"Line 2 of .*frequency_buckets \[1, 2\]"):
        read_rows(path)
    path.write_text(json.dumps({**SWEEP_ROWS[0], "an_older_field": "kept"}) + "\n")  # unknown fields are read
    assert read_rows(path)[0]["an_older_field"] == "kept"


def test_a_non_finite_value_is_written_as_null_and_reads_back(tmp_path):
    """The safe reader refuses NaN and Infinity constants, so the writer writes a non-finite value as a hole."""
    row = {"step": 3, "layer": 1, "energy_share": float("nan"), "control_energy_shares": [0.1, float("inf")]}
    path = tmp_path / "rows.jsonl"
    path.write_text(row_line(row))
    assert read_rows(path) == [{"step": 3, "layer": 1, "energy_share": None, "control_energy_shares": [0.1, None]}]
