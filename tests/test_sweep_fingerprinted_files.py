# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a resumed sweep reads back is fingerprinted: provenance.jsonl records the sha256 of every reference tangent,
per-checkpoint tangent and top-tokens file it writes. A file swapped or altered between an interrupted run and its
resume is fitted again (with the rows of its checkpoint), or refused naming it when this run cannot; the resumed
rows equal an uninterrupted run's."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings

import pytest
from test_sweep_lifecycle import SETTINGS, _assert_same_table

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import ResultsFileWarning, ResultsStoreError
from interpreto_anisotropy.results.records import recorded_digests

pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")

STEPS = (0, 2, 8)  # the early reference pools steps 0 and 2
FILES = ("reference/1.safetensors", "tangents/1/step-2.safetensors", "top_tokens/1/step-2.json")


@pytest.fixture(scope="module")
def uninterrupted(toy_checkpoints, sweep_texts, tmp_path_factory):
    """A finished sweep of steps 0, 2, 8: (its arguments, results folder, table)."""
    checkpoints = [c for c in ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*")) if c.step in STEPS]
    arguments = {"checkpoints": checkpoints, **sweep_texts, **SETTINGS}
    results_dir = tmp_path_factory.mktemp("fingerprinted") / "sweep"
    return arguments, results_dir, ia.CheckpointSweep(results_dir=results_dir, **arguments).run()


def _interrupted(uninterrupted, folder):
    """A copy of the finished sweep killed before the rows of its last checkpoint were written (its files were)."""
    arguments, results_dir, _ = uninterrupted
    shutil.copytree(results_dir, folder)
    rows = folder / "rows.jsonl"
    rows.write_text("".join(line for line in rows.read_text().splitlines(True) if json.loads(line)["step"] != 8))
    return folder


def _resume(uninterrupted, folder, **changes):
    arguments = {**uninterrupted[0], **changes}
    return ia.CheckpointSweep(results_dir=folder, **arguments).run()


def test_every_tangent_and_top_tokens_file_is_recorded_with_the_sha256_of_its_bytes(uninterrupted):
    _, results_dir, _ = uninterrupted
    written = [
        path
        for folder in ("reference", "tangents", "top_tokens")
        for path in (results_dir / folder).rglob("*")
        if path.is_file()
    ]
    assert {path.relative_to(results_dir).as_posix() for path in written} >= set(FILES)
    assert recorded_digests(results_dir) == {
        path.relative_to(results_dir).as_posix(): "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        for path in written
    }


def test_unaltered_files_resume_to_the_uninterrupted_rows(uninterrupted, tmp_path):
    folder = _interrupted(uninterrupted, tmp_path / "sweep")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultsFileWarning)
        resumed = _resume(uninterrupted, folder)
    _assert_same_table(resumed, uninterrupted[2])


@pytest.mark.parametrize(
    ("altered", "other"),
    [
        ("reference/1.safetensors", "tangents/1/step-0.safetensors"),  # another valid tangent of the same rank
        ("tangents/1/step-2.safetensors", "tangents/1/step-0.safetensors"),  # read back for step 8's drift
        ("top_tokens/1/step-2.json", None),  # its n_rows changed: still a valid top-tokens file
    ],
)
def test_a_swapped_or_altered_file_is_fitted_again_and_the_rows_equal_the_uninterrupted_ones(
    uninterrupted, tmp_path, altered, other
):
    folder = _interrupted(uninterrupted, tmp_path / "sweep")
    original = (folder / altered).read_bytes()
    if other is not None:
        shutil.copy(folder / other, folder / altered)
    else:
        content = json.loads(original)
        (folder / altered).write_text(json.dumps({**content, "n_rows": content["n_rows"] + 1}))
    assert (folder / altered).read_bytes() != original
    with pytest.warns(ResultsFileWarning, match=rf"{re.escape(altered)}.*sha256"):
        resumed = _resume(uninterrupted, folder)
    _assert_same_table(resumed, uninterrupted[2])
    assert (folder / altered).read_bytes() == original  # fitted again: the uninterrupted run's file
    assert recorded_digests(folder) == recorded_digests(uninterrupted[1])


def test_an_altered_tangent_of_a_checkpoint_this_run_lacks_is_refused_naming_it(uninterrupted, tmp_path):
    folder = _interrupted(uninterrupted, tmp_path / "sweep")
    arguments = uninterrupted[0]
    shutil.copy(folder / "tangents/1/step-0.safetensors", folder / "tangents/1/step-8.safetensors")
    rows = (folder / "rows.jsonl").read_bytes()
    fewer = [checkpoint for checkpoint in arguments["checkpoints"] if checkpoint.step != 8]
    with pytest.raises(ResultsStoreError, match=r"step-8\.safetensors.*overwrite=True"):
        _resume(uninterrupted, folder, checkpoints=fewer, early_fraction=1.0)  # early steps kept: 0 and 2
    assert (folder / "rows.jsonl").read_bytes() == rows  # refused, and nothing lost


def test_an_altered_top_tokens_file_of_a_finished_sweep_is_refused_when_read_then_recomputed(uninterrupted, tmp_path):
    arguments, results_dir, table = uninterrupted
    folder = tmp_path / "sweep"
    shutil.copytree(results_dir, folder)
    path = folder / "top_tokens/1/step-8.json"
    original = path.read_bytes()
    content = json.loads(original)
    path.write_text(json.dumps({**content, "n_rows": content["n_rows"] + 1}))
    with pytest.raises(ResultsStoreError, match=r"step-8\.json.*provenance\.jsonl"):
        ia.SweepResult.load(folder).top_tokens(1)
    with pytest.warns(ResultsFileWarning, match=r"steps \[8\]"):
        again = _resume(uninterrupted, folder)
    _assert_same_table(again, table)
    assert path.read_bytes() == original
    assert again.top_tokens(1)["n_rows"] == content["n_rows"]


def test_an_altered_file_of_a_checkpoint_whose_rows_were_lost_is_written_again_without_a_warning(
    uninterrupted, tmp_path
):
    folder = _interrupted(uninterrupted, tmp_path / "sweep")  # step 8's files were written, its rows lost
    original = (folder / "tangents/1/step-8.safetensors").read_bytes()
    shutil.copy(folder / "tangents/1/step-0.safetensors", folder / "tangents/1/step-8.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultsFileWarning)
        resumed = _resume(uninterrupted, folder)
    _assert_same_table(resumed, uninterrupted[2])
    assert (folder / "tangents/1/step-8.safetensors").read_bytes() == original
