# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What training added, live: each window's change from the first window of its curve (`results.change.
unpaired_change`), a difference without an interval, since two windows probe different training batches.

Recomputed another way: the post-hoc probe of each window's batches on the weights of its step gives the two
statistics whose difference the row's change must be.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.live_kit import float64_copy, micro_batch, post_hoc, run_windows

import interpreto_anisotropy as ia
from interpreto_anisotropy.results.change import CHANGE_FIELDS, UNPAIRED_CHANGES
from interpreto_anisotropy.results.verdict import sweep_verdict

D, K, WINDOWS = 64, 4, 3


def test_each_window_holds_its_difference_from_the_first_window_without_an_interval(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    tangent = ia.Subspace.random(D, K, seed=1)
    steps = [[micro_batch(tokenizer, texts[4 * step : 4 * step + 4], start=0)] for step in range(WINDOWS)]
    make = lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean")  # noqa: E731
    rows, snapshots = run_windows(model, tokenizer, steps, make)
    references = [
        post_hoc(snapshot, tokenizer, batches, tangent, objective="causal_lm", draw_seed=row["draw_seed"])
        for row, snapshot, batches in zip(rows, snapshots, steps, strict=True)
    ]
    for row, reference in zip(rows, references, strict=True):
        assert row["change_reference_step"] == 0
        for name in UNPAIRED_CHANGES:
            expected = getattr(reference, name) - getattr(references[0], name)
            scale = abs(getattr(reference, name)) + abs(getattr(references[0], name))
            np.testing.assert_allclose(row[f"{name}_change"], expected, rtol=0, atol=1e-6 * scale, err_msg=name)
        given = {f"{name}_change" for name in UNPAIRED_CHANGES} | {"change_reference_step"}
        assert all(row[field] is None for field in CHANGE_FIELDS if field not in given)  # no interval, no p, no pairs
    assert all(rows[0][f"{name}_change"] == 0 for name in UNPAIRED_CHANGES)
    assert rows[-1]["energy_share_change"] != 0
    change = sweep_verdict(rows, ia.TrainingProbe(model, 1, tangent=tangent).config).curves[0].change
    last = rows[-1]
    assert f"energy share {rows[0]['energy_share']:.4f} at step 0 → {last['energy_share']:.4f} at step 2" in change
    assert f"{last['energy_share_change']:+.4f} (no interval: windows of different sequences)" in change


def test_the_change_is_recorded_as_the_rows_are_written(gpt_neox_training_model, texts, tmp_path):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = [[micro_batch(tokenizer, texts[4 * step : 4 * step + 4], start=0)] for step in range(2)]
    tangent = ia.Subspace.random(D, K, seed=1)
    make = lambda m: ia.TrainingProbe(m, 1, tangent=tangent, results_dir=tmp_path, flush_seconds=0)  # noqa: E731
    rows, _ = run_windows(model, tokenizer, steps, make)
    stored = ia.SweepResult.load(tmp_path).rows
    assert [row["energy_share_change"] for row in stored] == [row["energy_share_change"] for row in rows]
    assert stored[1]["energy_share_change"] == pytest.approx(stored[1]["energy_share"] - stored[0]["energy_share"])
