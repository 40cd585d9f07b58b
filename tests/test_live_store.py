# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's rows.jsonl grows by appends: the rows already written stay byte for byte as they were, a write
that fails leaves the file as it was, a line left unterminated by a killed writer is removed by the next one, and a
resumed run keeps the rows before its start step.

Recomputed another way: the file is read back with `SweepResult.load` and compared with the rows given, and its
bytes before an append with its bytes after.
"""

from __future__ import annotations

import json
import os
import threading
import warnings

import pytest

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons import files
from interpreto_anisotropy.errors import ResultsFileWarning, ResultsStoreError
from interpreto_anisotropy.results.schema import ROWS_FILE
from interpreto_anisotropy.results.store import LiveStore, SweepStore

CONFIG = {"live": True, "n_controls": 3}


def _row(step: int) -> dict:
    return {"step": step, "checkpoint": f"live-{step}", "layer": 1, "tangent": "given", "energy_share": step / 10}


def test_appends_leave_earlier_rows_byte_for_byte(tmp_path):
    store = LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0)
    store.add([_row(0)])
    store.add([_row(1)])
    before = (tmp_path / ROWS_FILE).read_bytes()
    inode = os.stat(tmp_path / ROWS_FILE).st_ino
    store.add([_row(2)])
    store.close()
    after = (tmp_path / ROWS_FILE).read_bytes()
    assert after.startswith(before) and after[len(before) :] == (json.dumps(_row(2)) + "\n").encode()
    assert os.stat(tmp_path / ROWS_FILE).st_ino == inode  # appended in place, not rewritten
    assert ia.SweepResult.load(tmp_path).rows == [_row(0), _row(1), _row(2)]


def test_rows_are_batched_until_flushed(tmp_path):
    store = LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=3600)
    store.add([_row(0)])  # the first window is written at once
    store.add([_row(1)])
    assert ia.SweepResult.load(tmp_path).steps == [0]
    store.close()
    assert ia.SweepResult.load(tmp_path).steps == [0, 1]


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    store = LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0)
    store.add([_row(0)])
    before = (tmp_path / ROWS_FILE).read_bytes()
    real_write = os.write

    def half_then_full_disk(descriptor, data):
        real_write(descriptor, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "write", half_then_full_disk)
    with pytest.raises(ResultsStoreError, match=r"rows\.jsonl"):
        store.add([_row(1)])
    monkeypatch.undo()
    assert (tmp_path / ROWS_FILE).read_bytes() == before
    store.close()


def test_a_torn_last_line_is_cut_and_a_resume_keeps_the_rows_before_its_start(tmp_path):
    store = LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0)
    store.add([_row(step) for step in range(4)])
    store.close()
    with open(tmp_path / ROWS_FILE, "a") as handle:
        handle.write(json.dumps(_row(4))[:20])  # a writer killed while appending
    with pytest.warns(ResultsFileWarning, match=r"rows\.jsonl.*unterminated"):
        assert ia.SweepResult.load(tmp_path).steps == [0, 1, 2, 3]  # a reader sees the whole rows only
    with pytest.warns(ResultsFileWarning, match=r"rows\.jsonl.*removed"):
        resumed = LiveStore(tmp_path, CONFIG, overwrite=False, start_step=2, flush_seconds=0)
    assert ia.SweepResult.load(tmp_path).steps == [0, 1]
    resumed.add([_row(2)])
    resumed.close()
    assert ia.SweepResult.load(tmp_path).rows == [_row(0), _row(1), _row(2)]


def test_a_reader_during_appends_sees_whole_rows_in_order(tmp_path):
    n_windows = 400
    store = LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0)
    writer = threading.Thread(target=lambda: [store.add([_row(step)]) for step in range(n_windows)])
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a row caught half-written is left out, with a warning
        writer.start()
        while writer.is_alive():
            seen.append(ia.SweepResult.load(tmp_path).steps)
    writer.join()
    store.close()
    assert len(seen) > 10, "the reader did not overlap the writer"
    assert all(steps == list(range(len(steps))) for steps in seen)
    assert [len(steps) for steps in seen] == sorted(len(steps) for steps in seen)
    assert ia.SweepResult.load(tmp_path).steps == list(range(n_windows))


def _earlier_results(folder) -> None:
    """What a sweep and a live run write in a results directory, and two files the library does not write."""
    for name in ("reference/1.safetensors", "tangents/1/step-0.safetensors", "top_tokens/1/step-0.json", "report/a"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("old")
    (folder / "config.json").write_text(json.dumps({"live": True, "n_controls": 9}))
    (folder / ROWS_FILE).write_text(json.dumps(_row(0)) + "\n")
    (folder / "provenance.jsonl").write_text("{}\n")
    (folder / "notes.txt").write_text("mine")
    (folder / "hub_cache_before.json").write_text("{}")


@pytest.mark.parametrize("writer", ["live", "sweep"])
def test_an_overwrite_removes_everything_the_library_wrote_and_nothing_else(tmp_path, writer):
    _earlier_results(tmp_path)
    if writer == "live":
        LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0).close()
    else:
        store = SweepStore(tmp_path)
        with store.lock():
            store.prepare(CONFIG, overwrite=True)
    left = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if not path.name.startswith("."))
    expected = ["config.json", "hub_cache_before.json", "notes.txt"] + ([ROWS_FILE] if writer == "live" else [])
    assert left == sorted(expected)
    assert json.loads((tmp_path / "config.json").read_text()) == CONFIG


def test_an_overwrite_killed_half_way_leaves_no_old_artefact_a_run_would_reuse(tmp_path, monkeypatch):
    _earlier_results(tmp_path)
    real_replace, moved = os.replace, []

    def killed_after_two(source, target):
        if len(moved) == 2:
            raise KeyboardInterrupt
        moved.append(source)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0)
    monkeypatch.setattr(os, "replace", real_replace)
    assert not (tmp_path / "config.json").exists()  # moved first
    with pytest.raises(ResultsStoreError, match=r"rows\.jsonl, provenance\.jsonl, reference.*config\.json"):
        LiveStore(tmp_path, CONFIG, overwrite=False, flush_seconds=0)
    assert not list(tmp_path.glob(".overwritten-*"))  # the next lock holder deleted the half-done overwrite
    LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0).close()
    assert not (tmp_path / "reference").exists()
