# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe in a training run: tangents fitted live and windows scored retrospectively, evaluation forwards
ignored, non-finite micro-batches, the results directory read by `SweepResult`, and the errors of a misuse.

Recomputed another way: the early tangent is a PCA (`PCATangent`) of the activations the post-hoc probe reads on
the same batches and weights; a retrospective window equals the same window scored with that tangent given from
the start, bootstrap interval included (the rows it kept give the same per-sequence energies); without room for
its rows, its shares from G^T G equal them still; rows on disk equal the rows in memory.
"""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import torch
from helpers.live_kit import (
    COMPARED,
    assert_same_window,
    float64_copy,
    micro_batch,
    pending_bytes,
    post_hoc,
    probe_inputs,
    run_windows,
    train_step,
)
from helpers.tolerances import assert_difference_close
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError, LiveProbeWarning, NonFiniteError, OutOfOrderError

K = 4


def _steps(tokenizer, texts, n_steps: int, micro: int = 4) -> list[list[dict]]:
    return [[micro_batch(tokenizer, texts[i * micro : (i + 1) * micro], start=0)] for i in range(n_steps)]


def test_early_tangent_is_the_pca_of_the_early_activations_and_scores_earlier_windows(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, 4)
    twin = copy.deepcopy(model)
    rows, snapshots = run_windows(
        model, tokenizer, steps, lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=2)
    )
    assert [row["step"] for row in rows] == [0, 1, 2, 3]
    assert [row["retrospective"] for row in rows] == [True, True, False, False]
    assert all(row["ci_low"] < row["energy_share"] < row["ci_high"] for row in rows)
    # The tangent: a PCA of the rows the probe reads on the same batches with the weights of steps 0 and 1.
    activations = []
    for snapshot, batches in zip(snapshots[:2], steps[:2], strict=True):
        mwsp = ModelWithSplitPoints(snapshot.eval(), split_point=1, tokenizer=tokenizer, batch_size=4)
        activations.append(ia.GradientProbe(mwsp, objective="causal_lm").gradients(probe_inputs(batches)).activations)
    mwsp = ModelWithSplitPoints(copy.deepcopy(snapshots[0]).eval(), split_point=1, tokenizer=tokenizer)
    expected = ia.PCATangent(mwsp, nb_concepts=K).fit(torch.cat(activations).float()).subspace
    with ia.TrainingProbe(twin, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=2) as probe:
        optimizer = torch.optim.SGD(twin.parameters(), lr=0.05)
        for batches in steps[:2]:
            train_step(twin, probe, batches, optimizer)
        fitted = probe.points["gpt_neox.layers.1"].schedule.tangent
    assert np.max(fitted.principal_angles(expected)) < 1e-3
    # A retrospective window equals the same window scored with that tangent given from the start: its tangent's
    # shares and statistics, and its bootstrap interval (the same sequences' energies, resampled with the same seed).
    # Its controls and random subspaces are its own (drawn from the seed of its step and tangent kind, "early" here,
    # "given" there): they equal the post-hoc probe's with the row's draw_seed.
    given_rows, _ = run_windows(
        float64_copy(gpt_neox_training_model)[0],
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=fitted, n_controls=20),
    )
    drawn = {
        "control_energy_shares",
        "random_energy_shares",
        "isoscore_star_without_controls",
        "delta_isoscore_star_random",
    }
    assert len({row["draw_seed"] for row in rows}) == len(rows)  # no two windows share a draw
    for live, given, snapshot, batches in zip(rows, given_rows, snapshots, steps, strict=True):
        assert live["draw_seed"] != given["draw_seed"]
        for name in set(COMPARED) - drawn:
            np.testing.assert_allclose(live[name], given[name], rtol=1e-6, err_msg=name)
        assert_same_window(
            live, post_hoc(snapshot, tokenizer, batches, fitted, objective="causal_lm", draw_seed=live["draw_seed"])
        )


def test_retrospective_windows_without_room_for_their_rows_have_no_interval(gpt_neox_training_model, texts):
    """When max_pending_bytes holds the windows' moments but not their rows, the later windows keep their moments
    only (a warning says so): the same shares from G^T G, no interval."""
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, 3)
    moments = 2 * 64 * 64 * 8  # two windows await the tangent
    rows_of_a_window = 4 * max(batch["input_ids"].shape[1] for [batch] in steps[:2]) * 64 * 4
    with pytest.warns(LiveProbeWarning, match=r"gpt_neox\.layers\.1.*max_pending_bytes"):
        rows, _ = run_windows(
            model,
            tokenizer,
            steps,
            lambda m: ia.TrainingProbe(
                m, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=2, max_pending_bytes=moments + rows_of_a_window
            ),
        )
    assert [row["ci_low"] is None for row in rows] == [False, True, False]
    kept_all, _ = run_windows(
        float64_copy(gpt_neox_training_model)[0],
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=2),
    )
    for without, kept in zip(rows, kept_all, strict=True):
        np.testing.assert_allclose(without["energy_share"], kept["energy_share"], rtol=1e-6)
        np.testing.assert_allclose(without["control_energy_shares"], kept["control_energy_shares"], rtol=1e-6)


def test_refit_every_two_steps(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    rows, _ = run_windows(
        model,
        tokenizer,
        _steps(tokenizer, texts, 6),
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, nb_concepts=K, tangent="refit", refit_every=2),
    )
    assert [row["tangent"] for row in rows] == ["refit"] * 6
    assert [row["tangent_fitted_at"] for row in rows] == [2, 2, 2, 2, 4, 4]  # the first two scored retrospectively
    assert [row["retrospective"] for row in rows] == [True, True, False, False, False, False]


def test_evaluation_forwards_are_ignored(gpt_neox_training_model, texts):
    tangent = ia.Subspace.random(64, K, seed=0)
    results = []
    for evaluate in (False, True):
        model, tokenizer = float64_copy(gpt_neox_training_model)
        steps = _steps(tokenizer, texts, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        with ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=tangent) as probe:
            rows = []
            for batches in steps:
                if evaluate:
                    model.eval()
                    with torch.no_grad():
                        model(**{key: batches[0][key] for key in ("input_ids", "attention_mask", "labels")})
                    model.train()
                rows += train_step(model, probe, batches, optimizer)
        results.append([row["energy_share"] for row in rows])
    assert results[0] == results[1]


def _nan_run(model, tokenizer, texts, **options):
    steps = _steps(tokenizer, texts, 1, micro=2) + _steps(tokenizer, texts[2:], 1, micro=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=ia.Subspace.random(64, K, seed=0), **options) as p:
        for index, batches in enumerate(steps):
            batch = batches[0]
            loss = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            ).loss
            torch.autograd.backward(loss * (float("nan") if index == 1 else 1.0))
        optimizer.zero_grad()
        return p.step()


def test_nonfinite_micro_batches_raise_or_are_skipped(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    with pytest.raises(NonFiniteError, match="on_nonfinite='skip'"):
        _nan_run(model, tokenizer, texts)
    rows = _nan_run(model, tokenizer, texts, on_nonfinite="skip")
    assert rows[0]["n_skipped_batches"] == 1 and rows[0]["window_micro_batches"] == 2
    assert np.isfinite(rows[0]["energy_share"])


def test_rows_on_disk_are_a_sweep_result(gpt_neox_training_model, texts, tmp_path):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    results_dir = tmp_path / "live"
    steps = _steps(tokenizer, texts, 3)

    def make(m, **options):
        return ia.TrainingProbe(
            m, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=1, results_dir=results_dir, **options
        )

    rows, _ = run_windows(model, tokenizer, steps, make)
    table = ia.SweepResult.load(results_dir)
    assert table.rows == json.loads(json.dumps(rows)) and {row["source"] for row in table.rows} == {"live"}
    assert (results_dir / "reference" / "1.safetensors").exists()
    assert ia.write_report(table, tmp_path / "report").exists()
    # A resumed run keeps the rows before its start step and replaces the later ones.
    resumed = ia.TrainingProbe(
        model, 1, tokenizer=tokenizer, nb_concepts=K, early_steps=1, results_dir=results_dir, start_step=2
    )
    with resumed:
        train_step(model, resumed, steps[2], torch.optim.SGD(model.parameters(), lr=0.05))
    assert ia.SweepResult.load(results_dir).steps == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="nb_concepts"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, nb_concepts=2, early_steps=1, results_dir=results_dir).attach()


# ---------------------------------------------------------------------------------------------------- bad input
def test_unknown_split_point(gpt_neox_training_model):
    model, tokenizer = gpt_neox_training_model
    with pytest.raises(InvalidInputError, match=r"\b7\b.*gpt_neox\.layers\.3"):
        ia.TrainingProbe(model, 7, tokenizer=tokenizer, early_steps=1)
    with pytest.raises(InvalidInputError, match="'gpt_neox.nowhere'"):
        ia.TrainingProbe(model, "gpt_neox.nowhere", tokenizer=tokenizer, early_steps=1)


def test_tangent_of_the_wrong_width(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    with pytest.raises(InvalidInputError, match=r"R\^32.*d=64"):
        run_windows(
            model,
            tokenizer,
            _steps(tokenizer, texts, 1),
            lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=ia.Subspace.random(32, K, seed=0)),
        )


def test_tangent_of_another_split_point(gpt_neox_training_model):
    model, tokenizer = gpt_neox_training_model
    other = ia.Subspace.random(64, K, seed=0).replace(split_point="gpt_neox.layers.0")
    with pytest.raises(InvalidInputError, match="gpt_neox.layers.0"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=other)


def test_attach_twice_detach_unattached_step_detached(gpt_neox_training_model):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    probe = ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=1)
    with pytest.raises(OutOfOrderError, match=r"TrainingProbe.*attach\(\)"):
        probe.detach()
    with pytest.raises(OutOfOrderError, match=r"step\(\).*attach\(\)"):
        probe.step()
    with probe, pytest.raises(OutOfOrderError, match=r"detach\(\)"):
        probe.attach()
    assert not probe.attached


def test_backward_that_never_reaches_the_split_point(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    batch = _steps(tokenizer, texts, 1)[0][0]
    with ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=1) as probe:
        output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
        torch.autograd.backward(output.hidden_states[1].sum())  # below the split point's output
        with pytest.raises(InvalidInputError, match=r"'gpt_neox\.layers\.1'.*loss\.backward\(\)"):
            probe.step()


def test_window_without_training_forward_warns(gpt_neox_training_model):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    with (
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=1) as probe,
        pytest.warns(LiveProbeWarning, match="forward.*steps 0 to 0"),
    ):
        assert probe.step() == []


def test_bad_options(gpt_neox_training_model):
    model, tokenizer = gpt_neox_training_model
    with pytest.raises(InvalidInputError, match="early_steps"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer)
    with pytest.raises(InvalidInputError, match="refit_every"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent="refit", refit_every=3, every=2)
    with pytest.raises(InvalidInputError):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=1, objective="masked_lm")
    with pytest.raises(InvalidInputError, match="torch.compile"):
        ia.TrainingProbe(torch.compile(copy.deepcopy(model)), 1, tokenizer=tokenizer, early_steps=1)


def test_a_budget_without_room_for_one_waiting_window_is_refused_at_attach(gpt_neox_training_model):
    """The refusal comes from the model's width and the options when the probe attaches, before any training step."""
    model, tokenizer = float64_copy(gpt_neox_training_model)
    one_window = 64 * 64 * 8
    for points, budget in (([1], one_window - 1), ([0, 1], 2 * one_window - 1)):
        probe = ia.TrainingProbe(model, points, tokenizer=tokenizer, early_steps=100, max_pending_bytes=budget)
        with pytest.raises(InvalidInputError, match=f"max_pending_bytes.*{len(points) * one_window}"):
            probe.attach()
        assert not probe.attached
        ia.TrainingProbe(model, points, tokenizer=tokenizer, early_steps=100, max_pending_bytes=budget + 1).attach()
    given = ia.TrainingProbe(model, 1, tangent=ia.Subspace.random(64, 4, seed=0), max_pending_bytes=1)
    given.attach().detach()  # a given tangent keeps no window waiting


def _short_steps(tokenizer, texts, n_steps: int) -> list[list[dict]]:
    """One micro-batch of 2 sequences of 3 tokens per step: 1.5 KiB of (float32) gradient rows at d=64."""
    return [[micro_batch(tokenizer, texts[2 * i : 2 * i + 2], start=0, max_length=3)] for i in range(n_steps)]


@pytest.mark.parametrize(("capacity", "span"), [(4, 2), (3, 4)])
def test_waiting_windows_beyond_the_budget_merge_into_the_windows_of_their_steps(
    gpt_neox_training_model, texts, capacity, span
):
    """8 windows of one step await the tangent, `capacity` of them fit: consecutive ones merge, two by two, into
    windows of `span` steps, each scored as a run with every=`span` scores its window of the same steps (the same
    rows, the same per-sequence energies; the moments merged, so float32 rounding of their products apart)."""
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _short_steps(tokenizer, texts, 8)
    rows_per_window = 2 * 3 * 64 * 4
    assert all(batch["input_ids"].shape == (2, 3) for [batch] in steps)
    budget = (
        capacity * 64 * 64 * 8 + 8 * rows_per_window + 1024
    )  # the rows of 8 windows: less than one window's moments
    options = {"tokenizer": tokenizer, "nb_concepts": K, "early_steps": 8}
    with warnings.catch_warnings():
        warnings.simplefilter("error", LiveProbeWarning)
        merged, _ = run_windows(
            copy.deepcopy(model),
            tokenizer,
            steps,
            lambda m: ia.TrainingProbe(m, 1, max_pending_bytes=budget, **options),
        )
    expected, _ = run_windows(
        copy.deepcopy(model), tokenizer, steps, lambda m: ia.TrainingProbe(m, 1, every=span, **options)
    )
    assert [row["step"] for row in merged] == [row["step"] for row in expected] == list(range(span - 1, 8, span))
    for row, reference in zip(merged, expected, strict=True):
        assert row["retrospective"] and row["window_steps"] == span and row["ci_low"] is not None
        for name in ("window_first_step", "window_micro_batches", "n_tokens", "n_sequences", "draw_seed", "loss"):
            assert row[name] == pytest.approx(reference[name], rel=1e-15), name
        # from the kept rows' per-sequence energies, the same tensors in the same order: equal
        for name in ("energy_share", "ci_low", "ci_high"):
            assert row[name] == reference[name], name
        # from G^T G, whose products are float32 products of rows centred on a window's first micro-batch mean
        # (commons.accumulators): a merged window's later part is centred on its own, so its products round
        # differently (2^-24 relative each), the tolerance of the live rows against the post-hoc probe's (live_kit)
        for name in sorted(set(COMPARED) - {"energy_share", "ci_low", "ci_high"}):
            if name == "delta_isoscore_star_random":  # a difference of IsoScore* values: on its terms' scale
                terms = (reference["isoscore_star"], reference["isoscore_star"] + np.asarray(reference[name]))
                assert_difference_close(row[name], reference[name], *terms, rtol=1e-6, err_msg=name)
            else:
                np.testing.assert_allclose(row[name], reference[name], rtol=1e-6, err_msg=name)


def test_the_waiting_windows_stay_within_max_pending_bytes(gpt_neox_training_model, texts):
    """Over 12 steps with room for 2 windows and their rows: at every step the moments and rows held stay within
    max_pending_bytes, everything held within the documented bound, and the windows tile the steps."""
    model, tokenizer = float64_copy(gpt_neox_training_model)
    budget, dim = 2 * 64 * 64 * 8 + 12_000, 64
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=100, max_pending_bytes=budget) as probe:
        point = probe.points["gpt_neox.layers.1"]
        for batches in _short_steps(tokenizer, texts, 12):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LiveProbeWarning)  # the rows of 7 windows fit, not of 12
                train_step(model, probe, batches, optimizer)
            bounded, held = pending_bytes(point)
            sequences = sum(entry.sums.tally.usable_sequences for entry in point.pending)
            assert len(point.pending) <= 2 and bounded <= budget
            assert held <= bounded + len(point.pending) * (16 * dim + 8) + 18 * sequences
            firsts = [entry.first_step for entry in point.pending]
            assert firsts == [0] + [entry.step + 1 for entry in point.pending[:-1]]
            assert point.pending[-1].step == probe.steps_done - 1
    assert [entry.windows for entry in point.pending] == [8, 4]


def test_train_toy_with_a_live_probe(tmp_path):
    run = ia.demo.train_toy(
        tmp_path / "toy",
        steps=6,
        checkpoint_steps=[0, 6],
        hidden_size=32,
        num_layers=2,
        seq_len=16,
        batch_size=4,
        texts=[f"def f{i}(x):\n    return x * {i} + {i % 7}  # a line of code" for i in range(200)],
        progress=False,
        live={"split_points": 1, "early_steps": 2, "nb_concepts": 4, "n_controls": 5, "include_special": True},
    )
    table = ia.SweepResult.load(run.live_results)
    assert run.live_results == tmp_path / "toy" / "live" and table.steps == list(range(6))
    assert [row["retrospective"] for row in table.rows] == [True, True, False, False, False, False]
    assert all(row["n_tokens"] == 4 * 15 for row in table.rows)  # every token but the last (nothing to predict)
    with pytest.raises(InvalidInputError, match="split_points"):
        ia.demo.train_toy(tmp_path / "bad", steps=1, progress=False, live={"early_steps": 1})
