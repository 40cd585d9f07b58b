# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The early window of the reference tangent: a fraction of the training length (known to presets) or of the last
swept step, step 0 in or out, and the early checkpoints pooled as they are or each centred on its own mean
(recomputed here by hand from the activations)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons.accumulators import top_eigenvectors
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.reading.activations import token_activations
from interpreto_anisotropy.sweeps.checkpoints import Checkpoint, CheckpointList
from interpreto_anisotropy.sweeps.config import SweepConfig, SweepPlan, early_checkpoints

STEPS = (0, 1, 2, 4, 8, 20)
SETTINGS = {"split_point": 1, "nb_concepts": 3, "n_controls": 3, "seed": 0, "max_fit_tokens": 400, "progress": False}


def _run(steps=STEPS):
    return [Checkpoint(step, f"/runs/{step}") for step in steps]


# ---------------------------------------------------------------------------------------------- which checkpoints
@pytest.mark.parametrize(
    ("options", "early"),
    [
        ({}, [0, 1, 2, 4]),  # 0.3 x 20 (the last swept step)
        ({"total_steps": 100}, [0, 1, 2, 4, 8, 20]),  # 0.3 x 100
        ({"total_steps": 20, "without_init": True}, [1, 2, 4]),
        ({"total_steps": 1000, "without_init": True}, [1, 2, 4, 8, 20]),
    ],
)
def test_early_checkpoints(options, early):
    assert [c.step for c in early_checkpoints(_run(), 0.3, **options)] == early


def test_without_init_keeps_one_checkpoint_when_step_0_is_all_that_is_early():
    assert [c.step for c in early_checkpoints(_run((0, 100, 200)), 0.1, without_init=True)] == [100]


@given(
    steps=st.sets(st.integers(0, 10_000), min_size=1, max_size=12),
    low=st.floats(0.01, 1.0),
    high=st.floats(0.01, 1.0),
    without_init=st.booleans(),
)
def test_a_larger_fraction_never_drops_an_early_checkpoint(steps, low, high, without_init):
    low, high = sorted((low, high))
    run = _run(sorted(steps))
    small = {c.step for c in early_checkpoints(run, low, without_init=without_init)}
    large = {c.step for c in early_checkpoints(run, high, without_init=without_init)}
    assert small and small <= large


def test_presets_know_the_training_length_and_settings_use_it(tmp_path):
    pythia = ia.checkpoints.pythia("70m", [0, 1000, 60_000, 143_000])
    assert isinstance(pythia, CheckpointList) and pythia.total_steps == 143_000
    texts = ["one text here", "another text there"]
    config = SweepConfig(results_dir=tmp_path, split_point=1)
    settings = SweepPlan(dataclasses.replace(config, early_without_init=True), pythia, texts=texts)
    assert [c.step for c in settings.early] == [1000]  # 0.3 x 143000 = 42900, step 0 left out
    assert settings.record()["total_steps"] == 143_000 and settings.record()["early_without_init"] is True
    shorter = SweepPlan(dataclasses.replace(config, total_steps=200_000), pythia, texts=texts)
    assert [c.step for c in shorter.early] == [0, 1000, 60_000]
    default = SweepPlan(config, _run(), texts=texts).record()
    assert not {"total_steps", "early_without_init", "early_centering"} & set(default)  # older sweeps resume


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"total_steps": 10}, r"total_steps=10.*step 20"),
        ({"total_steps": 0}, "total_steps"),
        ({"early_centering": "each"}, "early_centering.*'pooled'.*'per_checkpoint'"),
        ({"early_centering": "per_checkpoint", "method": "nmf"}, "early_centering='per_checkpoint'.*method='nmf'"),
    ],
)
def test_bad_early_window_options_are_refused_naming_them(options, named, tmp_path):
    with pytest.raises(InvalidInputError, match=named):
        SweepPlan(SweepConfig(results_dir=tmp_path, split_point=1, **options), _run(), texts=["a b", "c d"])


# ---------------------------------------------------------------------------------------------- centring
def _by_hand(checkpoints, fit_texts, *, centred_per_checkpoint):
    """The top principal subspace of the early activations, each checkpoint centred on its own mean or not."""
    parts, raw = [], []
    for checkpoint in checkpoints:
        with ia.checkpoints.loaded(checkpoint, device="cpu") as (model, tokenizer):
            splitter = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=8)
            rows, _ = token_activations(splitter, fit_texts, batch_size=8, max_tokens=SETTINGS["max_fit_tokens"])
            rows = rows.double()
            raw.append(rows)
            parts.append(rows - rows.mean(0) if centred_per_checkpoint else rows)
    pooled = torch.cat(parts)
    _, vectors = top_eigenvectors(torch.cov(pooled.T, correction=0), SETTINGS["nb_concepts"])
    return ia.Subspace(vectors.float().contiguous()), torch.cat(raw).mean(0)  # the mean of the rows as read


@pytest.mark.slow
@pytest.mark.parametrize("method", ["pca", "svd"])  # streamed moments, pooled rows
def test_per_checkpoint_centring_fits_the_within_checkpoint_principal_subspace(
    method, toy_checkpoints, fit_texts, texts, tmp_path
):
    checkpoints = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))
    options = {"texts": fit_texts[:12], "probe_texts": texts[:10], "method": method, **SETTINGS}
    references = {}
    for centering in ("pooled", "per_checkpoint"):
        sweep = ia.CheckpointSweep(
            checkpoints[-2:-1] + checkpoints[:4],  # early: steps 0, 1, 2 (0.3 x 8)
            results_dir=tmp_path / centering,
            early_centering=centering,
            **options,
        )
        sweep.run()
        references[centering] = ia.Subspace.load(tmp_path / centering / "reference" / "1.safetensors")
    early = [c for c in checkpoints if c.step in (0, 1, 2)]
    for centering, reference in references.items():
        expected, mean = _by_hand(early, fit_texts[:12], centred_per_checkpoint=centering == "per_checkpoint")
        assert reference.info["early_steps"] == [0, 1, 2]
        assert max(reference.principal_angles(expected)) < 1e-2, centering
        torch.testing.assert_close(reference.mean.double(), mean, rtol=1e-4, atol=1e-5)
    assert max(references["pooled"].principal_angles(references["per_checkpoint"])) > 0.05  # the choice matters
    config = json.loads((tmp_path / "per_checkpoint" / "config.json").read_text())
    assert config["early_centering"] == "per_checkpoint"
