# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Models dispatched by accelerate give the numbers of the same model undispatched.

A tiny model is dispatched with a device map that keeps some modules on the CPU and offloads others to disk (their
parameters on the meta device, loaded from the offload folder at each call, the split point's layer among them),
or with all its weights offloaded to CPU memory (`accelerate.cpu_offload`, the path a model larger than its GPU
takes). These CPU-only maps run the same accelerate hooks as a map over several GPUs. The reader's activations,
the fitted tangent, `GradientProbe`'s result, the live probe's rows and a sweep's rows are compared with the
undispatched model's: on one CPU thread the computations are the same operations on the same weights, so they are
bit-identical (checked with `==`), not merely close.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest
import torch
from accelerate import cpu_offload, dispatch_model
from helpers.live_kit import COMPARED, micro_batch
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.reading.split_point import SplitPoint
from interpreto_anisotropy.sweeps import checkpoints as checkpoint_tools

D, K = 64, 4
ARCHITECTURES = ["gpt_neox", "llama"]


def _head(model: torch.nn.Module) -> str:
    """The path of the model's output head ("embed_out" or "lm_head", as the transformers version names it)."""
    return next(name for name, module in model.named_modules() if module is model.get_output_embeddings())


def _disk_map(model: torch.nn.Module) -> dict[str, str]:
    """The embedding, the final norm and layer 0 kept on the CPU; layer 1 (the split point) and the head on disk."""
    base_name, base = next(iter(model.named_children()))  # "gpt_neox" or "model"
    device_map = {f"{base_name}.{name}": "cpu" for name, _ in base.named_children() if name != "layers"}
    return {**device_map, f"{base_name}.layers.0": "cpu", f"{base_name}.layers.1": "disk", _head(model): "disk"}


def _dispatched(model: torch.nn.Module, how: str, folder) -> torch.nn.Module:
    """A copy of `model` dispatched by accelerate: "disk" (`_disk_map`) or "cpu_offload" (every weight offloaded)."""
    copied = copy.deepcopy(model).eval()
    if how == "cpu_offload":
        return cpu_offload(copied, execution_device="cpu")
    return dispatch_model(copied, _disk_map(copied), offload_dir=str(folder))


@pytest.fixture(params=ARCHITECTURES)
def pair(request):
    return request.getfixturevalue(f"{request.param}_model")


@pytest.mark.parametrize("how", ["disk", "cpu_offload"])
def test_reader_tangent_and_probe_equal_the_undispatched_model(pair, how, texts, fit_texts, tmp_path):
    model, tokenizer = pair
    plain = ModelWithSplitPoints(copy.deepcopy(model).eval(), split_point=1, tokenizer=tokenizer, batch_size=8)
    dispatched_model = _dispatched(model, how, tmp_path / "offload")
    layer = dispatched_model.get_submodule(plain.split_point)
    assert all(parameter.device.type == "meta" for parameter in layer.parameters())  # offloaded, loaded per call
    dispatched = ModelWithSplitPoints(dispatched_model, split_point=1, tokenizer=tokenizer, batch_size=8)
    assert SplitPoint(dispatched).device == torch.device("cpu")  # the hook's execution device, not "meta"

    rows, ids = ia.token_activations(plain, fit_texts[:12])
    dispatched_rows, dispatched_ids = ia.token_activations(dispatched, fit_texts[:12])
    assert torch.equal(rows, dispatched_rows) and torch.equal(ids, dispatched_ids)

    tangents = [ia.PCATangent(splitter, nb_concepts=K).fit(fit_texts[:12]) for splitter in (plain, dispatched)]
    subspaces = [tangent.subspace for tangent in tangents]
    assert torch.equal(subspaces[0].basis, subspaces[1].basis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ia.errors.DegenerateStatisticsWarning)
        results = [
            ia.GradientProbe(splitter, seed=0).run(texts[:12], subspaces[0], n_controls=5, seed=0, progress=False)
            for splitter in (plain, dispatched)
        ]
    assert results[0].n_tokens == results[1].n_tokens > 0
    assert results[0].energy_share == results[1].energy_share
    assert results[0].to_dict() == results[1].to_dict()


def _live_rows(model, tokenizer, texts, tangent) -> list[dict]:
    """The live probe's rows over two windows of forward and backward passes (no weight update: an offloaded model
    is read, not trained)."""
    batches = [micro_batch(tokenizer, texts[start : start + 6], start=0) for start in (0, 6)]
    rows = []
    with ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean") as probe:
        for batch in batches:
            output = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            )
            output.loss.backward()
            rows.extend(probe.step())
    return rows


@pytest.mark.parametrize("how", ["disk", "cpu_offload"])
def test_live_rows_equal_the_undispatched_model(pair, how, texts, tmp_path):
    model, tokenizer = pair
    tangent = ia.Subspace.random(D, 8, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ia.errors.DegenerateStatisticsWarning)
        plain = _live_rows(copy.deepcopy(model).eval().requires_grad_(True), tokenizer, texts, tangent)
        dispatched = _live_rows(_dispatched(model, how, tmp_path / "offload"), tokenizer, texts, tangent)
    assert len(plain) == len(dispatched) == 2
    for plain_row, dispatched_row in zip(plain, dispatched, strict=True):
        assert dispatched_row["n_tokens"] == plain_row["n_tokens"] > 0
        for name in (*COMPARED, "loss", "p_value"):
            assert dispatched_row[name] == plain_row[name], name


# ---------------------------------------------------------------------------------------------- the sweep
SWEEP = {"split_point": 1, "nb_concepts": 4, "n_controls": 5, "seed": 3, "max_fit_tokens": 800, "progress": False}
#: What differs between two runs of the same rows: timings, and where the rows were written.
UNCOMPARED = {"wall_seconds", "download_seconds", "created", "results_dir"}


def test_a_sweep_with_device_map_and_max_memory_gives_the_same_rows(
    toy_checkpoints, sweep_texts, tmp_path, monkeypatch
):
    checkpoints = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[-2:]
    settings = {**SWEEP, "reference": "each", **sweep_texts}
    plain = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "plain", **settings).run()
    placements = []
    load = checkpoint_tools.load_checkpoint

    def spied(*args, **kwargs):
        model, tokenizer = load(*args, **kwargs)
        placements.append(dict(model.hf_device_map))
        return model, tokenizer

    monkeypatch.setattr(checkpoint_tools, "load_checkpoint", spied)
    # 200 kB of CPU memory holds the embedding and part of the layers: accelerate offloads the rest to disk.
    dispatched = ia.CheckpointSweep(
        checkpoints,
        results_dir=tmp_path / "dispatched",
        device_map="auto",
        max_memory={"cpu": 200_000},
        offload_folder=tmp_path / "offload",
        **settings,
    ).run()
    assert len(placements) == 2  # each checkpoint split between the CPU and the disk
    assert all({"cpu", "disk"} <= set(placement.values()) for placement in placements), placements
    assert len(plain.rows) == len(dispatched.rows) == 2
    for plain_row, dispatched_row in zip(plain.rows, dispatched.rows, strict=True):
        compared = set(plain_row) - UNCOMPARED
        assert {key: dispatched_row[key] for key in compared} == {key: plain_row[key] for key in compared}
    recorded = json.loads((tmp_path / "dispatched" / "config.json").read_text())
    assert "device_map" not in recorded  # where the weights were does not change the results: resumes either way


def test_load_checkpoint_with_a_dict_device_map_offloads_and_releases(toy_checkpoints, tmp_path):
    checkpoint = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[-1]
    with ia.checkpoints.loaded(checkpoint, device="cpu") as (model, _):
        device_map = {f"gpt_neox.{name}": "cpu" for name, _ in model.gpt_neox.named_children() if name != "layers"}
        device_map.update({"gpt_neox.layers": "disk", _head(model): "cpu"})
    with ia.checkpoints.loaded(checkpoint, device_map=device_map, offload_folder=tmp_path) as (model, _):
        assert model.hf_device_map["gpt_neox.layers"] == "disk"
        assert all(parameter.device.type == "meta" for parameter in model.gpt_neox.layers.parameters())
    assert all(parameter.device.type == "meta" for parameter in model.parameters())  # released, hooks removed
    assert not hasattr(model.gpt_neox.layers[0], "_hf_hook")


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"device_map": "everywhere"}, "device_map.*'everywhere'"),
        ({"device_map": {"gpt_neox": "gpu"}}, "device_map.*'gpu'"),
        ({"device_map": {"gpt_neox": -1}}, "device_map.*-1"),
        ({"device_map": "auto", "max_memory": {"cpu": "lots", "gpu0": "1GiB"}}, "max_memory.*'gpu0'"),
        ({"device_map": "auto", "max_memory": {"cpu": 0}}, r"max_memory\['cpu'\]"),
        ({"max_memory": {"0": "20GiB"}}, "max_memory.*device_map"),
        ({"offload_folder": "offload"}, "offload_folder.*device_map"),
    ],
)
def test_bad_placement_options_are_our_error(options, words, tmp_path):
    with pytest.raises(ia.errors.InvalidInputError, match=words):
        ia.SweepConfig(split_point=1, results_dir=tmp_path, **options)


def test_device_map_devices_are_taken_as_accelerate_takes_them(tmp_path):
    config = ia.SweepConfig(
        split_point=1, results_dir=tmp_path, device_map={"model": "0", "lm_head": "cpu"}, max_memory={"0": "2GiB"}
    )
    assert config.device_map == {"model": 0, "lm_head": "cpu"} and config.max_memory == {0: "2GiB"}


def test_a_device_map_naming_no_module_is_our_error(toy_checkpoints, tmp_path):
    checkpoint = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[-1]
    with pytest.raises(ia.errors.InvalidInputError, match="device_map.*encoder"):
        ia.checkpoints.load_checkpoint(checkpoint, device_map={"encoder": "cpu"})
    with pytest.raises(ia.errors.InvalidInputError, match=r"device_map.*(embed_out|lm_head)\.weight"):
        ia.checkpoints.load_checkpoint(checkpoint, device_map={"gpt_neox": "cpu"})


# ---------------------------------------------------------------------------------------------- where modules run
def test_the_execution_device_is_the_hooks_not_the_first_parameters():
    """Stub hooks name other devices than the weights': the hook on the module, else its nearest ancestor's, else
    its first descendant's, wins over where any parameter is (no device has to exist to be named)."""
    from types import SimpleNamespace

    from accelerate.hooks import SequentialHook

    from interpreto_anisotropy.reading.split_point import execution_device, input_device, is_dispatched

    model = torch.nn.Sequential(torch.nn.Embedding(4, 2), torch.nn.Sequential(torch.nn.Linear(2, 2)))
    model.get_input_embeddings = lambda: model[0]
    assert not is_dispatched(model) and execution_device(model, "1.0") == torch.device("cpu")
    model[1]._hf_hook = SimpleNamespace(execution_device="cuda:1")
    assert is_dispatched(model)
    assert execution_device(model, "1.0") == execution_device(model, "1") == torch.device("cuda", 1)
    model[1][0]._hf_hook = SequentialHook(SimpleNamespace(), SimpleNamespace(execution_device="cuda:2"))
    assert execution_device(model, "1.0") == torch.device("cuda", 2)  # its own hook first
    assert execution_device(model, "") == torch.device("cuda", 1)  # the first hooked descendant
    assert input_device(model) == torch.device("cpu")  # no hook on the embedding nor above it: its weights
    model[0]._hf_hook = SimpleNamespace(execution_device="cuda:0")
    assert input_device(model) == torch.device("cuda", 0)
