# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Which software computed a sweep's rows: provenance.jsonl names every row with the library versions, config.json
holds none (a resume under newer libraries is not refused), and the report shows the versions of the rows, flagging
rows from several versions."""

from __future__ import annotations

import json
import platform
import shutil
from importlib import metadata

import pytest
from test_top_tokens import SETTINGS

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import ResultsStoreError
from interpreto_anisotropy.results import records as provenance
from interpreto_anisotropy.results.records import PROVENANCE_FILE, read_provenance, versions_of_rows
from interpreto_anisotropy.results.schema import row_key
from interpreto_anisotropy.visualizations import report

pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")


@pytest.fixture(scope="module")
def finished(toy_checkpoints, fit_texts, texts, tmp_path_factory):
    checkpoints = [c for c in ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*")) if c.step in (0, 8)]
    results_dir = tmp_path_factory.mktemp("provenance") / "sweep"
    arguments = {"texts": fit_texts[:12], "probe_texts": texts[:8], **SETTINGS}
    table = ia.CheckpointSweep(checkpoints, results_dir=results_dir, **arguments).run()
    return results_dir, table, checkpoints, arguments


def test_every_row_is_named_with_the_installed_versions(finished):
    results_dir, table, _, _ = finished
    records = read_provenance(results_dir / PROVENANCE_FILE)
    expected = {name: metadata.version(name) for name in provenance.VERSIONED} | {"python": platform.python_version()}
    assert all(record["versions"] == expected for record in records)
    named = [tuple(key) for record in records for key in record["rows"]]
    assert sorted(named) == sorted(row_key(row) for row in table.rows)
    config = (results_dir / "config.json").read_text()
    assert "versions" not in config and metadata.version("torch") not in config


def test_a_resume_under_another_version_is_not_refused_and_the_report_flags_it(finished, tmp_path, monkeypatch):
    results_dir, _, checkpoints, arguments = finished
    copy = tmp_path / "sweep"
    shutil.copytree(results_dir, copy)
    config = (copy / "config.json").read_bytes()
    lines = (copy / "rows.jsonl").read_text().splitlines()
    (copy / "rows.jsonl").write_text("\n".join(lines[:-2]) + "\n")  # the last checkpoint is computed again
    newer = {**provenance.software_versions(), "interpreto-anisotropy": "99.0"}
    monkeypatch.setattr(provenance, "software_versions", lambda: newer)
    table = ia.CheckpointSweep(checkpoints, results_dir=copy, **arguments).run()
    assert (copy / "config.json").read_bytes() == config
    groups = versions_of_rows(copy, table.rows)
    assert [(versions["interpreto-anisotropy"], count) for versions, count in groups] == [
        (metadata.version("interpreto-anisotropy"), len(lines) - 2),
        ("99.0", 2),
    ]
    page = ia.write_report(table, tmp_path / "report").read_text()
    software = page[page.index("<h2>Software</h2>") :]
    assert "The rows come from 2 different software versions" in software
    assert f"{len(lines) - 2} rows: interpreto-anisotropy {metadata.version('interpreto-anisotropy')}" in software
    assert "2 rows: interpreto-anisotropy 99.0" in software


def test_rows_without_provenance_say_so(finished, tmp_path):
    results_dir, _, _, _ = finished
    copy = tmp_path / "sweep"
    shutil.copytree(results_dir, copy)
    (copy / PROVENANCE_FILE).unlink()
    table = ia.SweepResult.load(copy)
    assert versions_of_rows(copy, table.rows) == [(None, len(table.rows))]
    # what the report's Software section shows: no group of rows with known versions (the page says "not recorded")
    assert report._versions(table)["known"] == [] and report._versions(table)["unknown"] == len(table.rows)
    one = report._versions(ia.SweepResult.load(results_dir))
    assert one["unknown"] == 0 and [group["count"] for group in one["known"]] == [len(table.rows)]
    assert one["known"][0]["versions"].startswith(f"interpreto-anisotropy {metadata.version('interpreto-anisotropy')}")


def test_a_line_cut_short_is_ignored_and_a_bad_line_refused(finished, tmp_path):
    results_dir, table, _, _ = finished
    path = tmp_path / PROVENANCE_FILE
    whole = (results_dir / PROVENANCE_FILE).read_text()
    path.write_text(whole + '{"written": "2026')
    assert read_provenance(path) == read_provenance(results_dir / PROVENANCE_FILE)
    path.write_text(whole + "[1, 2]\n")
    with pytest.raises(ResultsStoreError, match=r"Line \d+ of .*provenance\.jsonl"):
        read_provenance(path)
    assert any(json.loads(line)["rows"] for line in whole.splitlines())  # the first line: the reference's files
