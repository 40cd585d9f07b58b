# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A checkpoint's config checked against its weights before the model is built (issue 27, item 4).

Each test saves a tiny model built by `interpreto_anisotropy.demo.build_model`, edits its config.json, and loads it
with `load_checkpoint`: nonsensical configs are our `CheckpointError` at once, a correct checkpoint still loads.
"""

from __future__ import annotations

import json
import resource
import time
import tracemalloc
from pathlib import Path

import pytest
import torch

from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.demo import build_model, train_tokenizer
from interpreto_anisotropy.errors import CheckpointError, CheckpointWarning
from interpreto_anisotropy.sweeps import checkpoints as weight_check

CORPUS = ["the cat sat on the mat", "a dog ran to the big red mat", "small blue cats and dogs"] * 20
#: The bound a refusal must meet on this loaded machine (the real figure, printed, is far below: see the report).
REFUSAL_SECONDS = 5.0
#: Memory the refusal of a million-layer config may take: Python allocations (tracemalloc peak) and the process's
#: peak resident size's growth. Building the layers took gigabytes before.
REFUSAL_MB = 50


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-NeoX (2 layers, hidden 32, 4 heads) saved with its tokenizer."""
    tokenizer = train_tokenizer(CORPUS, arch="gpt_neox", vocab_size=300)
    model = build_model(
        "gpt_neox", vocab_size=len(tokenizer), hidden_size=32, num_layers=2, num_heads=4, tokenizer=tokenizer
    )
    folder = tmp_path_factory.mktemp("tiny") / "checkpoint-4"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _copy(saved: Path, tmp_path: Path, **config: object) -> Path:
    import shutil

    folder = tmp_path / saved.name
    shutil.copytree(saved, folder)
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return folder


def _refused(folder: Path, **options: object) -> tuple[str, float]:
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as info:
        ck.load_checkpoint(ck.Checkpoint(4, str(folder)), device="cpu", **options)
    return str(info.value), time.perf_counter() - start


def test_a_config_claiming_a_million_layers_is_refused_at_once(saved, tmp_path):
    folder = _copy(saved, tmp_path, num_hidden_layers=10**6)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    try:
        message, elapsed = _refused(folder)
        _, python_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    print(
        f"10**6-layer config refused in {elapsed:.3f} s; Python peak {python_peak / 2**20:.1f} MB, "
        f"peak RSS growth {rss_growth:.1f} MB"
    )
    assert elapsed < REFUSAL_SECONDS
    assert python_peak / 2**20 < REFUSAL_MB and rss_growth < REFUSAL_MB
    assert str(folder) in message and "num_hidden_layers = 1000000" in message
    assert "2 layer(s) (gpt_neox.layers.0 to gpt_neox.layers.1)" in message and "strict=False" in message


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"num_attention_heads": 0}, "num_attention_heads = 0, which must be a positive integer"),
        ({"num_attention_heads": 5}, "hidden_size = 32, which num_attention_heads = 5 does not divide"),
        ({"num_hidden_layers": -1}, "num_hidden_layers = -1, which must be a positive integer"),
        ({"max_position_embeddings": 0}, "max_position_embeddings = 0, which must be a positive integer"),
        ({"architectures": "GPTNeoXForCausalLM"}, "architectures = 'GPTNeoXForCausalLM', which must be a list of"),
        ({"architectures": [5]}, "architectures = [5], which must be a list of class names"),
        ({"hidden_size": 48, "num_attention_heads": 4}, "gpt_neox.embed_in.weight is ["),
        ({"intermediate_size": 100}, "is [128, 32] in the weights and [100, 32] for the config"),
    ],
)
def test_configs_that_contradict_the_weights_are_our_error(saved, tmp_path, config, says):
    folder = _copy(saved, tmp_path, **config)
    message, elapsed = _refused(folder)
    assert says in message and str(folder) in message and "Fix config.json" in message
    assert elapsed < REFUSAL_SECONDS


def test_fewer_layers_than_the_weights_and_a_correct_checkpoint_still_load(saved, tmp_path):
    model, _ = ck.load_checkpoint(ck.Checkpoint(4, str(saved)), device="cpu")
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(saved).state_dict()
    assert all(torch.equal(value, reference[key]) for key, value in model.state_dict().items())
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, AutoModelForCausalLM.from_pretrained(saved).eval()(ids).logits)
    with pytest.warns(CheckpointWarning, match=r"step-4.*gpt_neox\.layers\.1\."):
        ck.load_checkpoint(ck.Checkpoint(4, str(_copy(saved, tmp_path, num_hidden_layers=1))), device="cpu")


def test_strict_false_lets_missing_layers_through_with_a_warning(saved, tmp_path):
    folder = _copy(saved, tmp_path, num_hidden_layers=3)
    with pytest.warns(CheckpointWarning, match=r"num_hidden_layers.*3.*\b2 layer.*strict=False"):
        model, _ = ck.load_checkpoint(ck.Checkpoint(4, str(folder)), device="cpu", strict=False)
    assert len(model.gpt_neox.layers) == 3


def test_the_shapes_are_read_without_the_tensors(saved, tmp_path):
    from safetensors.torch import load_file

    shapes = weight_check.weight_shapes(saved)
    weights = load_file(str(saved / "model.safetensors"))
    assert shapes == {name: tuple(tensor.shape) for name, tensor in weights.items()}
    assert shapes["gpt_neox.embed_in.weight"][1] == 32
    (tmp_path / "bin").mkdir()
    torch.save(weights, tmp_path / "bin" / "pytorch_model.bin")  # a PyTorch pickle: mapped onto the meta device
    assert weight_check.weight_shapes(tmp_path / "bin") == shapes
    (tmp_path / "bin" / "pytorch_model.bin").write_bytes(b"not a pickle")
    assert weight_check.weight_shapes(tmp_path / "bin") is None  # unreadable: left to from_pretrained
