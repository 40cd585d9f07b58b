# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A live run stopped and restarted from a training checkpoint (`start_step`) goes on as if it had not stopped.

Recomputed another way: the rows of a run stopped, and resumed from the weights saved at its restart step, are the
rows of the same training never stopped, float for float, for an early and a refitted tangent; where the stopped
run's pooled activations are lost (a restart before a fit), the rows that depend on them are the ones that differ,
and a warning says so.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch
from helpers.live_kit import float64_copy, micro_batch, train_step

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import LiveProbeWarning, ResultsStoreError

K = 4
N_STEPS = 6


@pytest.fixture(scope="module")
def steps(gpt_neox_training_model, texts):
    _, tokenizer = gpt_neox_training_model
    return [[micro_batch(tokenizer, texts[i * 4 : (i + 1) * 4], start=0)] for i in range(N_STEPS)]


def _probe(model, tokenizer, results_dir, **options):
    options = {"early_steps": 2, **options}
    return ia.TrainingProbe(
        model, 1, tokenizer=tokenizer, nb_concepts=K, n_controls=5, results_dir=results_dir, flush_seconds=0, **options
    )


def _train(model, probe, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)  # no state: the weights are the whole checkpoint
    with probe:
        for batches in steps:
            train_step(model, probe, batches, optimizer)


def _stopped_and_resumed(pair, steps, results_dir, restart: int, **options) -> list[dict]:
    """Train past `restart`, stop; restart from the weights saved at `restart` with start_step=restart."""
    model, tokenizer = float64_copy(pair)
    saved = None
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with _probe(model, tokenizer, results_dir, **options) as probe:
        for index, batches in enumerate(steps[: restart + 1]):
            if index == restart:
                saved = copy.deepcopy(model.state_dict())
            train_step(model, probe, batches, optimizer)
    restarted, _ = float64_copy(pair)
    restarted.load_state_dict(saved)
    _train(restarted, _probe(restarted, tokenizer, results_dir, start_step=restart, **options), steps[restart:])
    return ia.SweepResult.load(results_dir).rows


def _uninterrupted(pair, steps, results_dir, **options) -> list[dict]:
    model, tokenizer = float64_copy(pair)
    _train(model, _probe(model, tokenizer, results_dir, **options), steps)
    return ia.SweepResult.load(results_dir).rows


@pytest.mark.parametrize(
    ("options", "restart"),
    [({}, 3), ({}, 2), ({"tangent": "refit", "refit_every": 2}, 4)],
    ids=["early-after-its-fit", "early-at-its-fit", "refit-at-a-fit"],
)
def test_a_resumed_run_gives_the_rows_of_the_run_never_stopped(
    gpt_neox_training_model, steps, tmp_path, recwarn, options, restart
):
    expected = _uninterrupted(gpt_neox_training_model, steps, tmp_path / "whole", **options)
    resumed = _stopped_and_resumed(gpt_neox_training_model, steps, tmp_path / "resumed", restart, **options)
    assert [row["step"] for row in expected] == list(range(N_STEPS))
    assert json.dumps(resumed) == json.dumps(expected)
    assert {row["change_reference_step"] for row in resumed} == {0}  # the stopped run's first window, read back
    assert not [warning for warning in recwarn if "resumes at step" in str(warning.message)]


def test_a_refit_run_resumed_between_fits_warns_and_differs_from_the_next_refit_on(
    gpt_neox_training_model, steps, tmp_path
):
    options = {"tangent": "refit", "refit_every": 2}
    expected = _uninterrupted(gpt_neox_training_model, steps, tmp_path / "whole", **options)
    with pytest.warns(LiveProbeWarning, match=r"step 3.*'gpt_neox\.layers\.1'.*step 4.*from 3\b"):
        resumed = _stopped_and_resumed(gpt_neox_training_model, steps, tmp_path / "resumed", 3, **options)
    assert json.dumps(resumed[:4]) == json.dumps(expected[:4])  # up to step 3: the tangent fitted at step 2
    assert resumed[4]["energy_share"] != expected[4]["energy_share"]  # fitted on step 3 alone, not steps 2 and 3


def test_an_early_run_resumed_before_its_fit_warns_that_the_windows_before_have_no_rows(
    gpt_neox_training_model, steps, tmp_path
):
    with pytest.warns(LiveProbeWarning, match=r"from 1 to 2.*steps 0 to 0"):
        resumed = _stopped_and_resumed(gpt_neox_training_model, steps, tmp_path, 1, early_steps=3)
    assert [row["step"] for row in resumed] == list(range(1, N_STEPS))


def test_a_resume_whose_tangent_file_is_missing_is_refused_naming_it(gpt_neox_training_model, steps, tmp_path):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    _train(model, _probe(model, tokenizer, tmp_path), steps[:3])
    reference = tmp_path / "reference" / "1.safetensors"
    reference.unlink()
    with pytest.raises(ResultsStoreError, match=rf"step 2.*{re.escape(str(reference))}"):
        _probe(model, tokenizer, tmp_path, start_step=3).attach()
    _probe(model, tokenizer, tmp_path, start_step=3, tangent="refit", refit_every=3, overwrite=True).attach().detach()


def _ranked_probe(model, tokenizer, results_dir, nb_concepts, **options):
    return ia.TrainingProbe(
        model,
        1,
        tokenizer=tokenizer,
        nb_concepts=nb_concepts,
        n_controls=5,
        results_dir=results_dir,
        flush_seconds=0,
        **options,
    )


def test_an_overwrite_leaves_no_tangent_of_the_earlier_run_for_a_resume(gpt_neox_training_model, steps, tmp_path):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    _train(model, _ranked_probe(model, tokenizer, tmp_path, 4, early_steps=2), steps[:3])  # reference of rank 4
    _train(model, _ranked_probe(model, tokenizer, tmp_path, 2, early_steps=5, overwrite=True), steps[:2])
    assert not (tmp_path / "reference").exists()
    with pytest.warns(LiveProbeWarning, match=r"\bfrom 2\b"):
        _train(model, _ranked_probe(model, tokenizer, tmp_path, 2, early_steps=5, start_step=2), steps[2:])
    rows = ia.SweepResult.load(tmp_path).rows
    assert rows and {row["rank"] for row in rows} == {2}


def test_a_resume_refuses_a_saved_tangent_of_another_rank_naming_it(gpt_neox_training_model, steps, tmp_path):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    _train(model, _ranked_probe(model, tokenizer, tmp_path / "four", 4, early_steps=2), steps[:3])
    _train(model, _ranked_probe(model, tokenizer, tmp_path / "two", 2, early_steps=2), steps[:1])
    (tmp_path / "two" / "reference").mkdir()
    reference = tmp_path / "two" / "reference" / "1.safetensors"
    reference.write_bytes((tmp_path / "four" / "reference" / "1.safetensors").read_bytes())
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(reference))}.*rank 4.*nb_concepts\b.*\b2\b"):
        _ranked_probe(model, tokenizer, tmp_path / "two", 2, early_steps=2, start_step=3).attach()
