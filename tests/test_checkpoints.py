# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of interpreto_anisotropy.sweeps.checkpoints: listing, step parsing, hub helpers and loading (no network)."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import warnings
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    EuroBertConfig,
    EuroBertForMaskedLM,
    EuroBertModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    GPTNeoXModel,
    PreTrainedTokenizerFast,
)

from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.errors import (
    AnisotropyError,
    CheckpointError,
    CheckpointWarning,
    InvalidInputError,
    ReadingWarning,
)

WORDS = "the a cat dog sat on mat and ran to big small red blue".split()


def tiny_tokenizer(*, pad: bool = False, eos: bool = True) -> PreTrainedTokenizerFast:
    vocab = {"[UNK]": 0, "[EOS]": 1, "[PAD]": 2, "[MASK]": 3, "[BOS]": 4}
    vocab.update({w: i + 5 for i, w in enumerate(WORDS)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {"unk_token": "[UNK]", "mask_token": "[MASK]"}
    if eos:
        special["eos_token"] = "[EOS]"
    if pad:
        special["pad_token"] = "[PAD]"
    return PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def neox_config() -> GPTNeoXConfig:
    return GPTNeoXConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        bos_token_id=4,
        eos_token_id=1,
    )


def eurobert_config() -> EuroBertConfig:
    return EuroBertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=32,
        max_position_embeddings=64,
        bos_token_id=4,
        eos_token_id=1,
        pad_token_id=2,
        mask_token_id=3,
    )


def save(model: torch.nn.Module, folder: Path, *, pad: bool = False, eos: bool = True) -> Path:
    model.save_pretrained(folder)
    tiny_tokenizer(pad=pad, eos=eos).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def neox_model() -> GPTNeoXForCausalLM:
    torch.manual_seed(0)
    return GPTNeoXForCausalLM(neox_config()).eval()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, neox_model: GPTNeoXForCausalLM) -> Path:
    """A toy run: folders checkpoint-0, step-5, checkpoint-10, step_20, step100 (only config.json + weights)."""
    root = tmp_path_factory.mktemp("run")
    for name in ["checkpoint-10", "step-5", "checkpoint-0", "step_20", "step100"]:
        save(neox_model, root / name)
    return root


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Offline hub, an empty cache, and sockets that refuse to connect, so nothing can hang on the network."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

    def refuse(*args, **kwargs):
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    return cache


# --------------------------------------------------------------------------------------------------------------------
# Checkpoint


def test_checkpoint_name_dict_roundtrip_and_order():
    a = ck.Checkpoint(1000, "EleutherAI/pythia-160m", revision="step1000")
    b = ck.Checkpoint(5, "EleutherAI/pythia-160m", revision="step5")
    assert a.name == "step-1000"
    data = a.to_dict()
    assert data == {"step": 1000, "source": "EleutherAI/pythia-160m", "revision": "step1000"}
    assert ck.Checkpoint.from_dict(json.loads(json.dumps(data))) == a
    assert sorted([a, b]) == [b, a]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.step = 3  # frozen


def test_checkpoint_accepts_path_source(tmp_path: Path):
    c = ck.Checkpoint(3, tmp_path)
    assert c.source == str(tmp_path) and c.is_local and c.revision is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"step": -1, "source": "x/y"},
        {"step": True, "source": "x/y"},
        {"step": 1.5, "source": "x/y"},
        {"step": 1, "source": ""},
        {"step": 1, "source": None},
        {"step": 1, "source": "x/y", "revision": ""},
    ],
)
def test_checkpoint_rejects_bad_fields(kwargs):
    with pytest.raises(InvalidInputError):
        ck.Checkpoint(**kwargs)


def test_checkpoint_from_dict_rejects_bad_keys():
    with pytest.raises(InvalidInputError, match="source"):
        ck.Checkpoint.from_dict({"step": 1})
    with pytest.raises(InvalidInputError, match="extra"):
        ck.Checkpoint.from_dict({"step": 1, "source": "a/b", "extra": 0})


@pytest.mark.parametrize(
    "name, step",
    [
        ("checkpoint-123", 123),
        ("step123", 123),
        ("step-123", 123),
        ("step_123", 123),
        ("Step-0", 0),
        ("step-001000-2BT", 1000),
        ("step20000-tokens84B", 20000),
        ("main", None),
        ("v1.0", None),
        ("stepper", None),
    ],
)
def test_parse_step(name, step):
    assert ck.parse_step(name) == step


# --------------------------------------------------------------------------------------------------------------------
# local


def test_local_sorts_by_step(run_dir: Path):
    found = ck.local(run_dir / "*")
    assert [c.step for c in found] == [0, 5, 10, 20, 100]
    assert [Path(c.source).name for c in found] == ["checkpoint-0", "step-5", "checkpoint-10", "step_20", "step100"]
    assert all(Path(c.source).is_absolute() and c.revision is None and c.is_local for c in found)
    assert [c.step for c in ck.local(str(run_dir / "checkpoint-*"))] == [0, 10]


def test_local_empty_glob_says_what_was_searched(tmp_path: Path):
    pattern = str(tmp_path / "nothing-*")
    with pytest.raises(InvalidInputError, match=re.escape(pattern)):
        ck.local(pattern)


def test_local_skips_folders_without_step(tmp_path: Path, neox_model):
    save(neox_model, tmp_path / "checkpoint-3")
    (tmp_path / "logs").mkdir()
    (tmp_path / "notes.txt").write_text("not a folder")  # files are ignored silently
    with pytest.warns(CheckpointWarning, match="logs"):
        found = ck.local(tmp_path / "*")
    assert [c.step for c in found] == [3]


def test_local_no_step_at_all_is_an_error(tmp_path: Path):
    (tmp_path / "final").mkdir()
    with pytest.warns(CheckpointWarning), pytest.raises(InvalidInputError, match=re.escape(str(tmp_path / "*"))):
        ck.local(tmp_path / "*")


def test_local_folder_without_config_is_named(tmp_path: Path, neox_model):
    save(neox_model, tmp_path / "checkpoint-1")
    (tmp_path / "checkpoint-2").mkdir()
    with pytest.raises(CheckpointError, match="checkpoint-2"):
        ck.local(tmp_path / "checkpoint-*")


def test_local_duplicate_steps(tmp_path: Path):
    for name in ["checkpoint-7", "step-7"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="checkpoint-7.*step-7"):
        ck.local(tmp_path / "*")


# --------------------------------------------------------------------------------------------------------------------
# hub helpers (no network: only the produced Checkpoint objects)


def test_hub_parses_and_sorts():
    found = ck.hub("org/model", ["step-1000", "step10", "step_0"])
    assert [(c.step, c.revision) for c in found] == [(0, "step_0"), (10, "step10"), (1000, "step-1000")]
    assert all(c.source == "org/model" for c in found)
    assert ck.hub("org/model", "step5") == [ck.Checkpoint(5, "org/model", "step5")]


def test_hub_mapping_allows_main():
    found = ck.hub("EleutherAI/pythia-160m", {143000: "main", 0: "step0"})
    assert [(c.step, c.revision) for c in found] == [(0, "step0"), (143000, "main")]


def test_hub_bad_input():
    with pytest.raises(InvalidInputError, match="'main'"):
        ck.hub("org/model", ["main"])
    with pytest.raises(InvalidInputError):
        ck.hub("org/model", [])
    with pytest.raises(InvalidInputError, match="step-10"):
        ck.hub("org/model", ["step10", "step-10"])
    with pytest.raises(InvalidInputError):
        ck.hub("", ["step1"])


def test_pythia_ids_and_revisions():
    found = ck.pythia("160M", [1000, 0, 512, 1000])
    assert [(c.step, c.source, c.revision) for c in found] == [
        (0, "EleutherAI/pythia-160m", "step0"),
        (512, "EleutherAI/pythia-160m", "step512"),
        (1000, "EleutherAI/pythia-160m", "step1000"),
    ]
    deduped = ck.pythia("1.4b", 143000, deduped=True)
    assert deduped == [ck.Checkpoint(143000, "EleutherAI/pythia-1.4b-deduped", "step143000")]
    assert len(ck.PYTHIA_STEPS) == 154 and ck.PYTHIA_STEPS[:12] == (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)


@pytest.mark.parametrize("steps", [3, [1000, 1500], [144000], [-1]])
def test_pythia_rejects_unpublished_steps(steps):
    with pytest.raises(InvalidInputError):
        ck.pythia("160m", steps)


@pytest.mark.parametrize("size", ["160", "160 m", "big", "160mb", 160, "13m"])
def test_pythia_rejects_bad_sizes(size):
    with pytest.raises(InvalidInputError, match=re.escape(repr(size))):
        ck.pythia(size, [0])


def test_pythia_empty_steps():
    with pytest.raises(InvalidInputError):
        ck.pythia("70m", [])


def test_smollm2_ids_and_revisions():
    found = ck.smollm2("360m", [320000, 160000])
    assert [(c.step, c.source, c.revision) for c in found] == [
        (160000, "HuggingFaceTB/SmolLM2-360M-intermediate-checkpoints", "step-160000"),
        (320000, "HuggingFaceTB/SmolLM2-360M-intermediate-checkpoints", "step-320000"),
    ]
    assert ck.smollm2("1.7B", 125000)[0].source == "HuggingFaceTB/SmolLM2-1.7B-intermediate-checkpoints"
    with pytest.raises(InvalidInputError, match="'2B'"):
        ck.smollm2("2B", [0])
    with pytest.raises(InvalidInputError):
        ck.smollm2("135M", ["step-1"])


# --------------------------------------------------------------------------------------------------------------------
# loading


def test_load_local_weights_equal_saved(run_dir: Path, neox_model):
    ckpt = ck.local(run_dir / "checkpoint-10")[0]
    with pytest.warns(ReadingWarning, match=r"checkpoint-10.*\[EOS\]"):
        model, tokenizer = ck.load_checkpoint(ckpt, device="cpu")
    assert isinstance(model, GPTNeoXForCausalLM)
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    saved = neox_model.state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(value, saved[key]), key
    assert tokenizer.pad_token == tokenizer.eos_token == "[EOS]"
    batch = tokenizer(["the cat", "the big red dog sat"], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 5)


def test_load_keeps_existing_pad_token_without_warning(tmp_path: Path, neox_model):
    folder = save(neox_model, tmp_path / "step-1", pad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, tokenizer = ck.load_checkpoint(ck.Checkpoint(1, folder), device="cpu", dtype="bfloat16")
    assert tokenizer.pad_token == "[PAD]"


def test_load_infers_causal_lm_from_model_type(tmp_path: Path):
    folder = save(GPTNeoXModel(neox_config()), tmp_path / "step-1")  # architectures: GPTNeoXModel (no head)
    assert ck.infer_objective(GPTNeoXModel(neox_config()).config) == "causal_lm"
    with (
        pytest.warns(ReadingWarning, match=r"step-1.*\[EOS\]"),
        pytest.raises(CheckpointError, match=r"lm_head\.weight"),
    ):
        ck.load_checkpoint(ck.Checkpoint(1, folder), device="cpu")  # the head would be random: refused
    with pytest.warns(CheckpointWarning, match=r"lm_head\.weight"):
        model, _ = ck.load_checkpoint(ck.Checkpoint(1, folder), device="cpu", strict=False)
    assert isinstance(model, GPTNeoXForCausalLM)


@pytest.mark.parametrize("model_class", [EuroBertForMaskedLM, EuroBertModel])
def test_load_infers_masked_lm_for_eurobert(tmp_path: Path, model_class):
    torch.manual_seed(0)
    saved = model_class(eurobert_config())
    folder = save(saved, tmp_path / "checkpoint-2", pad=True)
    if model_class is EuroBertModel:  # no MLM head in the checkpoint: strict loading refuses a random one
        with pytest.raises(CheckpointError, match=r"lm_head\.weight"):
            ck.load_checkpoint(ck.local(folder)[0], device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _ = ck.load_checkpoint(ck.local(folder)[0], device="cpu", strict=model_class is EuroBertForMaskedLM)
    assert isinstance(model, EuroBertForMaskedLM)
    assert ck.infer_objective(model.config) == "masked_lm"
    if model_class is EuroBertForMaskedLM:
        for key, value in model.state_dict().items():
            assert torch.equal(value, saved.state_dict()[key]), key


def test_load_explicit_automodel(tmp_path: Path, neox_model):
    folder = save(neox_model, tmp_path / "step-1", pad=True)
    model, _ = ck.load_checkpoint(ck.Checkpoint(1, folder), automodel=GPTNeoXModel, device="cpu")
    assert type(model) is GPTNeoXModel
    with pytest.raises(InvalidInputError, match="automodel"):
        ck.load_checkpoint(ck.Checkpoint(1, folder), automodel="seq2seq")


def test_load_tokenizer_source(tmp_path: Path, neox_model):
    folder = tmp_path / "step-4"
    neox_model.save_pretrained(folder)  # weights only, no tokenizer
    tok_folder = tmp_path / "tokenizer"
    tiny_tokenizer(pad=True).save_pretrained(tok_folder)
    with pytest.raises(CheckpointError, match="tokenizer_source"):
        ck.load_checkpoint(ck.Checkpoint(4, folder), device="cpu")
    model, tokenizer = ck.load_checkpoint(ck.Checkpoint(4, folder), device="cpu", tokenizer_source=tok_folder)
    assert tokenizer.pad_token == "[PAD]" and isinstance(model, GPTNeoXForCausalLM)


def test_load_tokenizer_without_pad_or_eos(tmp_path: Path, neox_model):
    folder = save(neox_model, tmp_path / "step-1", eos=False)
    with pytest.raises(InvalidInputError, match="step-1.*pad_token"):
        ck.load_checkpoint(ck.Checkpoint(1, folder), device="cpu")


def test_load_bad_device_and_dtype(run_dir: Path):
    ckpt = ck.local(run_dir / "checkpoint-0")[0]
    with pytest.raises(InvalidInputError, match="device"):
        ck.load_checkpoint(ckpt, device="gpu")
    with pytest.raises(InvalidInputError, match="dtype"):
        ck.load_checkpoint(ckpt, device="cpu", dtype="float99")
    if not torch.cuda.is_available():
        with pytest.warns(ReadingWarning), pytest.raises(InvalidInputError, match="step-0.*'cuda'"):
            ck.load_checkpoint(ckpt, device="cuda")


def test_load_missing_local_folder(tmp_path: Path):
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / "run" / "checkpoint-1"))):
        ck.load_checkpoint(ck.Checkpoint(1, str(tmp_path / "run" / "checkpoint-1")))


def test_load_rejects_non_checkpoint(run_dir: Path):
    with pytest.raises(InvalidInputError, match="Checkpoint"):
        ck.load_checkpoint(str(run_dir / "checkpoint-0"))


def test_load_uncached_hub_revision_offline(no_network: Path):
    ckpt = ck.pythia("160m", 1000)[0]
    with pytest.raises(CheckpointError) as info:
        ck.load_checkpoint(ckpt, device="cpu", cache_dir=no_network)
    message = str(info.value)
    assert str(no_network) in message  # the cache it looked in
    assert "`hf download EleutherAI/pythia-160m --revision step1000`" in message  # huggingface_hub 1.0+ ships hf
    assert "huggingface-cli" not in message
    assert isinstance(info.value, AnisotropyError)


def test_load_uncached_hub_default_cache_offline(no_network: Path):
    ckpt = ck.Checkpoint(3, "interpreto-anisotropy-tests/no-such-model", revision="step3")
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE"):
        ck.load_checkpoint(ckpt, device="cpu")


def test_loaded_frees_the_model(run_dir: Path):
    ckpt = ck.local(run_dir / "step100")[0]
    with pytest.warns(ReadingWarning, match=r"step100.*\[EOS\]"), ck.loaded(ckpt, device="cpu") as (model, tokenizer):
        assert next(model.parameters()).device.type == "cpu"
        assert tokenizer.pad_token is not None
    assert next(model.parameters()).device.type == "meta"


def _edit_weights(folder: Path, edit) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    edit(weights)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def test_a_checkpoint_missing_a_weight_is_our_error_naming_it(tmp_path: Path, neox_model):
    folder = save(neox_model, tmp_path / "checkpoint-5", pad=True)
    _edit_weights(folder, lambda weights: weights.pop("gpt_neox.layers.0.mlp.dense_4h_to_h.bias"))
    checkpoint = ck.Checkpoint(5, str(folder))
    with pytest.raises(CheckpointError, match=r"step-5.*gpt_neox\.layers\.0\.mlp\.dense_4h_to_h\.bias.*strict=False"):
        ck.load_checkpoint(checkpoint, device="cpu")
    with pytest.warns(CheckpointWarning, match=r"gpt_neox\.layers\.0\.mlp\.dense_4h_to_h\.bias"):
        model, _ = ck.load_checkpoint(checkpoint, device="cpu", strict=False)
    assert isinstance(model, GPTNeoXForCausalLM)


def test_mis_shaped_and_truncated_weights_are_our_errors(tmp_path: Path, neox_model):
    folder = save(neox_model, tmp_path / "checkpoint-7", pad=True)
    name = "gpt_neox.layers.0.mlp.dense_h_to_4h.weight"
    _edit_weights(folder, lambda weights: weights.__setitem__(name, torch.zeros(3, weights[name].shape[1])))
    with pytest.raises(CheckpointError, match=rf"step-7.*{re.escape(name)}"):
        ck.load_checkpoint(ck.Checkpoint(7, str(folder)), device="cpu")
    with open(folder / "model.safetensors", "r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(CheckpointError, match=r"step-7.*SafetensorError"):
        ck.load_checkpoint(ck.Checkpoint(7, str(folder)), device="cpu")


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_sweep_over_a_checkpoint_missing_a_weight_writes_no_row_for_it(tmp_path: Path, neox_model):
    import interpreto_anisotropy as ia

    texts = [" ".join(WORDS[start:] + WORDS[:start]) for start in range(8)]
    for step in (0, 1):
        save(neox_model, tmp_path / "run" / f"checkpoint-{step}", pad=True)
    _edit_weights(tmp_path / "run" / "checkpoint-1", lambda weights: weights.pop("embed_out.weight"))
    sweep = ia.CheckpointSweep(
        str(tmp_path / "run" / "checkpoint-*"),
        split_point=0,
        texts=texts[:8],
        nb_concepts=2,
        n_controls=2,
        results_dir=tmp_path / "sweep",
        progress=False,
    )
    with pytest.raises(CheckpointError, match=r"step-1.*(lm_head|embed_out)\.weight"):
        sweep.run()
    assert [row["step"] for row in ia.SweepResult.load(tmp_path / "sweep").rows] == [0]
