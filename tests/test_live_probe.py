# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe against the post-hoc probe: a window's statistics equal `GradientProbe.run` on the same batches with
the weights of that step (same tangent, same seeded controls), in float64, to a relative 1e-6.

Recomputed another way: the reference is `GradientProbe`, which runs its own forward and backward (eval mode,
frozen parameters, a leaf at the split point, summed loss), on a deep copy of the weights taken before the step.
Each real-setup variant (padding, masked LM, gradient accumulation, mean losses, gradient checkpointing, a gradient
scaler, a manual loss scale) is checked the same way.
"""

from __future__ import annotations

import pytest
import torch
from helpers.live_kit import assert_same_window, float64_copy, micro_batch, post_hoc, run_windows

import interpreto_anisotropy as ia

D, K = 64, 8


@pytest.fixture(scope="module")
def tangent():
    return ia.Subspace.random(D, K, seed=3)


def _steps(tokenizer, texts, *, per_step: int, micro: int, masked: bool = False, n_steps: int = 2) -> list[list[dict]]:
    """Micro-batches of `micro` texts of varied lengths (so padding and uneven micro-batches occur).

    A masked LM's masks are seeded by each sequence's index among its window's texts, the post-hoc probe's inputs.
    """
    steps, start = [], 0
    for _ in range(n_steps):
        batches = []
        for index in range(per_step):
            chunk = texts[start : start + micro]
            batches.append(micro_batch(tokenizer, chunk, start=index * micro, masked=masked))
            start += micro
        steps.append(batches)
    return steps


def _check(rows, snapshots, steps, tokenizer, tangent, objective):
    assert [row["step"] for row in rows] == list(range(len(steps)))
    for row, snapshot, batches in zip(rows, snapshots, steps, strict=True):
        reference = post_hoc(snapshot, tokenizer, batches, tangent, objective=objective, draw_seed=row["draw_seed"])
        assert_same_window(row, reference)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_causal_lm_with_padding(gpt_neox_training_model, texts, tangent, reduction):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, per_step=1, micro=6)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction=reduction),
        summed=reduction == "sum",
    )
    assert any((batch["attention_mask"] == 0).any() for batches in steps for batch in batches)  # padding present
    _check(rows, snapshots, steps, tokenizer, tangent, "causal_lm")


def test_masked_lm_with_seeded_masks(eurobert_training_model, texts, tangent):
    model, tokenizer = float64_copy(eurobert_training_model)
    steps = _steps(tokenizer, texts, per_step=1, micro=6, masked=True)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean"),
    )
    _check(rows, snapshots, steps, tokenizer, tangent, "masked_lm")


def test_gradient_accumulation_pools_uneven_micro_batches(gpt_neox_training_model, texts, tangent):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, per_step=3, micro=3)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean", loss_scale=1 / 3),
        loss_scale=1 / 3,
    )
    assert all(row["window_micro_batches"] == 3 for row in rows)
    _check(rows, snapshots, steps, tokenizer, tangent, "causal_lm")


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradient_checkpointing_never_double_counts(gpt_neox_training_model, texts, tangent, reentrant):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    kwargs = {"use_reentrant": reentrant}
    try:
        enable(activation_checkpointing_kwargs=kwargs)
    except TypeError:
        enable(gradient_checkpointing_kwargs=kwargs)
    steps = _steps(tokenizer, texts, per_step=2, micro=3)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean"),
    )
    _check(rows, snapshots, steps, tokenizer, tangent, "causal_lm")


def test_gradient_scaler_is_undone(gpt_neox_training_model, texts, tangent):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)  # the scale changes every step
    assert scaler.is_enabled()
    steps = _steps(tokenizer, texts, per_step=2, micro=3)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean", grad_scaler=scaler),
        scaler=scaler,
    )
    _check(rows, snapshots, steps, tokenizer, tangent, "causal_lm")


def test_manual_loss_scale_is_undone(gpt_neox_training_model, texts, tangent):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, per_step=2, micro=3)
    rows, snapshots = run_windows(
        model,
        tokenizer,
        steps,
        lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean", loss_scale=512.0),
        loss_scale=512.0,
    )
    _check(rows, snapshots, steps, tokenizer, tangent, "causal_lm")


def test_mean_losses_need_the_rescaling(gpt_neox_training_model, texts, tangent):
    # The control of the test above: micro-batches of unequal token counts, a mean loss declared as a sum, differ.
    model, tokenizer = float64_copy(gpt_neox_training_model)
    steps = _steps(tokenizer, texts, per_step=3, micro=3, n_steps=1)
    with pytest.warns(ia.errors.LiveProbeWarning, match="reduction='mean'"):  # and the probe says so
        rows, snapshots = run_windows(
            model,
            tokenizer,
            steps,
            lambda m: ia.TrainingProbe(m, 1, tokenizer=tokenizer, tangent=tangent, reduction="sum"),
        )
    reference = post_hoc(
        snapshots[0], tokenizer, steps[0], tangent, objective="causal_lm", draw_seed=rows[0]["draw_seed"]
    )
    assert (
        abs(rows[0]["energy_share"] - reference.energy_share) > 10 * 1e-6 * reference.energy_share
    )  # ten times the tolerance of equality


ALBERT_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0"


@pytest.fixture(scope="module")
def albert_training_model(corpus_texts):
    """A tiny ALBERT (one layer shared by 3 layers: its split point runs 3 times per forward), float64, trainable."""
    from architectures import FAMILIES, VOCAB, build

    from interpreto_anisotropy.demo import train_tokenizer

    tokenizer = train_tokenizer(corpus_texts, arch="eurobert", vocab_size=VOCAB)
    return build(FAMILIES["albert_first"], tokenizer, layers=3).train().requires_grad_(True), tokenizer


def test_a_shared_layer_is_read_at_the_call_chosen_as_the_post_hoc_probe_reads_it(albert_training_model, texts):
    model, tokenizer = albert_training_model
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=3)
    steps = _steps(tokenizer, texts, per_step=1, micro=6, masked=True, n_steps=1)
    shares = {}
    for call in ("first", "last"):
        rows, snapshots = run_windows(
            float64_copy((model, tokenizer))[0],
            tokenizer,
            steps,
            lambda m, call=call: ia.TrainingProbe(
                m, ALBERT_LAYER, tokenizer=tokenizer, tangent=tangent, reduction="mean", call=call
            ),
        )
        (row,) = rows
        reference = post_hoc(
            snapshots[0],
            tokenizer,
            steps[0],
            tangent,
            objective="masked_lm",
            draw_seed=row["draw_seed"],
            split_point=ALBERT_LAYER,
            call=call,
        )
        assert_same_window(row, reference)
        shares[call] = row["energy_share"]
    assert abs(shares["first"] - shares["last"]) > 1e-3 * shares["last"]  # the two calls are different reads


def test_a_shared_layer_without_call_is_our_error(albert_training_model, texts):
    model, tokenizer = float64_copy(albert_training_model)
    steps = _steps(tokenizer, texts, per_step=1, micro=2, masked=True, n_steps=1)
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=3)
    with pytest.raises(ia.errors.InvalidInputError, match=r"(?s)albert_layers\.0.*runs 3 times.*call='last'"):
        run_windows(model, tokenizer, steps, lambda m: ia.TrainingProbe(m, ALBERT_LAYER, tangent=tangent))
