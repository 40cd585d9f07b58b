# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Split points the reader and the probe cannot read naively: a module that runs several times per forward
(ALBERT's shared layer), and models that pad their inputs inside their forward (Longformer, BigBird block-sparse).

The reference values of ALBERT's calls are in the conformance matrix (`albert_first`, `albert_last`); here:

* without `call`, the reader and the probe raise our `InvalidInputError` naming the module, its calls and the option
  (before, the reader read the first call and the probe the last, silently);
* with `call`, the reader's rows are the probe's activations (the same call), and the two calls differ;
* a `call` of another type or beyond the calls is our error;
* a sweep at such a split point stops with the same error without `call`, and fits and probes the call it is given;
* Longformer and BigBird with block-sparse attention raise our `InvalidInputError` saying why and what to do (before,
  a raw `IndexError` / `RuntimeError`); BigBird switched to full attention reads each text as it is read alone.
"""

from __future__ import annotations

import re

import pytest
import torch
import transformers as hf
from architectures import FAMILIES, VOCAB, build
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer
from interpreto_anisotropy.errors import InvalidInputError

ALBERT_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0"


@pytest.fixture(scope="module")
def tokenizer(corpus_texts):
    return train_tokenizer(corpus_texts, arch="eurobert", vocab_size=VOCAB)


@pytest.fixture(scope="module")
def albert(tokenizer):
    model = build(FAMILIES["albert_last"], tokenizer, layers=3)
    return ModelWithSplitPoints(model, split_point=ALBERT_LAYER, tokenizer=tokenizer, batch_size=2)


def test_a_shared_layer_without_call_is_our_error_in_the_reader_and_the_probe(albert, texts):
    with pytest.raises(InvalidInputError, match=r"(?s)albert_layers\.0.*runs 3 times.*call='last'"):
        ia.token_activations(albert, texts[:2])
    with pytest.raises(InvalidInputError, match=r"(?s)albert_layers\.0.*runs 3 times.*call='last'"):
        ia.GradientProbe(albert).gradients(texts[:2])
    with pytest.raises(InvalidInputError, match=r"albert_layers\.0.*\b3 times"):
        ia.PCATangent(albert, nb_concepts=2).fit(texts[:4])


def first_logit_loss(output, batch) -> torch.Tensor:
    """A per-token loss of the uncorrupted text (masked LM reads a masked copy, whose activations differ)."""
    return output.logits[..., 0].square()


@pytest.mark.parametrize("call", ["first", "last", 1, -2])
def test_the_reader_and_the_probe_read_the_same_call(albert, texts, call):
    rows, _ = ia.token_activations(albert, texts[:4], call=call)
    raw = ia.GradientProbe(albert, objective=first_logit_loss, call=call).gradients(texts[:4])
    torch.testing.assert_close(raw.activations, rows)


def test_the_calls_differ_and_an_index_names_the_same_call(albert, texts):
    first, _ = ia.token_activations(albert, texts[:2], call="first")
    last, _ = ia.token_activations(albert, texts[:2], call="last")
    assert float((first - last).norm() / last.norm()) > 1e-3
    torch.testing.assert_close(ia.token_activations(albert, texts[:2], call=2)[0], last)
    torch.testing.assert_close(ia.token_activations(albert, texts[:2], call=-3)[0], first)
    probe_first = ia.GradientProbe(albert, call=0, seed=1).gradients(texts[:2])
    probe_last = ia.GradientProbe(albert, call=-1, seed=1).gradients(texts[:2])
    assert float((probe_first.gradients - probe_last.gradients).norm() / probe_last.gradients.norm()) > 1e-3


@pytest.mark.parametrize("call", [3, -4])
def test_a_call_beyond_the_calls_is_our_error(albert, texts, call):
    with pytest.raises(InvalidInputError, match=rf"call={call}.*3 time"):
        ia.token_activations(albert, texts[:2], call=call)
    with pytest.raises(InvalidInputError, match=rf"call={call}.*3 time"):
        ia.GradientProbe(albert, call=call).gradients(texts[:2])


@pytest.mark.parametrize("call", ["middle", 1.0, True])
def test_a_call_of_another_kind_is_our_error(albert, texts, call):
    with pytest.raises(InvalidInputError, match=rf"call.*'first'.*'last'.*{re.escape(repr(call))}"):
        ia.token_activations(albert, texts[:2], call=call)
    with pytest.raises(InvalidInputError, match=rf"call.*'first'.*'last'.*{re.escape(repr(call))}"):
        ia.GradientProbe(albert, call=call)


def test_a_module_that_runs_once_takes_any_call_naming_its_call(gpt_neox_mwsp, texts):
    plain, _ = ia.token_activations(gpt_neox_mwsp, texts[:2])
    for call in ("first", "last", 0, -1):
        torch.testing.assert_close(ia.token_activations(gpt_neox_mwsp, texts[:2], call=call)[0], plain)
    with pytest.raises(InvalidInputError, match="call=1"):
        ia.token_activations(gpt_neox_mwsp, texts[:2], call=1)


# ------------------------------------------------------------------------------------------ models that pad inside
def _longformer(tokenizer) -> ModelWithSplitPoints:
    torch.manual_seed(0)
    pad = tokenizer.pad_token_id
    config = hf.LongformerConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        attention_window=8,
        max_position_embeddings=512 + pad + 1,
        pad_token_id=pad,
    )
    model = hf.LongformerForMaskedLM(config).eval()
    return ModelWithSplitPoints(model, split_point="longformer.encoder.layer.0", tokenizer=tokenizer, batch_size=2)


def _big_bird(tokenizer, attention_type: str) -> ModelWithSplitPoints:
    torch.manual_seed(0)
    config = hf.BigBirdConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        attention_type=attention_type,
        block_size=2,
        num_random_blocks=1,
    )
    model = hf.BigBirdForMaskedLM(config).eval()
    return ModelWithSplitPoints(model, split_point="bert.encoder.layer.0", tokenizer=tokenizer, batch_size=2)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (_longformer, "attention_window"),
        (lambda tokenizer: _big_bird(tokenizer, "block_sparse"), "set_attention_type\\('original_full'\\)"),
    ],
    ids=["longformer", "big_bird_block_sparse"],
)
def test_a_model_that_pads_inside_is_our_error_saying_why(build, message, tokenizer, texts):
    mwsp = build(tokenizer)
    with pytest.raises(InvalidInputError, match=message):
        ia.token_activations(mwsp, texts[:4])
    with pytest.raises(InvalidInputError, match=message):
        ia.GradientProbe(mwsp).gradients(texts[:4])


def test_big_bird_switched_to_full_attention_reads_each_text_as_alone(tokenizer, texts):
    mwsp = _big_bird(tokenizer, "block_sparse")
    mwsp._model.bert.set_attention_type("original_full")
    rows, _ = ia.token_activations(mwsp, texts[:4])
    store: dict = {}
    handle = mwsp._model.get_submodule("bert.encoder.layer.0").register_forward_hook(
        lambda module, args, output: store.update(h=output[0] if isinstance(output, tuple) else output)
    )
    expected = []
    special = set(tokenizer.all_special_ids)
    try:
        for text in texts[:4]:
            ids = torch.tensor(tokenizer(text)["input_ids"])
            with torch.no_grad():
                mwsp._model(input_ids=ids[None])
            expected.append(store["h"][0][torch.tensor([token not in special for token in ids.tolist()])])
    finally:
        handle.remove()
    torch.testing.assert_close(rows, torch.cat(expected), rtol=1e-4, atol=1e-5)
    assert ia.GradientProbe(mwsp).gradients(texts[:4]).gradients.shape == rows.shape


def _albert_checkpoints(tokenizer, folder):
    model = build(FAMILIES["albert_last"], tokenizer, layers=3).float()
    for step in (10, 20):
        model.save_pretrained(folder / f"checkpoint-{step}")
        tokenizer.save_pretrained(folder / f"checkpoint-{step}")
    return str(folder / "checkpoint-*")


def _albert_sweep(tokenizer, texts, folder, **options):
    return ia.CheckpointSweep(
        _albert_checkpoints(tokenizer, folder),
        split_point=ALBERT_LAYER,
        nb_concepts=2,
        n_controls=2,
        texts=texts[:8],
        probe_texts=texts[:4],
        results_dir=folder / "sweep",
        progress=False,
        **options,
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_sweep_at_a_shared_layer_without_call_stops_with_the_same_error(tokenizer, texts, tmp_path):
    with pytest.raises(InvalidInputError, match="runs 3 times.*call='last'"):
        _albert_sweep(tokenizer, texts, tmp_path).run()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_sweep_at_a_shared_layer_fits_and_probes_the_call_it_is_given(tokenizer, texts, tmp_path):
    """The sweep's tangent of a checkpoint is the tangent fitted by hand on that call's activations, not another's."""
    sweep = _albert_sweep(tokenizer, texts, tmp_path, call="last", reference="each")
    table = sweep.run()
    assert len(table.rows) == 2 and all(0 <= row["energy_share"] <= 1 for row in table.rows)
    assert table.config["call"] == "last"
    saved = ia.Subspace.load(sweep.store.tangent_path(ALBERT_LAYER, 10))
    with ia.checkpoints.loaded(ia.checkpoints.Checkpoint(10, str(tmp_path / "checkpoint-10")), device="cpu") as (
        model,
        tokenizer_10,
    ):
        mwsp = ModelWithSplitPoints(model, split_point=ALBERT_LAYER, tokenizer=tokenizer_10, batch_size=8)
        by_call = {call: ia.PCATangent(mwsp, nb_concepts=2).fit(texts[:8], call=call).subspace for call in (0, -1)}
        raw = ia.GradientProbe(mwsp, call="last", seed=0).gradients(texts[:4])

    def projector(subspace):
        return subspace.basis.double() @ subspace.basis.double().T

    torch.testing.assert_close(projector(saved), projector(by_call[-1]), rtol=0, atol=1e-5)
    # the first call's tangent is another: its projector is 100 times farther than the tolerance of the match above
    assert (projector(saved) - projector(by_call[0])).abs().max() > 1e-3
    assert {row["n_tokens"] for row in table.rows} == {raw.gradients.shape[0]}  # the tokens of the last call's probe


def test_a_split_point_that_changes_the_length_is_our_error(corpus_texts, texts):
    """A model that pads inside without being known to (here a hook pads the last layer's output): our error."""
    from interpreto_anisotropy.demo import build_model, train_tokenizer

    # a model of its own: a deep copy of a session model another test has wrapped would run the original modules,
    # and the hook below would never fire (tests/conftest.py)
    tokenizer = train_tokenizer(corpus_texts, arch="gpt_neox", vocab_size=512)
    model = build_model(
        "gpt_neox", vocab_size=len(tokenizer), hidden_size=64, num_layers=2, num_heads=4, seed=0, tokenizer=tokenizer
    ).eval()
    mwsp = ModelWithSplitPoints(model, split_point="gpt_neox.layers.1", tokenizer=tokenizer, batch_size=2)

    def pad(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        padded = torch.nn.functional.pad(hidden, (0, 0, 0, 3))
        return (padded, *output[1:]) if isinstance(output, tuple) else padded

    mwsp._model.get_submodule("gpt_neox.layers.1").register_forward_hook(pad)
    with pytest.raises(InvalidInputError, match=r"'gpt_neox\.layers\.1'.*GPTNeoX"):
        ia.token_activations(mwsp, texts[:2])
    with pytest.raises(InvalidInputError, match=r"'gpt_neox\.layers\.1'.*GPTNeoX"):
        ia.GradientProbe(mwsp).gradients(texts[:2])


# ------------------------------------------------------------------------------- the call travels with the tangent
def test_a_tangent_fitted_at_one_call_is_refused_by_a_probe_of_another_naming_both(albert, texts):
    """Issue 39: a tangent fitted with call="first" was probed with call="last" without a word (energy 0.091
    against 0.123 with the same call). It records its call, and the probe refuses another."""
    tangent = ia.PCATangent(albert, nb_concepts=2).fit(texts[:8], call="first")
    assert tangent.subspace.call == "first"
    with pytest.raises(InvalidInputError, match=r"call='first'.*call='last'"):
        ia.GradientProbe(albert, call="last").run(texts[:4], tangent, n_controls=2)
    for same in ("first", 0):  # call 0 is the first call
        result = ia.GradientProbe(albert, call=same, seed=1).run(texts[:4], tangent, n_controls=2)
        assert 0 <= result.energy_share <= 1


def test_a_tangent_fitted_on_activations_has_no_call_and_is_probed_at_any(albert, texts):
    rows, _ = ia.token_activations(albert, texts[:8], call="first")
    tangent = ia.PCATangent(albert, nb_concepts=2).fit(rows)
    assert tangent.subspace.call is None
    assert 0 <= ia.GradientProbe(albert, call="last").run(texts[:4], tangent, n_controls=2).energy_share <= 1


def test_the_call_is_saved_with_the_tangent_and_an_old_file_without_it_is_unknown(albert, texts, tmp_path):
    import json

    tangent = ia.PCATangent(albert, nb_concepts=2).fit(texts[:8], call="first")
    folder = tangent.save_pretrained(tmp_path / "tangent")
    assert json.loads((folder / "tangent.json").read_text())["call"] == "first"
    assert ia.Subspace.load(folder / "subspace.safetensors").call == "first"
    loaded = ia.TangentExplainer.from_pretrained(folder, albert)
    assert loaded.subspace.call == "first"
    with pytest.raises(InvalidInputError, match=r"call='first'.*call='last'"):
        ia.GradientProbe(albert, call="last").run(texts[:4], loaded, n_controls=2)
    # a folder saved before the call was recorded: no "call" in tangent.json nor in the subspace's metadata
    record = json.loads((folder / "tangent.json").read_text())
    del record["call"]
    (folder / "tangent.json").write_text(json.dumps(record))
    old = tangent.subspace.replace(call=None)
    old.save(folder / "subspace.safetensors")
    loaded = ia.TangentExplainer.from_pretrained(folder, albert)
    assert loaded.subspace.call is None
    assert 0 <= ia.GradientProbe(albert, call="last").run(texts[:4], loaded, n_controls=2).energy_share <= 1


def test_a_subspace_call_of_another_kind_is_our_error():
    with pytest.raises(InvalidInputError, match="call.*'first'.*'last'.*'middle'"):
        ia.Subspace.random(8, 2).replace(call="middle")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_sweep_refuses_a_given_reference_fitted_at_another_call(albert, tokenizer, texts, tmp_path):
    reference = ia.PCATangent(albert, nb_concepts=2).fit(texts[:8], call="first").subspace
    with pytest.raises(InvalidInputError, match=r"call='first'.*call='last'"):
        _albert_sweep(tokenizer, texts, tmp_path, call="last", reference=reference).run()
    table = _albert_sweep(tokenizer, texts, tmp_path / "same", call="first", reference=reference).run()
    assert len(table.rows) == 2


def test_a_live_probe_refuses_a_given_tangent_fitted_at_another_call(albert, texts):
    reference = ia.PCATangent(albert, nb_concepts=2).fit(texts[:8], call="first").subspace
    with pytest.raises(InvalidInputError, match=r"call='first'.*call='last'"):
        ia.TrainingProbe(albert._model, ALBERT_LAYER, tangent=reference, call="last")
    assert ia.TrainingProbe(albert._model, ALBERT_LAYER, tangent=reference, call="first").settings.call == "first"
