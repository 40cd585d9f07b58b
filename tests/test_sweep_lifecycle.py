# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's results directory over its life: checkpoints retrained into the same folder (fingerprints), a sweep
extended with checkpoints, split points and tangent kinds, and bad checkpoints skipped and retried. Each ends on the
table a fresh sweep over the final checkpoints gives."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_sweep import SETTINGS as SWEEP_SETTINGS

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import (
    CheckpointError,
    CheckpointWarning,
    InvalidInputError,
    ResultsStoreError,
)
from interpreto_anisotropy.results.records import folder_fingerprint

SETTINGS = {**SWEEP_SETTINGS, "reference": "both"}


@pytest.fixture
def run(toy_checkpoints, tmp_path):
    """A private copy of the toy training run (checkpoints 0, 1, 2, 4, 8, 20)."""
    target = tmp_path / "run"
    shutil.copytree(toy_checkpoints.out_dir, target)
    return target


@pytest.fixture(scope="module")
def texts_for_sweep(fit_texts, texts):
    return {"texts": fit_texts[:16], "probe_texts": texts[:12]}


def _sweep(run, results_dir, texts, steps=None, **changes):
    checkpoints = ia.checkpoints.local(str(run / "checkpoint-*"))
    if steps is not None:
        checkpoints = [checkpoint for checkpoint in checkpoints if checkpoint.step in steps]
    return ia.CheckpointSweep(checkpoints, results_dir=results_dir, **texts, **{**SETTINGS, **changes})


def _retrain(run, step, like):
    """Checkpoint `step` retrained into the same folder: it now holds other weights (those of `like`)."""
    shutil.copy(run / f"checkpoint-{like}" / "model.safetensors", run / f"checkpoint-{step}" / "model.safetensors")


def _assert_same_table(mine, fresh, *, exact=True):
    assert [(row["step"], row["layer"], row["tangent"]) for row in mine.rows] == [
        (row["step"], row["layer"], row["tangent"]) for row in fresh.rows
    ]
    for ours, theirs in zip(mine.rows, fresh.rows, strict=True):
        assert ours.keys() == theirs.keys()
        for key, value in ours.items():
            if key == "wall_seconds":
                continue
            if exact or not isinstance(value, float):
                assert value == theirs[key], (ours["step"], ours["tangent"], key)
            else:
                assert value == pytest.approx(theirs[key], rel=1e-5, abs=1e-9), (ours["step"], ours["tangent"], key)


# ---------------------------------------------------------------------------------------------- fingerprints
def test_a_fingerprint_sees_new_weights_and_ignores_the_trainer_state(run):
    folder = run / "checkpoint-8"
    before = folder_fingerprint(folder)
    (folder / "trainer_state.json").write_text("{}")
    assert folder_fingerprint(folder) == before
    _retrain(run, 8, like=20)
    assert folder_fingerprint(folder) != before
    assert folder_fingerprint(folder) == folder_fingerprint(run / "checkpoint-20")


def test_a_large_file_is_fingerprinted_from_a_sample_that_sees_retraining(tmp_path, monkeypatch):
    from interpreto_anisotropy.results import records as fingerprints

    monkeypatch.setattr(fingerprints, "WHOLE_FILE_BYTES", 2**20)  # a 4 MiB file is then "large"
    weights = {"w": torch.randn(2**20)}
    save_file(weights, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    before = folder_fingerprint(tmp_path)
    save_file({"w": weights["w"] + 1e-3}, tmp_path / "model.safetensors")
    assert folder_fingerprint(tmp_path) != before


@pytest.mark.slow
def test_a_checkpoint_retrained_into_the_same_folder_is_refused_then_recomputed(run, texts_for_sweep, tmp_path):
    results_dir = tmp_path / "sweep"
    first = _sweep(run, results_dir, texts_for_sweep).run()
    assert all(row["fingerprint"].startswith("sha256:") for row in first.rows)
    written = (results_dir / "rows.jsonl").read_bytes()
    _retrain(run, 8, like=20)
    with pytest.raises(ResultsStoreError, match=r"steps \[8\].*recompute_changed=True"):
        _sweep(run, results_dir, texts_for_sweep).run()
    assert (results_dir / "rows.jsonl").read_bytes() == written  # refused, and nothing lost
    recomputed = _sweep(run, results_dir, texts_for_sweep, recompute_changed=True).run()
    fresh = _sweep(run, tmp_path / "fresh", texts_for_sweep).run()
    _assert_same_table(recomputed, fresh)
    changed = {row["tangent"]: row["energy_share"] for row in recomputed.rows if row["step"] == 8}
    before = {row["tangent"]: row["energy_share"] for row in first.rows if row["step"] == 8}
    assert changed != before


@pytest.mark.slow
def test_a_retrained_early_checkpoint_makes_every_row_stale(run, texts_for_sweep, tmp_path):
    results_dir = tmp_path / "sweep"
    _sweep(run, results_dir, texts_for_sweep, reference="early").run()
    _retrain(run, 1, like=20)
    with pytest.raises(ResultsStoreError, match="early.*recompute_changed=True"):
        _sweep(run, results_dir, texts_for_sweep, reference="early").run()
    recomputed = _sweep(run, results_dir, texts_for_sweep, reference="early", recompute_changed=True).run()
    fresh = _sweep(run, tmp_path / "fresh", texts_for_sweep, reference="early").run()
    _assert_same_table(recomputed, fresh)


# ---------------------------------------------------------------------------------------------- extending
@pytest.mark.slow
def test_a_sweep_extended_with_checkpoints_split_points_and_tangents_equals_a_fresh_one(
    run, texts_for_sweep, tmp_path
):
    results_dir = tmp_path / "sweep"
    _sweep(run, results_dir, texts_for_sweep, steps={0, 1, 2, 8}, reference="early").run()  # early: 0, 1, 2
    with pytest.raises(InvalidInputError, match=r"early_fraction=0\.125\b"):
        _sweep(run, results_dir, texts_for_sweep, reference="early").run()
    with pytest.raises(InvalidInputError, match=r"early_fraction=1\b"):
        _sweep(run, results_dir, texts_for_sweep, steps={0, 1, 2}, reference="early", early_fraction=0.5).run()
    with pytest.raises(InvalidInputError, match=r"\bstep 2\b"):
        _sweep(run, results_dir, texts_for_sweep, steps={0, 1}, reference="early").run()
    with pytest.raises(InvalidInputError, match="nb_concepts"):
        _sweep(run, results_dir, texts_for_sweep, steps={0, 1, 2, 8}, nb_concepts=3).run()
    # step 4 between old ones, step 20 after them, split point 0 and the "each" tangent, all at once
    extended = _sweep(run, results_dir, texts_for_sweep, early_fraction=0.125, split_point=[1, 0]).run()
    fresh = _sweep(run, tmp_path / "fresh", texts_for_sweep, early_fraction=0.125, split_point=[1, 0]).run()
    _assert_same_table(extended, fresh, exact=False)  # the early rows of the first run were probed without "each"
    config = json.loads((results_dir / "config.json").read_text())
    assert [c["step"] for c in config["checkpoints"]] == [0, 1, 2, 4, 8, 20]
    assert config["split_points"] == [1, 0] and config["reference"] == "both"
    assert config["early_fraction"] == SETTINGS.get("early_fraction", 0.3)  # the fraction that chose the early steps
    step_8 = [row for row in extended.rows if row["step"] == 8 and row["layer"] == 1]
    step_8_fresh = [row for row in fresh.rows if row["step"] == 8 and row["layer"] == 1]
    assert [row["drift_previous_mean_angle"] for row in step_8] == [
        row["drift_previous_mean_angle"] for row in step_8_fresh
    ]  # now measured from step 4, not from step 2


def test_a_deleted_own_tangent_whose_drift_is_due_is_named_and_the_rows_kept(run, texts_for_sweep, tmp_path):
    results_dir = tmp_path / "sweep"
    fixed = {"reference": "early", "n_random": 40}  # R' fixed: a fifth checkpoint does not redraw the four
    _sweep(run, results_dir, texts_for_sweep, steps={0, 1, 2, 8}, **fixed).run()
    own = results_dir / "tangents" / "1" / "step-8.safetensors"
    assert own.exists()
    own.unlink()  # step 4 comes between 2 and 8: step 8's drift is measured again, from step 4
    with pytest.raises(ResultsStoreError, match=r"step-8\.safetensors is missing.*step 8's rows"):
        _sweep(run, results_dir, texts_for_sweep, steps={0, 1, 2, 4, 8}, **fixed).run()
    kept = [json.loads(line) for line in (results_dir / "rows.jsonl").read_text().splitlines()]
    assert sorted({row["step"] for row in kept}) == [0, 1, 2, 4, 8]


def test_a_resumed_sweep_draws_for_each_row_what_an_uninterrupted_run_draws(run, texts_for_sweep, tmp_path):
    """Rows lost to an interruption are computed again with the seeds, hence the draws, of an uninterrupted run."""
    steps = {0, 1, 2, 4}
    fresh = _sweep(run, tmp_path / "fresh", texts_for_sweep, steps=steps, reference="early").run()
    resumed_dir = tmp_path / "resumed"
    _sweep(run, resumed_dir, texts_for_sweep, steps=steps, reference="early").run()
    rows_file = resumed_dir / "rows.jsonl"
    lines = rows_file.read_text().splitlines(keepends=True)
    rows_file.write_text("".join(line for line in lines if json.loads(line)["step"] in {0, 1}))  # 2 and 4 lost
    resumed = _sweep(run, resumed_dir, texts_for_sweep, steps=steps, reference="early").run()
    _assert_same_table(resumed, fresh)
    assert len({row["draw_seed"] for row in resumed.rows}) == len(resumed.rows) == len(steps)


def test_a_moved_results_directory_resumes_without_recomputing(run, texts_for_sweep, tmp_path):
    first = _sweep(run, tmp_path / "here", texts_for_sweep, steps={0, 1}).run()
    shutil.move(tmp_path / "here", tmp_path / "there")
    again = _sweep(run, tmp_path / "there", texts_for_sweep, steps={0, 1}).run()
    assert [row["wall_seconds"] for row in again.rows] == [row["wall_seconds"] for row in first.rows]


# ---------------------------------------------------------------------------------------------- bad checkpoints
def _poison(run, step):
    """Checkpoint `step` diverged: one of its weights is NaN."""
    path = run / f"checkpoint-{step}" / "model.safetensors"
    tensors = load_file(path)
    name = sorted(name for name in tensors if tensors[name].is_floating_point())[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, path, metadata={"format": "pt"})
    return name


def test_non_finite_weights_are_refused_at_load_naming_the_checkpoint_and_weight(run):
    _poison(run, 4)
    checkpoint = ia.checkpoints.local(str(run / "checkpoint-4"))[0]
    with pytest.raises(CheckpointError, match=r"step-4.*NaN.*[\w.]+weight"):
        ia.checkpoints.load_checkpoint(checkpoint, device="cpu")
    with pytest.warns(CheckpointWarning, match="step-4.*NaN"):
        ia.checkpoints.load_checkpoint(checkpoint, device="cpu", strict=False)


@pytest.mark.slow
def test_a_bad_checkpoint_is_skipped_recorded_and_retried_once_fixed(run, texts_for_sweep, tmp_path):
    """Step 8 diverged (not an early checkpoint: a bad early checkpoint stops the sweep, the reference needs it)."""
    results_dir = tmp_path / "sweep"
    original = (run / "checkpoint-8" / "model.safetensors").read_bytes()
    _poison(run, 8)
    with pytest.raises(CheckpointError, match="step-8"):
        _sweep(run, results_dir, texts_for_sweep).run()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        skipping = _sweep(run, results_dir, texts_for_sweep, skip_bad_checkpoints=True).run()
    messages = [str(warning.message) for warning in caught]
    assert any("Skipped checkpoint step-8" in message for message in messages)
    assert any("step 20" in message and "step-8.safetensors" in message for message in messages)
    assert 8 not in skipping.steps and len(skipping.rows) == 2 * 5
    assert [(row["step"], row["tangent"]) for row in skipping.skipped] == [(8, "early"), (8, "each")]
    assert all("non-finite weights" in row["skipped"] for row in skipping.skipped)
    assert all(row["drift_previous_mean_angle"] is None for row in skipping.rows if row["step"] == 20)

    (run / "checkpoint-8" / "model.safetensors").write_bytes(original)
    retried = _sweep(run, results_dir, texts_for_sweep, skip_bad_checkpoints=True).run()
    fresh = _sweep(run, tmp_path / "fresh", texts_for_sweep).run()
    assert not retried.skipped
    _assert_same_table(retried, fresh)


def test_the_statistics_options_reach_every_row_and_are_recorded_when_not_the_default(run, texts_for_sweep, tmp_path):
    options = {"n_random": 7, "isoscore_convention": "ambient", "isoscore_zeta": 0.75, "isoscore_c0": "pooled"}
    # 1 / (7 + 1) is not below 0.05 / 2: Holm over the 2 checkpoints can never pass, which the sweep says.
    with pytest.warns(ia.errors.DegenerateStatisticsWarning, match=r"1/8 = 0\.125.*0\.05/2"):
        table = _sweep(run, tmp_path / "sweep", texts_for_sweep, steps={0, 1}, reference="early", **options).run()
    for row in table.rows:
        assert len(row["random_energy_shares"]) == 7 and 0 < row["p_value_exact"] <= 1
        assert (row["isoscore_convention"], row["isoscore_zeta"], row["isoscore_c0"]) == ("ambient", 0.75, "pooled")
    config = json.loads((tmp_path / "sweep" / "config.json").read_text())
    assert {key: config[key] for key in options} == options
    plain = _sweep(run, tmp_path / "plain", texts_for_sweep, steps={0, 1}, reference="early").plan.record()
    assert not set(options) & set(plain)  # defaults leave older results directories resumable
    assert "p_exact" in table.summary_table() and "aniso" in table.summary_table()
    with pytest.raises(
        ia.errors.InvalidInputError,
        match=r"isoscore_c0.*'scaled_identity'.*\(32, 32\).*GradientProbe\.run",
    ):
        _sweep(run, tmp_path / "matrix", texts_for_sweep, isoscore_c0=torch.eye(32))
