# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe warns, once, when the gradients it captures scale as the other `reduction` says.

Recomputed another way: the ratio the warning gives is the largest ratio of two micro-batches' numbers of loss terms
within a window, counted here from their labels; the scale the check reads from the logits' gradient is 1 / n_j for
a mean loss under "sum" (n_j counted from the labels), and one once the probe's weight is right.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from helpers.live_kit import float64_copy, micro_batch, summed_causal_loss, train_step

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import LiveProbeWarning
from interpreto_anisotropy.live import tokens

pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")


def _steps(tokenizer, texts, *, n_steps: int, per_step: int, micro: int = 2, masked: bool = False) -> list[list[dict]]:
    """Micro-batches of `micro` texts of varied lengths: uneven numbers of loss terms."""
    chunks = [texts[i * micro : (i + 1) * micro] for i in range(n_steps * per_step)]
    batches = [micro_batch(tokenizer, chunk, start=0, masked=masked) for chunk in chunks]
    return [batches[s * per_step : (s + 1) * per_step] for s in range(n_steps)]


def _train(pair, steps, *, summed: bool = False, scaler=None, loss_scale: float = 1.0, **options) -> list:
    """Train a copy under a `TrainingProbe` (a given tangent, one window per `every` steps); the warnings raised."""
    model, tokenizer = float64_copy(pair)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LiveProbeWarning)
        probe = ia.TrainingProbe(
            model, 1, tokenizer=tokenizer, tangent=tangent, n_controls=3, n_bootstrap=20, grad_scaler=scaler, **options
        )
        with probe:
            for batches in steps:
                train_step(model, probe, batches, optimizer, summed=summed, scaler=scaler, loss_scale=loss_scale)
    return [warning for warning in caught if issubclass(warning.category, LiveProbeWarning)]


def _terms(batch: dict) -> int:
    """A causal micro-batch's loss terms: its labels after the first position other than -100."""
    return int((batch["labels"][:, 1:] != -100).sum())


def _largest_ratio(steps, every: int) -> float:
    """The largest ratio of two checked micro-batches' loss terms within a window of `every` steps (the first
    `tokens.MICRO_BATCHES` micro-batches are checked)."""
    window_of = [i // every for i, batches in enumerate(steps) for _ in batches][: tokens.MICRO_BATCHES]
    checked = [batch for batches in steps for batch in batches][: tokens.MICRO_BATCHES]
    windows = [[b for b, w in zip(checked, window_of, strict=True) if w == window] for window in set(window_of)]
    return max(max(map(_terms, window)) / min(map(_terms, window)) for window in windows if len(window) > 1)


def test_a_mean_loss_declared_summed_warns_once_with_the_ratio_of_its_micro_batches(gpt_neox_training_model, texts):
    steps = _steps(gpt_neox_training_model[1], texts, n_steps=4, per_step=3)  # 12 micro-batches: 8 are checked
    assert len({_terms(batch) for batch in steps[0]}) > 1  # uneven
    caught = _train(gpt_neox_training_model, steps, reduction="sum")
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "reduction='mean'" in message
    ratio = float(re.search(r"up to ([0-9.]+) times", message).group(1))
    assert ratio == pytest.approx(_largest_ratio(steps, 1), rel=1e-2)  # printed to 3 significant digits
    assert caught[0].filename.endswith("live_kit.py")  # said at the step() that closed the window


def test_the_right_reduction_does_not_warn(gpt_neox_training_model, texts):
    steps = _steps(gpt_neox_training_model[1], texts, n_steps=2, per_step=3)
    assert _train(gpt_neox_training_model, steps, reduction="mean") == []
    assert _train(gpt_neox_training_model, steps, reduction="sum", summed=True) == []
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)  # the scale changes every step
    assert _train(gpt_neox_training_model, steps, reduction="mean", loss_scale=1 / 3, scaler=scaler) == []


def test_a_summed_loss_declared_mean_warns(gpt_neox_training_model, texts):
    steps = _steps(gpt_neox_training_model[1], texts, n_steps=2, per_step=3)
    caught = _train(gpt_neox_training_model, steps, reduction="mean", summed=True)
    assert len(caught) == 1 and "reduction='sum'" in str(caught[0].message)
    assert caught[0].filename == __file__  # said when the probe detaches (6 micro-batches checked, fewer than 8)


def test_a_masked_lm_mean_loss_declared_summed_warns(eurobert_training_model, texts):
    steps = _steps(eurobert_training_model[1], texts, n_steps=2, per_step=3, masked=True)
    assert len(_train(eurobert_training_model, steps, reduction="sum")) == 1
    assert _train(eurobert_training_model, steps, reduction="mean") == []


def test_one_micro_batch_per_window_weighs_nothing_unevenly(gpt_neox_training_model, texts):
    """A factor common to a window's micro-batches changes no figure: a mean loss under "sum", every=1, no
    accumulation, is not warned about; with every=2 its windows hold two micro-batches, and it is."""
    steps = _steps(gpt_neox_training_model[1], texts, n_steps=4, per_step=1)
    assert _train(gpt_neox_training_model, steps, reduction="sum") == []
    caught = _train(gpt_neox_training_model, steps, reduction="sum", every=2)
    assert len(caught) == 1
    ratio = float(re.search(r"up to ([0-9.]+) times", str(caught[0].message)).group(1))
    assert ratio == pytest.approx(_largest_ratio(steps, 2), rel=1e-2)


def test_the_scale_read_from_the_logits_is_one_over_the_terms_of_a_mean_loss(gpt_neox_training_model, texts):
    model, tokenizer = float64_copy(gpt_neox_training_model)
    batches = _steps(tokenizer, texts, n_steps=1, per_step=3)[0]
    check = tokens.ScaleCheck(ia.objectives.ObjectiveName.CAUSAL_LM, ia.objectives.Reduction.SUM, lambda _: None)
    for batch in batches:
        output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        output.logits.register_hook(check.watch(batch, output.logits.detach(), window=0))
        torch.autograd.backward(output.loss)
        summed = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        summed.logits.register_hook(check.watch(batch, summed.logits.detach(), window=1))
        torch.autograd.backward(summed_causal_loss(summed, batch))
    read = [(window, float(value), int(terms)) for window, value, terms in check.samples]
    for (_, mean_scale, terms), (_, sum_scale, _), batch in zip(read[::2], read[1::2], batches, strict=True):
        assert terms == _terms(batch)
        assert mean_scale == pytest.approx(1 / terms, rel=1e-6)  # the model's loss is taken in float32
        assert sum_scale == pytest.approx(1.0, rel=1e-6)  # the model's loss is taken in float32


def test_a_classifier_mean_loss_over_uneven_batches_declared_summed_warns(gpt_neox_classifier_model, texts):
    model, tokenizer = float64_copy(gpt_neox_classifier_model)
    sizes = [2, 3, 2, 3]  # one step of 4 micro-batches: the mean divides by 2 or 3 sequences
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    batches = [
        tokenizer(texts[s : s + n], padding=True, return_tensors="pt") for s, n in zip(starts, sizes, strict=True)
    ]

    def train(reduction: str) -> list:
        trained = float64_copy((model, tokenizer))[0]
        tangent = ia.Subspace.random(trained.config.hidden_size, 4, seed=3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LiveProbeWarning)
            with ia.TrainingProbe(trained, 1, tokenizer=tokenizer, tangent=tangent, reduction=reduction) as probe:
                for batch in batches:
                    labels = torch.arange(batch["input_ids"].shape[0]) % 2
                    trained(**batch, labels=labels).loss.backward()
                probe.step()
        return [warning for warning in caught if issubclass(warning.category, LiveProbeWarning)]

    caught = train("sum")
    assert len(caught) == 1
    assert float(re.search(r"up to ([0-9.]+) times", str(caught[0].message)).group(1)) == pytest.approx(3 / 2)
    assert train("mean") == []
