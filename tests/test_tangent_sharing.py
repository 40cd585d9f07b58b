# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Fitted tangents kept and shared: `save_pretrained`, `from_pretrained`, `push_to_hub` (over HTTP, the test Hub)."""

from __future__ import annotations

import copy
import json
import pickle
import re

import pytest
import torch
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError, ResultsStoreError
from interpreto_anisotropy.tangents import sharing

pytest_plugins = ["helpers.hub_fixtures"]

pytestmark = [
    pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning"),
    pytest.mark.filterwarnings("ignore:FastICA did not converge"),
]


@pytest.fixture(scope="module")
def fitted(gpt_neox_mwsp, fit_texts):
    """A PCA tangent fitted on texts over two `partial_fit` calls (the second with another token policy)."""
    tangent = ia.PCATangent(gpt_neox_mwsp, nb_concepts=4)
    tangent.partial_fit(fit_texts[:6])
    tangent.partial_fit(fit_texts[6:12], max_tokens=200)
    return tangent.finalize()


def _probe_numbers(mwsp, tangent, texts):
    result = ia.GradientProbe(mwsp).run(texts[:4], tangent, n_controls=3, seed=0, progress=False)
    return result.energy_share, result.control_energy_shares.tolist(), result.p_value, result.z_score


def test_round_trip_gives_the_same_basis_metadata_and_probe_numbers(fitted, gpt_neox_mwsp, fit_texts, texts, tmp_path):
    folder = fitted.save_pretrained(tmp_path / "tangent", model_id="org/tiny-neox", model_revision="step8")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "subspace.safetensors", "tangent.json"]
    loaded = ia.TangentExplainer.from_pretrained(folder, gpt_neox_mwsp)
    assert type(loaded) is ia.PCATangent and loaded.inner_explainer is None
    saved, again = fitted.subspace, loaded.subspace
    assert torch.equal(saved.basis, again.basis) and saved.basis.dtype == again.basis.dtype
    assert torch.equal(saved.mean, again.mean)
    assert saved.metadata() == again.metadata()
    assert (loaded.nb_concepts, loaded.method_name, loaded.center, loaded.seed) == (4, "pca", True, 0)
    assert loaded.fit_record == fitted.fit_record
    h = torch.randn(5, saved.dim)
    assert torch.equal(loaded.concept_model.encode(h), fitted.concept_model.encode(h))  # the concepts
    assert torch.equal(again.project(h), saved.project(h))
    assert _probe_numbers(gpt_neox_mwsp, loaded, texts) == _probe_numbers(gpt_neox_mwsp, fitted, texts)

    record = json.loads((folder / "tangent.json").read_text())
    assert record["model_id"] == "org/tiny-neox" and record["model_revision"] == "step8"
    assert record["split_point"] == gpt_neox_mwsp.split_point == "gpt_neox.layers.1"
    assert (record["method"], record["rank"], record["nb_concepts"], record["dim"]) == ("pca", 4, 4, 64)
    assert record["package_version"] == ia.__version__ and record["format"] == sharing.FORMAT
    fit = record["fit"]
    assert fit["n_texts"] == 12 and fit["texts_sha256"] == sharing.texts_sha256(fit_texts[:12])
    assert fit["activations"] is False
    assert [policy["max_tokens"] for policy in fit["token_policies"]] == [None, 200]
    card = (folder / "README.md").read_text()
    assert "base_model: org/tiny-neox" in card and "library_name: interpreto-anisotropy" in card
    assert "`gpt_neox.layers.1`" in card and sharing.texts_sha256(fit_texts[:12]) in card


def test_the_record_of_an_interpreto_method_and_of_activations(gpt_neox_mwsp, fit_texts, tmp_path):
    rows, _ = ia.token_activations(gpt_neox_mwsp, fit_texts[:8])
    tangent = ia.ICATangent(gpt_neox_mwsp, nb_concepts=3, seed=2, random_state=2).fit(rows)
    assert tangent.fit_record.activations and tangent.fit_record.texts_sha256 is None
    folder = tangent.save_pretrained(tmp_path / "ica")
    assert "| fit texts | rows given as activations (no hash) |" in (folder / "README.md").read_text()
    loaded = ia.TangentExplainer.from_pretrained(folder, gpt_neox_mwsp)
    assert type(loaded) is ia.ICATangent and loaded.method_kwargs == {"random_state": 2} and loaded.seed == 2
    assert torch.equal(loaded.subspace.basis, tangent.subspace.basis)
    with pytest.raises(InvalidInputError, match="'ica'.*ICATangent.*PCATangent"):
        ia.PCATangent.from_pretrained(folder, gpt_neox_mwsp)


def test_an_explainer_fitted_elsewhere_comes_back_by_its_class(gpt_neox_mwsp, fit_texts, tmp_path):
    from interpreto.concepts import ICAConcepts

    rows, _ = ia.token_activations(gpt_neox_mwsp, fit_texts[:8])
    explainer = ICAConcepts(gpt_neox_mwsp, nb_concepts=3, random_state=0)
    explainer.fit(rows)
    tangent = ia.TangentExplainer.from_interpreto(explainer)
    loaded = ia.TangentExplainer.from_pretrained(tangent.save_pretrained(tmp_path / "mine"), gpt_neox_mwsp)
    assert loaded.method_name == "ICAConcepts" and loaded.concept_class is ICAConcepts
    assert loaded.fit_record is None and torch.equal(loaded.subspace.basis, tangent.subspace.basis)


def test_texts_sha256_is_the_concatenation_of_partial_fits(gpt_neox_mwsp, fit_texts):
    one = ia.PCATangent(gpt_neox_mwsp, nb_concepts=2).fit(fit_texts[:5])
    assert one.fit_record.texts_sha256 == sharing.texts_sha256(fit_texts[:5]) != sharing.texts_sha256(fit_texts[:4])
    assert one.fit_record.token_policies == [
        {"max_tokens": None, "max_length": None, "call": None, "include_special": False}
    ]
    copied = pickle.loads(pickle.dumps(one.fit_record))  # a plain value: tangents stay copyable
    one.partial_fit(fit_texts[5:7])  # continues the stream of `fit`
    assert one.fit_record.n_texts == 7 and one.fit_record.texts_sha256 == sharing.texts_sha256(fit_texts[:7])
    assert copied.add(fit_texts[5:7], {}).texts_sha256 == one.fit_record.texts_sha256


def test_texts_sha256_is_the_documented_chain():
    import hashlib

    def sha(text):
        return hashlib.sha256(text.encode()).hexdigest()

    assert sharing.texts_sha256([]) == "0" * 64
    expected = sha(sha("0" * 64 + sha("é")) + sha("b"))
    assert sharing.texts_sha256(["é", "b"]) == expected and sharing.texts_sha256("é") == sha("0" * 64 + sha("é"))


@pytest.mark.parametrize(
    ("damage", "file", "message"),
    [
        (lambda f: (f / "tangent.json").unlink(), "tangent.json", r"tangent\.json.*save_pretrained"),
        (lambda f: (f / "tangent.json").write_text("{not json"), "tangent.json", "JSON"),
        (lambda f: _edit(f, lambda r: r.pop("split_point")), "tangent.json", "split_point"),
        (lambda f: _edit(f, lambda r: r.update(rank="4")), "tangent.json", r"\brank\b"),
        (lambda f: _edit(f, lambda r: r.update(format=99)), "tangent.json", "format 99"),
        (
            lambda f: _edit(f, lambda r: r.update(method="nowhere")),
            "tangent.json",
            "'nowhere'",
        ),
        (
            lambda f: _edit(f, lambda r: r.update(rank=3)),
            "subspace.safetensors",
            r"subspace\.safetensors.*tangent\.json",
        ),
        (
            lambda f: (f / "subspace.safetensors").unlink(),
            "subspace.safetensors",
            r"subspace\.safetensors.*Subspace\.save",
        ),
        (
            lambda f: _truncate(f / "subspace.safetensors"),
            "subspace.safetensors",
            r"subspace\.safetensors.*Subspace\.save",
        ),
    ],
    ids=[
        "no-record",
        "not-json",
        "missing-field",
        "wrong-type",
        "later-format",
        "unknown-method",
        "disagree",
        "no-basis",
        "truncated-basis",
    ],
)
def test_a_damaged_folder_is_our_error_naming_the_file(fitted, gpt_neox_mwsp, tmp_path, damage, file, message):
    folder = fitted.save_pretrained(tmp_path / "tangent")
    damage(folder)
    with pytest.raises(ResultsStoreError, match=message) as caught:
        ia.TangentExplainer.from_pretrained(folder, gpt_neox_mwsp)
    assert str(folder) in str(caught.value) and (file in str(caught.value))


def _edit(folder, change):
    record = json.loads((folder / "tangent.json").read_text())
    change(record)
    (folder / "tangent.json").write_text(json.dumps(record))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:50])


def test_a_foreign_folder_or_a_missing_one_is_our_error(gpt_neox_mwsp, hub_folders, tmp_path):
    model_folder = hub_folders["org/tiny-neox", "step8"]  # a transformers model, no tangent
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(model_folder))}.*tangent\.json"):
        ia.TangentExplainer.from_pretrained(model_folder, gpt_neox_mwsp)
    with pytest.raises(ResultsStoreError, match=re.escape(str(tmp_path / "nothing" / "here"))):
        ia.TangentExplainer.from_pretrained(tmp_path / "nothing" / "here", gpt_neox_mwsp)
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(model_folder / 'config.json'))}.*save_pretrained"):
        ia.TangentExplainer.from_pretrained(model_folder / "config.json", gpt_neox_mwsp)
    with pytest.raises(InvalidInputError, match="splitter.*ModelWithSplitPoints"):
        ia.TangentExplainer.from_pretrained(model_folder, object())


def test_another_split_point_or_width_is_our_error(fitted, gpt_neox_model, tmp_path):
    from interpreto_anisotropy.demo import build_model

    folder = fitted.save_pretrained(tmp_path / "tangent")
    model, tokenizer = copy.deepcopy(gpt_neox_model[0]), copy.deepcopy(gpt_neox_model[1])
    layer0 = ModelWithSplitPoints(model, split_point=0, tokenizer=tokenizer)
    with pytest.raises(InvalidInputError, match=r"'gpt_neox\.layers\.1'") as caught:
        ia.TangentExplainer.from_pretrained(folder, layer0)
    assert str(folder) in str(caught.value) and "split_point='gpt_neox.layers.1'" in str(caught.value)
    narrow = build_model(
        "gpt_neox", vocab_size=len(tokenizer), hidden_size=32, num_layers=2, num_heads=2, seed=0, tokenizer=tokenizer
    )
    narrow_mwsp = ModelWithSplitPoints(narrow, split_point=1, tokenizer=copy.deepcopy(tokenizer))
    with pytest.raises(InvalidInputError, match="d=64.*d=32") as caught:
        ia.TangentExplainer.from_pretrained(folder, narrow_mwsp)
    assert str(folder) in str(caught.value)


def test_push_to_hub_then_from_pretrained_over_http(fitted, gpt_neox_mwsp, online, texts):
    commit = fitted.push_to_hub("me/tiny-tangent", token="hf_test", model_revision="step8")
    assert online.repos["me/tiny-tangent"]["main"].commit == commit.oid
    pushed = online.repos["me/tiny-tangent"]["main"].files
    assert sorted(pushed) == ["README.md", "subspace.safetensors", "tangent.json"]
    assert online.count("/api/repos/create", "POST") == 1
    assert online.count("/api/models/me/tiny-tangent/preupload/main", "POST") == 1
    assert online.count("/api/models/me/tiny-tangent/commit/main", "POST") == 1
    assert online.commits[-1]["summary"].startswith("Tangent at gpt_neox.layers.1")
    loaded = ia.TangentExplainer.from_pretrained("me/tiny-tangent", gpt_neox_mwsp)
    assert torch.equal(loaded.subspace.basis, fitted.subspace.basis)
    assert torch.equal(loaded.subspace.mean, fitted.subspace.mean)
    assert _probe_numbers(gpt_neox_mwsp, loaded, texts) == _probe_numbers(gpt_neox_mwsp, fitted, texts)
    again = fitted.push_to_hub("me/tiny-tangent", token="hf_test", commit_message="again")  # the repo exists
    assert online.commits[-1]["summary"] == "again" and again.oid != commit.oid
    first = ia.TangentExplainer.from_pretrained("me/tiny-tangent", gpt_neox_mwsp, revision=commit.oid)
    assert torch.equal(first.subspace.basis, fitted.subspace.basis)
    assert online.unknown == []


def test_hub_failures_are_our_errors(fitted, gpt_neox_mwsp, online):
    with pytest.raises(ResultsStoreError, match="'me/none'"):
        ia.TangentExplainer.from_pretrained("me/none", gpt_neox_mwsp)
    with pytest.raises(
        ResultsStoreError, match=r"tangent\.json.*save_pretrained"
    ):  # a model repository, not a tangent's
        ia.TangentExplainer.from_pretrained("org/tiny-neox", gpt_neox_mwsp)
    online.fail("/api/repos/create", 401, method="POST")
    with pytest.raises(ResultsStoreError, match="'me/denied'"):
        fitted.push_to_hub("me/denied", token="hf_test")
    assert "me/denied" not in online.repos


def test_an_unfitted_tangent_is_not_saved(gpt_neox_mwsp, tmp_path):
    with pytest.raises(ia.errors.OutOfOrderError):
        ia.PCATangent(gpt_neox_mwsp, nb_concepts=2).save_pretrained(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_a_model_from_the_hub_records_its_id_and_commit(online, fit_texts, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained("org/tiny-neox", revision="step8")
    tokenizer = AutoTokenizer.from_pretrained("org/tiny-neox", revision="step8")
    mwsp = ModelWithSplitPoints(model.eval(), split_point=1, tokenizer=tokenizer)
    words = ["the cat sat on the mat", "a big dog ran to the red mat", "the small blue cat ran", "a dog sat"]
    tangent = ia.PCATangent(mwsp, nb_concepts=2).fit(words)
    record = json.loads((tangent.save_pretrained(tmp_path / "t") / "tangent.json").read_text())
    assert record["model_id"] == "org/tiny-neox"
    # transformers 4 keeps the commit a model was loaded from (config._commit_hash); transformers 5 does not.
    assert record["model_revision"] == getattr(model.config, "_commit_hash", None)
    record = json.loads((tangent.save_pretrained(tmp_path / "t", model_revision="step8") / "tangent.json").read_text())
    assert record["model_revision"] == "step8"
