# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Arguments checked at the public door (issue 40, items 2 to 5 and 7): each wrong type, value, path or duplicate
of issue 40's table is our error naming the option, before any work or write.

One parametrised test calls each public entry point with what the outside campaign gave it; the working directory is
an empty folder, which must stay empty (nothing written before the refusal).
"""

from __future__ import annotations

import copy
import json
import sys

import pytest
import torch
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.cli import main as cli_main
from interpreto_anisotropy.errors import AnisotropyError, InvalidInputError, NonFiniteError, ResultsStoreError

pytest_plugins = ["helpers.hub_fixtures"]
pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")

DEEP = "[" * 50_000 + "]" * 50_000
TEXTS = ["the cat sat on the mat", "a dog ran to the red mat", "the small blue cat ran", "a dog sat"]


@pytest.fixture(scope="module")
def fitted(gpt_neox_mwsp, fit_texts):
    return ia.PCATangent(gpt_neox_mwsp, nb_concepts=3).fit(fit_texts[:6])


def _sweep(**options):
    checkpoints = options.pop("checkpoints", [ck.Checkpoint(0, "/nowhere/checkpoint-0")])
    base = {"split_point": 1, "texts": TEXTS, "results_dir": "sweep", "progress": False}
    return ia.CheckpointSweep(checkpoints, **{**base, **options})


def _cli(*arguments):
    return cli_main(
        ["sweep", "--model", "/nowhere", "--texts", "texts.txt", "--split-point", "1", "--out", "o", *arguments]
    )


def _tiny_mixtral(tokenizer, **config):
    from transformers import MixtralConfig, MixtralForCausalLM

    options = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
    options.update(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, **config)
    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(vocab_size=len(tokenizer), **options)).eval()
    return ModelWithSplitPoints(model, split_point=1, tokenizer=copy.deepcopy(tokenizer))


def _resume_with_config(folder, **config):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"format_version": 1, **config}))
    return _sweep(results_dir=folder).run()


def _crafted_method(folder_of, mwsp, concept_class):
    folder = folder_of()
    record = json.loads((folder / "tangent.json").read_text())
    (folder / "tangent.json").write_text(json.dumps({**record, "method": "mine", "concept_class": concept_class}))
    return ia.TangentExplainer.from_pretrained(folder, mwsp)


def _nan_model_read(gpt_neox_model):
    model, tokenizer = copy.deepcopy(gpt_neox_model[0]), copy.deepcopy(gpt_neox_model[1])
    with torch.no_grad():
        model.gpt_neox.layers[0].mlp.dense_4h_to_h.bias.fill_(float("inf"))
    return ia.token_activations(ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer), TEXTS)


def _training_probe(gpt_neox_model, **options):
    model, tokenizer = copy.deepcopy(gpt_neox_model[0]), gpt_neox_model[1]
    return ia.TrainingProbe(model, 1, tokenizer=tokenizer, **options)


#: name -> (call(fixtures), our error class, a word the message must hold).
CASES = {
    "save_pretrained(None)": (lambda f: f.fitted.save_pretrained(None), InvalidInputError, "save_directory"),
    "save_pretrained(5)": (lambda f: f.fitted.save_pretrained(5), InvalidInputError, "save_directory"),
    "save_pretrained('')": (lambda f: f.fitted.save_pretrained(""), InvalidInputError, "save_directory"),
    "from_pretrained(None)": (
        lambda f: ia.TangentExplainer.from_pretrained(None, f.mwsp),
        InvalidInputError,
        "source",
    ),
    "from_pretrained(5)": (lambda f: ia.TangentExplainer.from_pretrained(5, f.mwsp), InvalidInputError, "source"),
    "from_pretrained(300 characters)": (
        lambda f: ia.TangentExplainer.from_pretrained("x" * 300, f.mwsp),
        ResultsStoreError,
        "no Hub repository id",
    ),
    "push_to_hub('../x')": (lambda f: f.fitted.push_to_hub("../x"), InvalidInputError, "repo_id"),
    "push_to_hub('a/b/c')": (lambda f: f.fitted.push_to_hub("a/b/c"), InvalidInputError, "repo_id"),
    "push_to_hub('')": (lambda f: f.fitted.push_to_hub(""), InvalidInputError, "repo_id"),
    "push_to_hub('me/t<script>')": (lambda f: f.fitted.push_to_hub("me/t<script>"), InvalidInputError, "repo_id"),
    "push_to_hub(private='yes')": (
        lambda f: f.fitted.push_to_hub("me/t", private="yes"),
        InvalidInputError,
        "private",
    ),
    "push_to_hub(hub_timeout=0)": (
        lambda f: f.fitted.push_to_hub("me/t", hub_timeout=0),
        InvalidInputError,
        "hub_timeout",
    ),
    "sweep --device-map deep JSON": (lambda f: _cli("--device-map", DEEP), SystemExit, "--device-map"),
    "sweep --method-kwargs deep JSON": (lambda f: _cli("--method-kwargs", DEEP), SystemExit, "--method-kwargs"),
    "results_dir='bad\\x00name'": (lambda f: _sweep(results_dir="bad\x00name"), InvalidInputError, "results_dir"),
    "CheckpointSweep(device='meta')": (lambda f: _sweep(device="meta"), InvalidInputError, "device"),
    "PCATangent(device='meta')": (
        lambda f: ia.PCATangent(f.mwsp, nb_concepts=2, device="meta"),
        InvalidInputError,
        "device",
    ),
    "live grad_scaler='yes'": (
        lambda f: _training_probe(f.model, grad_scaler="yes"),
        InvalidInputError,
        "grad_scaler",
    ),
    "live results_dir=''": (lambda f: _training_probe(f.model, results_dir=""), InvalidInputError, "results_dir"),
    "resume: config.json checkpoints a string": (
        lambda f: _resume_with_config(f.tmp / "resumed", checkpoints="step-8"),
        ResultsStoreError,
        "checkpoints",
    ),
    "Mixtral in float64, grouped_mm experts": (
        lambda f: ia.token_activations(_tiny_mixtral(f.model[1], dtype=torch.float64).to(torch.float64), TEXTS),
        InvalidInputError,
        "experts_implementation",
    ),
    "MoE router auxiliary loss ignored": (
        lambda f: ia.GradientProbe(_tiny_mixtral(f.model[1], output_router_logits=True)),
        InvalidInputError,
        "output_router_logits",
    ),
    "split_point=[1, 1]": (lambda f: _sweep(split_point=[1, 1]), InvalidInputError, "split_point"),
    "the same split point path twice": (
        lambda f: _sweep(split_point=["gpt_neox.layers.1", "gpt_neox.layers.1"]),
        InvalidInputError,
        "gpt_neox.layers.1",
    ),
    "two checkpoints of one step": (
        lambda f: _sweep(checkpoints=[ck.Checkpoint(8, "/a/step-8"), ck.Checkpoint(8, "/b/step-8")]),
        InvalidInputError,
        "step 8",
    ),
    "two tangents of one name": (
        lambda f: ia.GradientProbe(f.mwsp).run(TEXTS, {1: f.fitted, "1": f.fitted}, progress=False),
        InvalidInputError,
        "'1'",
    ),
    "tangent.json naming a module to import": (
        lambda f: _crafted_method(lambda: f.fitted.save_pretrained(f.tmp / "crafted"), f.mwsp, "antigravity:fly"),
        ResultsStoreError,
        "nothing was imported",
    ),
    "token_activations on non-finite rows": (lambda f: _nan_model_read(f.model), NonFiniteError, "float32"),
}


class _Fixtures:
    def __init__(self, fitted, mwsp, model, tmp):
        self.fitted, self.mwsp, self.model, self.tmp = fitted, mwsp, model, tmp


@pytest.mark.parametrize("name", list(CASES))
def test_each_wrong_argument_is_our_error_naming_it_before_any_write(
    name, fitted, gpt_neox_mwsp, gpt_neox_model, tmp_path, monkeypatch, capsys
):
    call, error, word = CASES[name]
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    modules = set(sys.modules)
    with pytest.raises(error) as info:
        call(_Fixtures(fitted, gpt_neox_mwsp, gpt_neox_model, tmp_path))
    if error is SystemExit:
        assert info.value.code == 2
        assert word in capsys.readouterr().err
    else:
        assert isinstance(info.value, AnisotropyError)
        assert word in str(info.value), str(info.value)
        print(f"{name}: {info.value}")
    assert list(workdir.iterdir()) == []  # nothing written where the process runs
    assert "antigravity" not in set(sys.modules) - modules  # nothing a file names was imported


def test_a_truncated_tangent_download_is_our_error(fitted, gpt_neox_mwsp, online, monkeypatch):
    from interpreto_anisotropy.commons import hub

    monkeypatch.setattr(hub, "HUB_RETRY_WAITS", (0.01,) * hub.HUB_RETRIES)
    fitted.push_to_hub("me/tangent", token="hf_test")
    online.fail(r"/subspace\.safetensors$", "drop", method="GET", after_bytes=50)
    with pytest.raises(ResultsStoreError, match=r"me/tangent.*tried 4 times"):
        ia.TangentExplainer.from_pretrained("me/tangent", gpt_neox_mwsp)
