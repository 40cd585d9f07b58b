# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Toy training: checkpoints that reload offline in Interpreto, determinism, loss curve, and input errors."""

from __future__ import annotations

import json
import re

import pytest
import torch
from interpreto import ModelWithSplitPoints
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from interpreto_anisotropy.demo import ToyRun, train_toy
from interpreto_anisotropy.demo.options import ToyConfig, log_spaced_steps
from interpreto_anisotropy.demo.train import TRAINER_STATE_NAME
from interpreto_anisotropy.errors import CheckpointError, InvalidInputError
from interpreto_anisotropy.probing.masking import MaskedLM

TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN
TINY = {
    "steps": 3,
    "checkpoint_steps": [0, 3],
    "hidden_size": 16,
    "num_layers": 2,
    "num_heads": 2,
    "vocab_size": 300,
    "seq_len": 16,
    "batch_size": 2,
    "max_train_texts": 40,
    "progress": False,
}


def _state_dict(folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_log_spaced_steps_are_pythia_like():
    assert log_spaced_steps(300) == [0, 1, 2, 4, 8, 16, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300]
    assert log_spaced_steps(1) == [0, 1]
    assert log_spaced_steps(20) == [0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert log_spaced_steps(1000, n_even=4) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 250, 500, 750, 1000]


def test_toy_checkpoints_layout(toy_checkpoints):
    run = toy_checkpoints
    assert isinstance(run, ToyRun) and run.arch == "gpt_neox" and run.objective == "causal_lm"
    assert run.checkpoint_steps == [0, 1, 2, 4, 8, 20]
    assert [p.name for p in run.checkpoints] == [f"checkpoint-{s}" for s in run.checkpoint_steps]
    for folder in run.checkpoints:
        assert {"config.json", "model.safetensors", "tokenizer.json", TRAINER_STATE_NAME} <= {
            p.name for p in folder.iterdir()
        }
    assert json.loads((run.checkpoints[2] / TRAINER_STATE_NAME).read_text())["global_step"] == 2
    assert json.dumps(run.to_dict())


def test_trainer_state_has_one_loss_per_step_and_the_loss_decreases(toy_checkpoints):
    state = json.loads((toy_checkpoints.out_dir / TRAINER_STATE_NAME).read_text())
    history = state["log_history"]
    assert [entry["step"] for entry in history] == list(range(1, 21))
    losses = [entry["loss"] for entry in history]
    assert losses == pytest.approx(toy_checkpoints.losses)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3
    assert state["checkpoint_steps"] == [0, 1, 2, 4, 8, 20] and state["toy_config"]["seed"] == 0


def test_checkpoints_differ_from_step_to_step(toy_checkpoints):
    first, last = (_state_dict(p) for p in (toy_checkpoints.checkpoints[0], toy_checkpoints.checkpoints[-1]))
    assert first.keys() == last.keys()
    assert any(not torch.equal(first[k], last[k]) for k in first)


@pytest.mark.parametrize("index", [0, -1])
def test_checkpoints_reload_offline_in_model_with_split_points(toy_checkpoints, texts, index):
    folder = toy_checkpoints.checkpoints[index]
    mwsp = ModelWithSplitPoints(str(folder), automodel=AutoModelForCausalLM, split_point=1, batch_size=8)
    assert mwsp.tokenizer.pad_token is not None
    activations, _ = mwsp.get_activations(texts[:6], activation_granularity=TOKEN)
    n_tokens = sum(len(mwsp.tokenizer(t)["input_ids"]) for t in texts[:6])
    assert activations.shape == (n_tokens, 32)
    assert torch.isfinite(activations).all()


@pytest.mark.parametrize("arch", ["gpt_neox", "llama", "eurobert"])
def test_same_seed_gives_identical_weights(arch, tmp_path):
    runs = [train_toy(tmp_path / name, arch=arch, seed=seed, **TINY) for name, seed in (("a", 7), ("b", 7), ("c", 8))]
    a, b, c = (_state_dict(run.checkpoints[-1]) for run in runs)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert runs[0].losses == runs[1].losses
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert (tmp_path / "a" / "checkpoint-0" / "tokenizer.json").read_text() == (
        tmp_path / "b" / "checkpoint-0" / "tokenizer.json"
    ).read_text()


def test_encoder_checkpoint_reloads_as_masked_lm_with_its_special_tokens(tmp_path, texts):
    run = train_toy(tmp_path / "enc", arch="eurobert", **TINY)
    assert run.objective == "masked_lm" and run.automodel is AutoModelForMaskedLM
    mwsp = ModelWithSplitPoints(str(run.checkpoints[-1]), automodel=AutoModelForMaskedLM, split_point=1, batch_size=8)
    tokenizer = mwsp.tokenizer
    assert tokenizer.pad_token is not None and tokenizer.mask_token is not None and tokenizer.cls_token is not None
    assert mwsp._model.config.mask_token_id == tokenizer.mask_token_id
    assert mwsp._model.config.pad_token_id == tokenizer.pad_token_id
    activations, _ = mwsp.get_activations(texts[:4], activation_granularity=TOKEN)
    assert activations.ndim == 2 and activations.shape[1] == 16


@pytest.mark.parametrize("arch", ["gpt_neox", "llama", "eurobert"])
def test_every_toy_tokenizer_has_a_pad_token(arch, tmp_path):
    run = train_toy(tmp_path / arch, arch=arch, **{**TINY, "steps": 1, "checkpoint_steps": [1]})
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run.checkpoints[0])
    assert tokenizer.pad_token is not None and tokenizer.pad_token_id is not None
    batch = tokenizer(["a", "a longer text"], padding=True, return_tensors="pt")
    assert (batch["input_ids"] == tokenizer.pad_token_id).any()


@pytest.mark.slow
def test_default_run_clearly_lowers_the_loss(tmp_path):
    run = train_toy(tmp_path / "run", steps=100, checkpoint_steps=[100], progress=False)
    first, last = run.losses[:10], run.losses[-10:]
    assert sum(last) / 10 < sum(first) / 10 - 1.0
    assert run.losses[0] == pytest.approx(torch.log(torch.tensor(512.0)).item(), abs=0.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"arch": "gpt2"}, InvalidInputError, "'gpt2'"),
        ({"steps": 0}, InvalidInputError, "steps"),
        ({"steps": 2.5}, InvalidInputError, "steps"),
        ({"checkpoint_steps": [0, 21]}, InvalidInputError, r"\[0, steps=20\]"),
        ({"checkpoint_steps": [-1]}, InvalidInputError, r"\[0, steps=20\]"),
        ({"checkpoint_steps": []}, InvalidInputError, "checkpoint_steps"),
        ({"checkpoint_steps": "linear"}, InvalidInputError, "'log'"),
        ({"hidden_size": 30, "num_heads": 4}, InvalidInputError, "hidden_size=30.*num_heads=4"),
        ({"lr": -1.0}, InvalidInputError, "lr"),
        ({"device": "tpu-ish"}, InvalidInputError, "device"),
    ],
)
def test_bad_input_raises_our_error_before_any_work(tmp_path, kwargs, error, match):
    out_dir = tmp_path / "run"
    with pytest.raises(error, match=match):
        train_toy(out_dir, **{"steps": 20, "progress": False, **kwargs})
    assert not any(out_dir.glob("checkpoint-*"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_asked_without_gpu_raises_our_error(tmp_path):
    with pytest.raises(InvalidInputError, match="device='cuda'.*device='cpu'"):
        train_toy(tmp_path, steps=1, device="cuda", progress=False)


def test_unwritable_out_dir_raises_checkpoint_error(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(CheckpointError, match=rf"out_dir '{re.escape(str(a_file))}"):
        train_toy(a_file / "run", steps=1, progress=False)
    with pytest.raises(CheckpointError, match=rf"out_dir '{re.escape(str(a_file))}'"):
        train_toy(a_file, steps=1, progress=False)


def test_existing_run_needs_overwrite(tmp_path):
    train_toy(tmp_path, **TINY)
    with pytest.raises(CheckpointError, match="overwrite=True"):
        train_toy(tmp_path, **TINY)
    run = train_toy(tmp_path, overwrite=True, **{**TINY, "checkpoint_steps": [3]})
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-3"]
    assert run.checkpoints == [tmp_path / "checkpoint-3"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"steps": 0}, "steps"),
        ({"checkpoint_steps": [99]}, r"steps=3\b.*\b99\b"),
        ({"checkpoint_steps": []}, "checkpoint_steps"),
    ],
)
def test_bad_options_raise_our_error_naming_the_option(tmp_path, options, named):
    with pytest.raises(InvalidInputError, match=named) as caught:
        train_toy(tmp_path, **{**TINY, **options})
    assert isinstance(caught.value, InvalidInputError)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_training_on_cuda(tmp_path):
    run = train_toy(tmp_path, device="cuda", **TINY)
    assert json.loads((run.out_dir / TRAINER_STATE_NAME).read_text())["toy_config"]["device"].startswith("cuda")


def test_a_toy_config_trains_the_same_weights_as_the_same_keywords(tmp_path):
    by_keywords = train_toy(tmp_path / "keywords", seed=5, **TINY)
    config = ToyConfig(seed=5, **TINY)
    by_config = train_toy(tmp_path / "config", config=config)
    on_top = train_toy(tmp_path / "on_top", config=ToyConfig(**{**TINY, "seed": 9}), seed=5)
    weights = [_state_dict(run.checkpoints[-1]) for run in (by_keywords, by_config, on_top)]
    assert all(torch.equal(weights[0][k], other[k]) for other in weights[1:] for k in weights[0])
    assert by_keywords.losses == by_config.losses == on_top.losses
    states = [json.loads((run.out_dir / TRAINER_STATE_NAME).read_text()) for run in (by_keywords, by_config, on_top)]
    assert states[0] == states[1] == states[2]
    assert states[0]["toy_config"]["warmup_steps"] == config.effective_warmup_steps == 1  # max(1, 3 // 20)
    assert by_config.checkpoint_steps == config.checkpoint_step_list == [0, 3]


def test_toy_config_checks_its_options_when_made():
    assert ToyConfig(arch="eurobert").arch == "eurobert"
    assert ToyConfig(steps=300).checkpoint_step_list == log_spaced_steps(300)
    assert ToyConfig(steps=100, warmup_steps=None).effective_warmup_steps == 5
    with pytest.raises(InvalidInputError, match="hidden_size=30.*num_heads=4"):
        ToyConfig(hidden_size=30, num_heads=4)
    with pytest.raises(InvalidInputError, match="weight_decay"):
        ToyConfig(weight_decay=-0.1)
    with pytest.raises(InvalidInputError, match="progress.*'no'"):
        ToyConfig(progress="no")
    with pytest.raises(InvalidInputError, match="live.*split_points"):
        ToyConfig(live={"early_steps": 1})
    with pytest.raises(InvalidInputError, match=r"mlm_probability=0\.2.*rate=0\.3"):
        ToyConfig(masking=MaskedLM(rate=0.3), mlm_probability=0.2)
    with pytest.raises(AttributeError):  # frozen
        ToyConfig().steps = 3  # type: ignore[misc]


def test_unknown_or_misplaced_options_raise_our_error_listing_the_valid_ones(tmp_path):
    with pytest.raises(InvalidInputError, match=r"\bhiden_size\b.*hidden_size") as caught:
        train_toy(tmp_path / "run", hiden_size=16, **TINY)
    assert "arch, batch_size, checkpoint_steps" in str(caught.value)
    with pytest.raises(InvalidInputError, match="config.*ToyConfig"):
        train_toy(tmp_path / "run", config={"steps": 3})
    assert not (tmp_path / "run").exists()
