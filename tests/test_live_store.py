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
from interpreto_anisotropy.errors import ResultsStoreError
from interpreto_anisotropy.live.store import LiveStore
from interpreto_anisotropy.sweeps.result import ROWS_FILE

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
    with pytest.raises(ResultsStoreError, match="free space"):
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
    with pytest.warns(UserWarning, match="unterminated: a live probe is appending it"):
        assert ia.SweepResult.load(tmp_path).steps == [0, 1, 2, 3]  # a reader sees the whole rows only
    with pytest.warns(UserWarning, match="unterminated"):
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
