# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""CheckpointSweep end to end: rows, resume after SIGKILL, agreement with direct calls, bad input."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from helpers.tolerances import assert_difference_close
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.reading.activations import token_activations

SETTINGS = {
    "split_point": 1,
    "nb_concepts": 4,
    "n_controls": 5,
    "seed": 3,
    "max_fit_tokens": 1500,
    "max_metric_tokens": 600,
    "progress": False,
}


@pytest.fixture(scope="module")
def decoder_sweep(toy_checkpoints, sweep_texts, tmp_path_factory):
    results_dir = tmp_path_factory.mktemp("decoder_sweep")
    sweep = ia.CheckpointSweep(
        str(toy_checkpoints.out_dir / "checkpoint-*"),
        reference="both",
        results_dir=results_dir,
        **sweep_texts,
        **SETTINGS,
    )
    return sweep, sweep.run()


def _comparable(rows):
    return [{key: value for key, value in row.items() if key != "wall_seconds"} for row in rows]


def test_decoder_sweep_writes_one_row_per_checkpoint_and_tangent(decoder_sweep, toy_checkpoints):
    sweep, table = decoder_sweep
    steps = [int(path.name.split("-")[1]) for path in toy_checkpoints.checkpoints]
    assert len(table) == 2 * len(steps)
    assert sorted(set(table.steps)) == sorted(steps)
    assert table.tangents == ["early", "each"]
    for row in table.rows:
        assert row["split_point"] == "gpt_neox.layers.1" and row["objective"] == "causal_lm"
        assert row["rank"] == 4 and row["dim"] == 32 and len(row["control_energy_shares"]) == 5
        assert 0 <= row["energy_share"] <= row["oracle_energy_share"] + 1e-9
        assert row["p_value"] == pytest.approx(
            (1 + sum(c >= row["energy_share"] for c in row["control_energy_shares"])) / 6
        )
        assert row["activation_isoscore"] is not None and row["on_manifold_entropy"] is not None
        assert row["freq_distance_pearson"] is not None
    first, last = table.rows[0], table.rows[-1]
    assert first["drift_previous_mean_angle"] is None and last["drift_previous_mean_angle"] is not None
    # The early reference is fitted on the checkpoints within the first 30 % of training (steps 0..6 of 20).
    assert sweep.config()["early_steps"] == [0, 1, 2, 4]
    results_dir = sweep.results_dir
    assert (results_dir / "config.json").exists() and (results_dir / "reference" / "1.safetensors").exists()
    lines = (results_dir / "rows.jsonl").read_text().splitlines()
    assert len(lines) == len(table) and all(json.loads(line) for line in lines)
    assert ia.SweepResult.load(results_dir).rows == table.rows


def test_rerun_resumes_without_recomputing(decoder_sweep, monkeypatch):
    sweep, table = decoder_sweep

    def fail(*args, **kwargs):
        raise AssertionError("a finished checkpoint was processed again")

    monkeypatch.setattr(ia.CheckpointSweep, "_process", fail)
    again = ia.CheckpointSweep(
        sweep.checkpoints,
        reference="both",
        results_dir=sweep.results_dir,
        texts=sweep.fit_texts,
        probe_texts=sweep.probe_texts,
        **SETTINGS,
    ).run()
    assert again.rows == table.rows


def test_other_settings_refuse_to_resume_unless_overwrite(decoder_sweep):
    sweep, _ = decoder_sweep
    settings = {**SETTINGS, "nb_concepts": 5}
    with pytest.raises(InvalidInputError, match="nb_concepts"):
        ia.CheckpointSweep(
            sweep.checkpoints,
            reference="both",
            results_dir=sweep.results_dir,
            texts=sweep.fit_texts,
            probe_texts=sweep.probe_texts,
            **settings,
        ).run()


def test_rows_equal_direct_probe_and_metric_calls(decoder_sweep, toy_checkpoints):
    sweep, table = decoder_sweep
    step = 8
    reference = ia.Subspace.load(sweep.results_dir / "reference" / "1.safetensors")
    checkpoint = next(c for c in sweep.checkpoints if c.step == step)
    model, tokenizer = ia.checkpoints.load_checkpoint(checkpoint, device="cpu")
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=8)
    activations, token_ids = token_activations(mwsp, sweep.fit_texts, max_tokens=SETTINGS["max_fit_tokens"])
    own = ia.PCATangent(mwsp, nb_concepts=4).fit(activations).subspace
    seeds = {kind: _draw_seed(3, step, mwsp.split_point, kind) for kind in ("early", "each")}
    n_random = math.floor(len(sweep.checkpoints) / 0.05)  # 1 / (R' + 1) < 0.05 / m, and R' >= R = 5
    direct = ia.GradientProbe(mwsp, objective="causal_lm", seed=3).run(
        sweep.probe_texts,
        {"early": reference, "each": own},
        n_controls=5,
        n_random=n_random,
        seed=3,
        draw_seeds=seeds,
        progress=False,
    )
    summary = ia.metrics.summary(activations[:600])
    for kind in ("early", "each"):
        row = next(r for r in table.rows if r["step"] == step and r["tangent"] == kind)
        assert (row["draw_seed"], row["n_random"]) == (seeds[kind], n_random)
        expected = direct[kind]
        for field in (
            "energy_share",
            "control_mean",
            "p_value",
            "p_value_exact",
            "oracle_energy_share",
            "loss",
        ):
            assert row[field] == pytest.approx(getattr(expected, field), rel=1e-6, abs=1e-9), field
        terms = (expected.isoscore_star_without_tangent, expected.isoscore_star)  # tests/helpers/tolerances.py
        assert_difference_close(row["delta_isoscore_star"], expected.delta_isoscore_star, *terms, rtol=1e-6)
        np.testing.assert_allclose(row["control_energy_shares"], expected.control_energy_shares, rtol=1e-6)
        np.testing.assert_allclose(row["random_energy_shares"], expected.random_energy_shares, rtol=1e-6)
        for key, value in summary.items():
            assert row[f"activation_{key}"] == pytest.approx(value, rel=1e-6, abs=1e-9), key
    angles = own.principal_angles(reference)
    row = next(r for r in table.rows if r["step"] == step)
    assert row["drift_reference_mean_angle"] == pytest.approx(float(np.mean(angles)), abs=1e-5)


def _draw_seed(seed, step, split_point, kind):
    """A row's draw seed recomputed here: the first 4 bytes of SHA-256 of its identity, as JSON."""
    identity = json.dumps([seed, step, split_point, kind]).encode()
    return int.from_bytes(hashlib.sha256(identity).digest()[:4], "big")


def test_rows_draw_apart(decoder_sweep):
    """No two rows share a draw: distinct seeds, and the same gradients give other control energies."""
    sweep, table = decoder_sweep
    rows = table.rows
    assert len({row["draw_seed"] for row in rows}) == len(rows)
    early = {row["step"]: row for row in rows if row["tangent"] == "early"}
    reference = ia.Subspace.load(sweep.results_dir / "reference" / "1.safetensors")
    model, tokenizer = ia.checkpoints.load_checkpoint(next(c for c in sweep.checkpoints if c.step == 8), device="cpu")
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=8)
    probe = ia.GradientProbe(mwsp, objective="causal_lm", seed=3)
    # Step 8's gradients, scored with step 8's draws and with step 4's: the same tangent share, other controls.
    own, other = (
        probe.run(
            sweep.probe_texts,
            {"early": reference},
            n_controls=5,
            n_random=early[8]["n_random"],
            seed=3,
            draw_seeds={"early": early[step]["draw_seed"]},
            progress=False,
        )["early"]
        for step in (8, 4)
    )
    assert own.energy_share == other.energy_share == pytest.approx(early[8]["energy_share"], rel=1e-6)
    np.testing.assert_allclose(own.control_energy_shares, early[8]["control_energy_shares"], rtol=1e-6)
    assert np.abs(own.control_energy_shares - other.control_energy_shares).max() > 1e-3 * own.control_mean
    assert not np.allclose(own.random_energy_shares, other.random_energy_shares)


def test_default_n_random_lets_holm_pass(decoder_sweep):
    """The default R' puts the floor of p_value_exact below 0.05 / m for a curve of m rows."""
    _, table = decoder_sweep
    for row in table.rows:
        curve = sum(r["split_point"] == row["split_point"] and r["tangent"] == row["tangent"] for r in table.rows)
        assert len(row["random_energy_shares"]) == row["n_random"] >= SETTINGS["n_controls"]
        assert 1 / (row["n_random"] + 1) < 0.05 / curve


def test_report_and_plots_of_the_sweep(decoder_sweep, tmp_path):
    _, table = decoder_sweep
    figures = ia.plotting.plot_sweep(table)
    assert {"energy", "energy_ratio", "delta_isoscore", "isotropy", "drift"} <= set(figures)
    page = ia.write_report(table, tmp_path / "report")
    assert page.exists() and "data:image/png;base64" in page.read_text()
    csv = table.to_csv(tmp_path / "rows.csv").read_text().splitlines()
    assert len(csv) == len(table) + 1 and "energy_share" in csv[0]
    assert len(table.to_frame()) == len(table)


@pytest.mark.slow
def test_encoder_sweep_uses_masked_lm(tmp_path, sweep_texts):
    from interpreto_anisotropy.demo import train_toy

    run = train_toy(
        tmp_path / "toy",
        arch="eurobert",
        steps=6,
        checkpoint_steps=[0, 3, 6],
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        vocab_size=384,
        seq_len=32,
        batch_size=8,
        max_train_texts=100,
        progress=False,
    )
    table = ia.CheckpointSweep(
        [ia.checkpoints.Checkpoint(step, str(path)) for step, path in zip([0, 3, 6], run.checkpoints, strict=True)],
        results_dir=tmp_path / "sweep",
        **sweep_texts,
        **SETTINGS,
    ).run()
    assert len(table) == 3 and table.tangents == ["early"]
    assert all(row["objective"] == "masked_lm" and row["split_point"] == "model.layers.1" for row in table.rows)
    assert all(math.isfinite(row["energy_share"]) for row in table.rows)


_KILLABLE = textwrap.dedent(
    """
    import json, sys
    import torch
    import interpreto_anisotropy as ia
    torch.set_num_threads(int(sys.argv[2]))  # as in the test process: float32 reductions depend on the threads
    args = json.loads(sys.argv[1])
    table = ia.CheckpointSweep(args.pop("pattern"), **args).run()
    ia.write_report(table, args["results_dir"] + "/report")
    """
)
N_KILLS = 10


class _KillPoints:
    """Random kill points over a whole sweep and its report, chosen from what the results directory shows: 2 during
    the reference fit (the lock is held, no reference yet), 5 after random numbers of rows, the rest during the
    report. A kill is filed under the phase the directory shows when it lands (a toy sweep can outrun a delay)."""

    def __init__(self, results_dir, n_rows, seed=0):
        self.results_dir, self.n_rows = results_dir, n_rows
        self.random = np.random.default_rng(seed)
        self.planned = {"reference fit": 2, "checkpoints": 5}

    def rows(self):
        path = self.results_dir / "rows.jsonl"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def phase(self):
        """The phase the results directory shows now."""
        if not (self.results_dir / "reference").exists():
            return "reference fit"
        return "checkpoints" if self.rows() < self.n_rows else "report"

    def next(self):
        """(condition to wait for, seconds to wait after it, condition that cuts the wait short) of the next kill."""
        lock = self.results_dir / ".sweep.lock.json"
        if self.planned["reference fit"] and self.phase() == "reference fit":
            self.planned["reference fit"] -= 1
            return lock.exists, self.random.uniform(0, 0.1), (self.results_dir / "reference").exists
        written = self.rows()
        if self.planned["checkpoints"] and written < self.n_rows - 1:
            self.planned["checkpoints"] -= 1
            target = int(self.random.integers(written, self.n_rows - 1))
            return (lambda: self.rows() > target), 0.0, None
        return (self.results_dir / "report").exists, self.random.uniform(0, 0.3), None


def _kill_at(process, condition, delay, deadline, cut_short=None):
    """SIGKILL `process` `delay` seconds after `condition()` holds, or as soon as `cut_short()` does; False if it
    exited first."""
    while process.poll() is None and time.time() < deadline and not condition():
        time.sleep(0.01)
    end = time.time() + delay
    while process.poll() is None and time.time() < end and not (cut_short and cut_short()):
        time.sleep(0.005)
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


@pytest.mark.slow
def test_a_sweep_killed_at_ten_random_moments_resumes_to_the_uninterrupted_table(
    toy_checkpoints, sweep_texts, decoder_sweep, tmp_path
):
    _, uninterrupted = decoder_sweep
    results_dir = tmp_path / "killed"
    arguments = {
        "pattern": str(toy_checkpoints.out_dir / "checkpoint-*"),
        "reference": "both",
        "results_dir": str(results_dir),
        **sweep_texts,
        **SETTINGS,
    }
    command = [sys.executable, "-c", _KILLABLE, json.dumps(arguments), str(torch.get_num_threads())]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    points = _KillPoints(results_dir, len(uninterrupted))
    kills: list[tuple[str, int]] = []
    deadline = time.time() + 900
    while len(kills) < N_KILLS and time.time() < deadline:
        condition, delay, cut_short = points.next()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if _kill_at(process, condition, delay, deadline, cut_short):
            kills.append((points.phase(), points.rows()))
        else:
            assert process.returncode == 0, process.stderr.read().decode()[-2000:]
        for line in (results_dir / "rows.jsonl").read_text().splitlines() if points.rows() else []:
            json.loads(line)  # every line a whole row after every kill
    assert len(kills) >= N_KILLS, kills
    assert {phase for phase, _ in kills} == {"reference fit", "checkpoints", "report"}, kills
    finished = subprocess.run(command, env=env, capture_output=True)
    assert finished.returncode == 0, finished.stderr.decode()[-2000:]

    resumed = ia.SweepResult.load(results_dir)
    assert _comparable(resumed.rows) == _comparable(uninterrupted.rows), kills
    assert (results_dir / "report" / "index.html").read_text().rstrip().endswith("</html>")
    leftovers = [path for path in results_dir.rglob("*.tmp") if "report" not in path.parts]
    assert not leftovers, "a killed write left its temporary file behind"


# ---------------------------------------------------------------------------------------------- bad input
def test_autocast_sweep_stays_close_to_float32_and_records_it(toy_checkpoints, sweep_texts, tmp_path):
    checkpoints = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[-2:]
    settings = {**SETTINGS, "reference": "each", **sweep_texts}
    exact = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "float32", **settings).run()
    fast = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "bf16", autocast_dtype="bf16", **settings).run()
    for exact_row, fast_row in zip(exact.rows, fast.rows, strict=True):
        assert fast_row["n_tokens"] == exact_row["n_tokens"]
        assert fast_row["energy_share"] == pytest.approx(exact_row["energy_share"], rel=0.1)
    assert "autocast_dtype" not in json.loads((tmp_path / "float32" / "config.json").read_text())
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["autocast_dtype"] == "bfloat16"


def test_empty_checkpoints_glob_and_texts(tmp_path, sweep_texts):
    with pytest.raises(InvalidInputError):
        ia.CheckpointSweep([], split_point=1, results_dir=tmp_path, **sweep_texts)
    with pytest.raises(InvalidInputError, match=re.escape(str(tmp_path / "nothing-*"))):
        ia.CheckpointSweep(str(tmp_path / "nothing-*"), split_point=1, results_dir=tmp_path, **sweep_texts)


def test_empty_texts_are_refused(toy_checkpoints, tmp_path):
    with pytest.raises(InvalidInputError, match="texts"):
        ia.CheckpointSweep(
            str(toy_checkpoints.out_dir / "checkpoint-*"), split_point=1, texts=["", "  "], results_dir=tmp_path
        )


def test_reference_of_another_hidden_size_is_refused(toy_checkpoints, sweep_texts, tmp_path):
    sweep = ia.CheckpointSweep(
        str(toy_checkpoints.out_dir / "checkpoint-*"),
        reference=ia.Subspace.random(48, 4),
        results_dir=tmp_path,
        **sweep_texts,
        **SETTINGS,
    )
    with pytest.raises(InvalidInputError, match="R\\^48"):
        sweep.run()


def test_a_given_reference_without_room_for_controls_is_refused_before_any_checkpoint(
    toy_checkpoints, sweep_texts, tmp_path
):
    with pytest.raises(InvalidInputError, match=r"k=16.*R\^32.*k <= 15"):
        ia.CheckpointSweep(
            str(toy_checkpoints.out_dir / "checkpoint-*"),
            reference=ia.Subspace.random(32, 16),
            results_dir=tmp_path,
            **sweep_texts,
            **SETTINGS,
        )


def test_checkpoint_with_another_hidden_size_is_refused(toy_checkpoints, sweep_texts, tmp_path):
    from interpreto_anisotropy.demo import build_model

    first = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[:2]
    model, tokenizer = ia.checkpoints.load_checkpoint(first[0], device="cpu")
    wider = build_model("gpt_neox", vocab_size=len(tokenizer), hidden_size=48, num_layers=2, num_heads=4, seed=0)
    wider.save_pretrained(tmp_path / "checkpoint-50")
    tokenizer.save_pretrained(tmp_path / "checkpoint-50")
    checkpoints = [*first, ia.checkpoints.Checkpoint(50, str(tmp_path / "checkpoint-50"))]
    sweep = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "sweep", **sweep_texts, **SETTINGS)
    with pytest.raises(InvalidInputError, match="step-50|checkpoint-50"):
        sweep.run()


def test_split_point_absent_from_the_checkpoint(toy_checkpoints, sweep_texts, tmp_path):
    settings = {**SETTINGS, "split_point": 7}
    sweep = ia.CheckpointSweep(
        str(toy_checkpoints.out_dir / "checkpoint-*"), results_dir=tmp_path, **sweep_texts, **settings
    )
    with pytest.raises(InvalidInputError, match=r"\b7\b"):
        sweep.run()


def test_early_checkpoints_pick_the_first_fraction():
    from interpreto_anisotropy.sweeps.runner import early_checkpoints

    checkpoints = [ia.checkpoints.Checkpoint(step, f"/x/{step}") for step in (0, 1, 2, 4, 100, 1000)]
    assert [c.step for c in early_checkpoints(checkpoints, 0.3)] == [0, 1, 2, 4, 100]
    assert [c.step for c in early_checkpoints(checkpoints, 0.001)] == [0, 1]
    assert [c.step for c in early_checkpoints(checkpoints[4:], 0.01)] == [100]


def test_a_split_point_is_selected_by_its_label_or_its_module_path(decoder_sweep):
    _, table = decoder_sweep
    by_label, by_path = table.select(split_point=1).rows, table.select(split_point="gpt_neox.layers.1").rows
    assert by_label == by_path == table.rows
    assert table.select(split_point=0).rows == []
    assert ia.plotting.plot_energy(table, split_point=1, tangent="early") is not None


def test_rows_change_from_their_curves_first_checkpoint(decoder_sweep):
    """Each row's change (results.change) against its curve's first row, recomputed from the two rows' own values."""
    _, table = decoder_sweep
    for tangent in ("early", "each"):
        rows = sorted(table.select(tangent=tangent).rows, key=lambda row: row["step"])
        first = rows[0]
        assert first["energy_ratio_change"] == 0.0 and first["energy_ratio_change_p_value"] is None
        for row in rows[1:]:
            assert row["change_reference_step"] == first["step"]
            assert row["change_n_sequences"] == row["n_sequences"] == first["n_sequences"]
            for name in ("energy_share", "energy_ratio", "anisotropy_share"):
                assert row[f"{name}_change"] == pytest.approx(row[name] - first[name], rel=1e-9, abs=1e-12)
            for name in ("energy_share", "energy_ratio"):
                assert row[f"{name}_change_low"] <= row[f"{name}_change"] <= row[f"{name}_change_high"]
                assert 0 < row[f"{name}_change_p_value"] <= 1
