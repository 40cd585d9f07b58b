# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe at real widths (d = 768, Pythia-160m's, and d = 2048, OLMo-1B's) with its default options: a
`TrainingProbe` run and an `AnisotropyCallback` under a Trainer of Pythia's 143,000 steps are accepted when they
attach, and the windows awaiting the early tangent hold what docs/how-to/live-probe.md says (counted from the
tensors themselves). The models have one layer, a vocabulary of 64 and an MLP of 32: only the width matters here.
"""

from __future__ import annotations

import pytest
import torch
from helpers.live_kit import pending_bytes
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Trainer, TrainerCallback, TrainingArguments

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import DegenerateStatisticsWarning, InvalidInputError
from interpreto_anisotropy.live.callback import AnisotropyCallback
from interpreto_anisotropy.live.options import MAX_LIVE_N_RANDOM, MAX_PENDING_BYTES
from interpreto_anisotropy.results.verdict import floor_passes

PYTHIA_STEPS = 143_000
VOCAB, LENGTH, BATCH = 64, 8, 2


def _wide_model(width: int) -> GPTNeoXForCausalLM:
    config = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=LENGTH,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    torch.manual_seed(0)
    return GPTNeoXForCausalLM(config).train()


def _ids(step: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(step))


# At d=2048 the default share holds 32 windows' moments and no gradient rows: the warning says so, as intended.
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.LiveProbeWarning")
@pytest.mark.parametrize("width", [768, 2048])
def test_a_training_probe_with_its_defaults_holds_its_waiting_windows_within_the_bound(width):
    model = _wide_model(width)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    window = width * width * 8
    with pytest.warns(DegenerateStatisticsWarning, match=rf"\b{MAX_LIVE_N_RANDOM}\b.*every=286"):
        probe = ia.TrainingProbe(model, 0, total_steps=PYTHIA_STEPS)  # early phase: 42,900 steps, every=1
    # R' is capped: Holm over 143,000 windows would need 2.86 million a window; the cap passes over 500 windows,
    # which every=286 gives (143,000 / 286 = 500; every=285 gives 502)
    assert probe.n_random == MAX_LIVE_N_RANDOM and floor_passes(MAX_LIVE_N_RANDOM, PYTHIA_STEPS // 286)
    assert not floor_passes(MAX_LIVE_N_RANDOM, -(-PYTHIA_STEPS // 285))
    with probe:
        point = probe.points["gpt_neox.layers.0"]
        for step in range(3):
            ids = _ids(step)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            assert probe.step() == []
            bounded, held = pending_bytes(point)
            assert len(point.pending) == step + 1 and bounded <= MAX_PENDING_BYTES
            assert held <= bounded + len(point.pending) * (16 * width + 8) + 18 * BATCH * (step + 1)
    assert point.capacity == MAX_PENDING_BYTES // window == {768: 227, 2048: 32}[width]
    assert point.moments_bytes() == point.capacity * window  # the windows' moments never pass max_pending_bytes


class _StopAfter(TrainerCallback):
    def __init__(self, steps: int):
        self.steps = steps

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step >= self.steps


def _train(width: int, tmp_path, **options) -> AnisotropyCallback:
    data = [{"input_ids": ids, "labels": ids} for ids in _ids(0).repeat(4, 1)]
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=PYTHIA_STEPS,
        per_device_train_batch_size=BATCH,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    callback = AnisotropyCallback(0, results_dir=tmp_path / "live", **options)
    Trainer(model=_wide_model(width), args=args, train_dataset=data, callbacks=[callback, _StopAfter(2)]).train()
    return callback


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.LiveProbeWarning")
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # R' capped: above
@pytest.mark.parametrize("width", [768, 2048])
def test_a_trainer_of_pythias_length_with_its_defaults_is_accepted(width, tmp_path):
    callback = _train(width, tmp_path)
    point = callback.probe.points["gpt_neox.layers.0"]
    assert point.schedule.fit_until == 42_900 and len(point.pending) == 2 and not callback.probe.attached


def test_a_budget_too_small_for_the_width_is_refused_before_the_first_step(tmp_path):
    forwards = []
    with pytest.raises(InvalidInputError, match="max_pending_bytes.*33554432"):
        model = _wide_model(2048)
        model.register_forward_hook(lambda *_: forwards.append(1))
        callback = AnisotropyCallback(0, results_dir=tmp_path / "live", max_pending_bytes=2**25 - 1)
        args = TrainingArguments(output_dir=str(tmp_path / "t"), max_steps=10, report_to=[], use_cpu=True)
        Trainer(
            model=model,
            args=args,
            train_dataset=[{"input_ids": _ids(0)[0], "labels": _ids(0)[0]}],
            callbacks=[callback],
        ).train()
    assert forwards == []
