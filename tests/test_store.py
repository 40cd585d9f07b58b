# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The results store: one writer at a time, torn lines refused or repaired, never glued, no adoption of results
without their settings, resume by (step, split point, tangent kind), and a finished sweep left untouched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from test_sweep import SETTINGS as SWEEP_SETTINGS

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import ResultsFileWarning, ResultsStoreError, SweepLockedError
from interpreto_anisotropy.results.store import HOLDER_FILE, LOCK_FILE

SETTINGS = {**SWEEP_SETTINGS, "reference": "both"}


@pytest.fixture(scope="module")
def arguments(toy_checkpoints, fit_texts, texts):
    return {
        "checkpoints": str(toy_checkpoints.out_dir / "checkpoint-*"),
        "texts": fit_texts[:16],
        "probe_texts": texts[:12],
        **SETTINGS,
    }


@pytest.fixture(scope="module")
def finished(arguments, tmp_path_factory):
    """A finished sweep's results directory and its table."""
    results_dir = tmp_path_factory.mktemp("finished") / "sweep"
    table = ia.CheckpointSweep(results_dir=results_dir, **arguments).run()
    return results_dir, table


@pytest.fixture
def copy(finished, tmp_path):
    """A private copy of the finished sweep's results directory."""
    target = tmp_path / "sweep"
    shutil.copytree(finished[0], target)
    return target


def _sweep(arguments, results_dir, **changes):
    return ia.CheckpointSweep(results_dir=results_dir, **{**arguments, **changes})


def _comparable(rows):
    return [{key: value for key, value in row.items() if key not in ("wall_seconds",)} for row in rows]


def _lines(results_dir):
    return (results_dir / "rows.jsonl").read_text().splitlines()


def test_a_torn_last_line_is_refused_naming_the_file_and_line_and_overwrite_recovers(arguments, finished, copy):
    n_rows = len(finished[1])
    with (copy / "rows.jsonl").open("a") as handle:
        handle.write('{"step": 20, "layer": 1, "tangent": "ea')  # an append cut short
    for attempt in (lambda: ia.SweepResult.load(copy), lambda: _sweep(arguments, copy).run()):
        with pytest.raises(ResultsStoreError, match=rf"Line {n_rows + 1} of .*rows\.jsonl.*overwrite=True"):
            attempt()
    assert len(_sweep(arguments, copy, overwrite=True).run()) == n_rows


def test_a_dropped_row_is_recomputed_and_an_unterminated_whole_row_is_kept_not_glued(arguments, finished, copy):
    lines = _lines(copy)
    dropped = json.loads(lines[-1])
    assert dropped["tangent"] == "each"  # the last checkpoint's "each" row: its "early" row stays
    (copy / "rows.jsonl").write_text("\n".join(lines[:-1]))  # and the new last line has lost its newline
    table = _sweep(arguments, copy).run()
    assert _comparable(table.rows) == _comparable(finished[1].rows)
    assert all(json.loads(line) for line in _lines(copy)) and len(_lines(copy)) == len(lines)


_HOLDER = textwrap.dedent(
    """
    import json, sys
    import torch
    import interpreto_anisotropy as ia
    torch.set_num_threads(int(sys.argv[2]))  # as in the test process: float32 reductions depend on the threads
    arguments = json.loads(sys.argv[1])
    ia.CheckpointSweep(**arguments).run()
    """
)


def test_two_sweeps_on_one_directory_exactly_one_runs_and_nothing_is_lost(arguments, finished, tmp_path):
    results_dir = tmp_path / "shared"
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _HOLDER,
            json.dumps({**arguments, "results_dir": str(results_dir)}),
            str(torch.get_num_threads()),
        ],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.time() + 300
    while not (results_dir / HOLDER_FILE).exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, "the first sweep ended before the second could start"
    with pytest.raises(SweepLockedError, match=rf"pid {first.pid}\b.*results_dir"):
        _sweep(arguments, results_dir).run()
    with pytest.raises(SweepLockedError):
        _sweep(arguments, results_dir, overwrite=True).run()  # not even to start afresh
    assert first.wait(timeout=600) == 0
    table = ia.SweepResult.load(results_dir)
    assert _comparable(table.rows) == _comparable(finished[1].rows)
    assert not (results_dir / HOLDER_FILE).exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(arguments, finished, copy):
    (copy / LOCK_FILE).write_text("")
    (copy / HOLDER_FILE).write_text(json.dumps({"pid": 999_999_999, "host": "gone", "since": "long ago"}))
    assert len(_sweep(arguments, copy).run()) == len(finished[1])


def test_results_without_their_config_are_refused_not_adopted(arguments, finished, copy):
    (copy / "config.json").unlink()
    with pytest.raises(
        ResultsStoreError,
        match=r"rows\.jsonl, provenance\.jsonl, reference, tangents, top_tokens.*config\.json",
    ):
        _sweep(arguments, copy, n_controls=3).run()
    table = _sweep(arguments, copy, n_controls=3, overwrite=True).run()
    assert {len(row["control_energy_shares"]) for row in table.rows} == {3}


def test_a_garbage_config_is_our_error_and_overwrite_recovers(arguments, finished, copy):
    (copy / "config.json").write_text('{"format_version": 2, "checkpo')
    with pytest.raises(ResultsStoreError, match=r"config\.json.*overwrite=True"):
        _sweep(arguments, copy).run()
    with pytest.raises(ResultsStoreError, match="config.json"):
        ia.SweepResult.load(copy)
    assert len(_sweep(arguments, copy, overwrite=True).run()) == len(finished[1])


def test_rows_written_twice_or_with_mixed_settings_are_refused_on_load(finished, copy):
    lines = _lines(copy)
    (copy / "rows.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(ResultsStoreError, match=r"rows\.jsonl.*\[\(0, '1', 'early'\)\]"):
        ia.SweepResult.load(copy)
    mixed = json.loads(lines[0])
    mixed["control_energy_shares"] = mixed["control_energy_shares"][:3]
    (copy / "rows.jsonl").write_text("\n".join([json.dumps(mixed), *lines[1:]]) + "\n")
    with pytest.raises(ResultsStoreError, match=r"rows\.jsonl.*\[3, 5\]"):
        ia.SweepResult.load(copy)


def test_a_saved_reference_of_another_rank_is_refitted_or_refused_when_its_digest_is_unknown(arguments, copy):
    reference = ia.Subspace.load(copy / "reference" / "1.safetensors")
    original = (copy / "reference" / "1.safetensors").read_bytes()
    reference.replace(basis=reference.basis[:, :3]).save(copy / "reference" / "1.safetensors")
    (copy / "rows.jsonl").write_text("\n".join(_lines(copy)[:-1]) + "\n")  # something left to compute
    provenance = (copy / "provenance.jsonl").read_text()
    # written before provenance.jsonl recorded the files' digests: nothing says it was altered, its rank refuses it
    (copy / "provenance.jsonl").write_text(
        "".join(
            json.dumps({key: value for key, value in json.loads(line).items() if key != "files"}) + "\n"
            for line in provenance.splitlines()
        )
    )
    with pytest.raises(ResultsStoreError, match=r"1\.safetensors.*rank-3.*nb_concepts=4"):
        _sweep(arguments, copy).run()
    (copy / "provenance.jsonl").write_text(provenance)  # its digest recorded: fitted again
    with pytest.warns(ResultsFileWarning, match=r"reference/1\.safetensors"):
        _sweep(arguments, copy).run()
    assert (copy / "reference" / "1.safetensors").read_bytes() == original


def test_a_finished_sweep_run_again_writes_nothing(arguments, finished, copy):
    files = ["config.json", "rows.jsonl", "provenance.jsonl", "reference/1.safetensors", "top_tokens/1/step-20.json"]
    before = {name: ((copy / name).stat().st_mtime_ns, (copy / name).read_bytes()) for name in files}
    time.sleep(0.01)
    table = _sweep(arguments, copy).run()
    assert len(table) == len(finished[1])
    assert {name: ((copy / name).stat().st_mtime_ns, (copy / name).read_bytes()) for name in files} == before
    assert not (copy / HOLDER_FILE).exists()


def test_rows_without_an_integer_step_are_our_error(copy):
    lines = _lines(copy)
    bad = {**json.loads(lines[0]), "step": None}
    (copy / "rows.jsonl").write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n")
    with pytest.raises(ResultsStoreError, match=r"Line 1 of .*rows\.jsonl"):
        ia.SweepResult.load(copy)


@pytest.mark.parametrize("method", ["svd", "ica", "semi_nmf"])
def test_resumed_rows_are_bit_identical_for_iterative_methods(arguments, tmp_path, method):
    """A resume reads the reference back from disk: the basis in memory must round like the one reloaded."""
    options = {"method": method, "method_kwargs": {"max_iter": 30} if method == "semi_nmf" else None}
    whole = _sweep(arguments, tmp_path / "whole", **options).run()
    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")
    lines = _lines(tmp_path / "resumed")
    (tmp_path / "resumed" / "rows.jsonl").write_text("\n".join(lines[:4]) + "\n")  # the first two checkpoints
    resumed = _sweep(arguments, tmp_path / "resumed", **options).run()
    assert _comparable(resumed.rows) == _comparable(whole.rows)


def test_rows_of_another_format_are_not_mixed_with_new_ones_and_overwrite_recovers(arguments, copy):
    config = json.loads((copy / "config.json").read_text())
    older = config["format_version"] - 1
    (copy / "config.json").write_text(json.dumps({**config, "format_version": older}))
    with pytest.raises(ia.errors.InvalidInputError, match=rf"format {older}\b.*overwrite=True"):
        _sweep(arguments, copy).run()
    assert len(_sweep(arguments, copy, overwrite=True).run()) == len(_lines(copy))
