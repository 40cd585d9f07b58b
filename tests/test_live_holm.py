# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's R' (`LiveConfig.n_random`, `live.options.window_n_random`): sized for Holm over a split point's
windows when the run's length is known, so that a strong signal can pass; `n_controls` when it is not, and the
verdict then says what it would need; an explicit R' that cannot pass is warned about when the probe is made.

Recomputed another way: the smallest R' whose floor passes is found with exact fractions, each window's exact p from
its row's random shares, Holm's adjustment by hand, and one window against the post-hoc probe with the same R'.
"""

from __future__ import annotations

import copy
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from helpers.live_kit import assert_same_window, float64_copy, micro_batch, post_hoc, probe_inputs, run_windows
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import DegenerateStatisticsWarning
from interpreto_anisotropy.results.verdict import floor_passes, sweep_verdict

WINDOWS, K, LEVEL = 30, 4, 0.05


def _smallest_passing(windows: int) -> int:
    """The smallest R' whose floor 1 / (R' + 1) lies strictly below LEVEL / windows, in exact fractions."""
    n_random = 1
    while Fraction(1, n_random + 1) >= Fraction(1, 20) / windows:
        n_random += 1
    return n_random


def _holm(p_values: list[float]) -> np.ndarray:
    """Holm's step-down adjustment, written out: the i-th smallest times (m - i), running maximum, capped at 1."""
    order = np.argsort(p_values, kind="stable")
    m = len(p_values)
    scaled = np.minimum(1.0, np.maximum.accumulate([(m - i) * p_values[j] for i, j in enumerate(order)]))
    adjusted = np.empty(m)
    adjusted[order] = scaled
    return adjusted


def _steps(tokenizer, texts, count: int) -> list[list[dict]]:
    """`count` optimizer steps of one micro-batch of 4 texts each, cycling over the texts."""
    chunks = [texts[start : start + 4] for start in range(0, len(texts), 4)]
    return [[micro_batch(tokenizer, chunks[step % len(chunks)], start=0)] for step in range(count)]


def _gradient_tangent(model, tokenizer, batches: list[dict]) -> ia.Subspace:
    """The top-K right singular vectors of the split point's gradient rows on `batches` (weights of step 0): a
    tangent the training gradients keep most of their energy in."""
    mwsp = ModelWithSplitPoints(copy.deepcopy(model).eval(), split_point=1, tokenizer=tokenizer, batch_size=4)
    gradients = ia.GradientProbe(mwsp, objective="causal_lm", seed=0).gradients(probe_inputs(batches)).gradients
    basis = torch.linalg.svd(gradients.double(), full_matrices=False).Vh[:K].T
    return ia.Subspace(basis.contiguous(), name="gradient-top")


def test_a_run_of_known_length_draws_enough_for_holm_over_its_windows(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, WINDOWS)
    tangent = _gradient_tangent(model, tokenizer, [batch for step in steps[:8] for batch in step])
    options = {"tokenizer": tokenizer, "tangent": tangent, "reduction": "mean"}
    rows, snapshots = run_windows(
        model, tokenizer, steps, lambda m: ia.TrainingProbe(m, 1, total_steps=WINDOWS, **options), lr=1e-3
    )
    n_random = _smallest_passing(WINDOWS)
    assert n_random >= 600 and floor_passes(n_random, WINDOWS) and not floor_passes(n_random - 1, WINDOWS)
    assert len(rows) == WINDOWS and {row["n_random"] for row in rows} == {n_random}
    for row in rows:  # each exact p from its own random shares: 1/(R' + 1) when none reaches the tangent's share
        beaten = sum(share >= row["energy_share"] for share in row["random_energy_shares"])
        assert len(row["random_energy_shares"]) == n_random
        assert row["p_value_exact"] == pytest.approx((1 + beaten) / (n_random + 1), rel=1e-12)
    result = ia.TrainingProbe(model, 1, total_steps=WINDOWS, **options)  # the config a run of this length records
    assert result.config["n_random"] == n_random
    table = ia.SweepResult(rows, result.config, None).adjusted("holm")
    holm = table.column("p_value_exact_holm")
    np.testing.assert_allclose(holm, _holm([row["p_value_exact"] for row in rows]), rtol=1e-12)
    assert min(holm) <= LEVEL
    curve = sweep_verdict(rows, result.config).curves[0]
    assert curve.n_significant == sum(value <= LEVEL for value in holm) >= 1 and curve.resolution == ""
    last = rows[-1]  # the post-hoc probe with the window's draw and R' agrees with the live window
    reference = post_hoc(
        snapshots[-1],
        tokenizer,
        steps[-1],
        tangent,
        objective="causal_lm",
        draw_seed=last["draw_seed"],
        n_random=n_random,
    )
    assert_same_window(last, reference)


def test_a_run_of_unknown_length_draws_n_controls_and_the_verdict_says_what_it_needs(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    windows = 3
    tangent = ia.Subspace.random(64, K, seed=0)
    rows, _ = run_windows(
        model,
        tokenizer,
        _steps(tokenizer, texts, windows),
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, n_controls=5, n_bootstrap=20),
    )
    assert {row["n_random"] for row in rows} == {5} and {len(row["random_energy_shares"]) for row in rows} == {5}
    config = ia.TrainingProbe(model, 1, tangent=tangent, n_controls=5).config
    assert "n_random" not in config  # as before n_random existed: such results directories still resume
    curve = sweep_verdict(rows, config).curves[0]
    # Holm passes when windows x 1/(R' + 1) <= LEVEL: with 3 windows, from R' = 59 on (60 x LEVEL = 3)
    needed = next(r for r in range(1, 10_000) if Fraction(windows, r + 1) <= Fraction(1, 20))
    assert curve.n_significant == 0
    assert f"the smallest p_value_exact is 1/6 = {1 / 6:.3f}" in curve.resolution
    assert f"over a curve of {windows} rows Holm cannot go below {LEVEL}" in curve.resolution
    assert f"ask for n_random={needed} or more" in curve.resolution


def test_an_explicit_n_random_that_cannot_pass_over_the_windows_is_warned_about(gpt_neox_training_model):
    model, _ = gpt_neox_training_model
    tangent = ia.Subspace.random(64, K, seed=0)
    with pytest.warns(DegenerateStatisticsWarning, match=r"n_random=20.*\b30 rows.*n_random=600"):
        probe = ia.TrainingProbe(model, 1, tangent=tangent, total_steps=WINDOWS, n_random=20)
    assert probe.n_random == 20 and "n_random" not in probe.config  # R' = n_controls: the config of earlier runs
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateStatisticsWarning)  # one that passes says nothing
        assert ia.TrainingProbe(model, 1, tangent=tangent, total_steps=WINDOWS, n_random=600).n_random == 600
    # every=3 leaves 10 windows: R' = 200, the smallest that passes over them
    assert ia.TrainingProbe(model, 1, tangent=tangent, total_steps=WINDOWS, every=3).n_random == _smallest_passing(10)
