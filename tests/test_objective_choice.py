# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""objective="auto" in GradientProbe, our errors for objectives that do not fit the model, and for tangents from
another split point or width."""

from __future__ import annotations

import pytest
import torch
from architectures import FAMILIES, VOCAB, build
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.objectives import CausalLMObjective, ObjectiveName, objective_for_model


@pytest.fixture(scope="module")
def tokenizers(corpus_texts):
    return {
        "decoder": train_tokenizer(corpus_texts, arch="gpt_neox", vocab_size=VOCAB),
        "wrapped": train_tokenizer(corpus_texts, arch="eurobert", vocab_size=VOCAB),
    }


def _mwsp(name: str, tokenizers, split_point: str | None = None, layers: int = 2) -> ModelWithSplitPoints:
    family = FAMILIES[name]
    tokenizer = tokenizers[family.tokenizer]
    model = build(family, tokenizer, layers=layers).float()
    return ModelWithSplitPoints(
        model, split_point=split_point or family.split_point, tokenizer=tokenizer, batch_size=4
    )


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("gpt2", ObjectiveName.CAUSAL_LM),
        ("llama", ObjectiveName.CAUSAL_LM),
        ("bert", ObjectiveName.MASKED_LM),
        ("modernbert", ObjectiveName.MASKED_LM),
        ("gpt2_classifier", ObjectiveName.SEQUENCE_CLASSIFICATION),
    ],
)
def test_auto_takes_the_objective_of_the_head(family, expected, tokenizers):
    mwsp = _mwsp(family, tokenizers)
    assert objective_for_model(mwsp._model) is expected
    assert ia.GradientProbe(mwsp).objective.name == expected.value  # "auto" is the default
    assert ia.GradientProbe(mwsp, objective="auto").objective.name == expected.value


def test_auto_agrees_with_the_sweeps_config_rule(tokenizers):
    for name in ("gpt2", "opt", "gpt_neox", "bert", "roberta", "eurobert", "deberta_v2"):
        model = _mwsp(name, tokenizers)._model
        assert objective_for_model(model).value == ia.checkpoints.infer_objective(model.config)


def test_causal_lm_on_a_headless_model_names_what_it_returns(tokenizers, texts):
    mwsp = _mwsp("bert_headless", tokenizers)
    with pytest.raises(InvalidInputError, match="BertModel.*callable"):
        ia.GradientProbe(mwsp, objective="causal_lm")
    with pytest.raises(InvalidInputError, match="BertModel"):
        ia.GradientProbe(mwsp)  # auto cannot choose either
    # forced with an instance, the loss itself says what the model returned
    probe = ia.GradientProbe(mwsp, objective=CausalLMObjective())
    with pytest.raises(InvalidInputError, match=r"BaseModelOutputWithPoolingAndCrossAttentions \(last_hidden_state"):
        probe.gradients(texts[:2])


def test_a_named_objective_of_another_head_is_refused_and_says_which_fits(tokenizers):
    with pytest.raises(InvalidInputError, match=r"masked_lm.*GPT2LMHeadModel.*objective='causal_lm'"):
        ia.GradientProbe(_mwsp("gpt2", tokenizers), objective="masked_lm")
    with pytest.raises(InvalidInputError, match=r"causal_lm.*BertForMaskedLM.*'masked_lm'"):
        ia.GradientProbe(_mwsp("bert", tokenizers), objective="causal_lm")
    with pytest.raises(InvalidInputError, match="sequence_classification"):
        ia.GradientProbe(_mwsp("gpt2_classifier", tokenizers), objective="causal_lm")


def test_language_model_objective_on_classifier_logits_is_our_error(tokenizers, texts):
    probe = ia.GradientProbe(_mwsp("gpt2_classifier", tokenizers), objective=CausalLMObjective())
    with pytest.raises(InvalidInputError, match=r"causal_lm.*objective='sequence_classification'"):
        probe.gradients(texts[:2])


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_tangent_from_another_split_point_is_refused_naming_both(tokenizers, texts):
    low = _mwsp("llama", tokenizers, split_point="model.layers.0")
    high = _mwsp("llama", tokenizers, split_point="model.layers.1")
    tangent = ia.PCATangent(low, nb_concepts=4).fit(texts[:8])
    with pytest.raises(InvalidInputError, match=r"'model\.layers\.0'.*'model\.layers\.1'"):
        ia.GradientProbe(high).run(texts[:4], tangent, n_controls=2, progress=False)
    # a Subspace without a split point (yours) is accepted
    anonymous = ia.Subspace(tangent.subspace.basis)
    assert ia.GradientProbe(high).run(texts[:4], anonymous, n_controls=2, progress=False).rank == 4


def test_a_tangent_of_another_width_is_refused_naming_both(tokenizers, texts):
    mwsp = _mwsp("gpt2", tokenizers)
    other = ia.Subspace(torch.linalg.qr(torch.randn(48, 4))[0], split_point=mwsp.split_point)
    with pytest.raises(InvalidInputError, match=r"'transformer\.h\.0'.*d=32.*R\^48"):
        ia.GradientProbe(mwsp).run(texts[:4], other, n_controls=2, progress=False)


def test_special_tokens_can_be_included_in_fit_and_probe_alike(tokenizers, texts):
    mwsp = _mwsp("bert", tokenizers)
    special = torch.tensor(mwsp.tokenizer.all_special_ids)
    _, kept_ids = ia.token_activations(mwsp, texts[:4])
    _, all_ids = ia.token_activations(mwsp, texts[:4], include_special=True)
    assert not torch.isin(kept_ids, special).any() and torch.isin(all_ids, special).sum() == 8  # CLS + SEP each
    without = ia.GradientProbe(mwsp).gradients(texts[:4])
    with_special = ia.GradientProbe(mwsp, include_special=True).gradients(texts[:4])
    assert with_special.gradients.shape[0] == without.gradients.shape[0] + 8 == all_ids.shape[0]
    assert torch.equal(with_special.input_ids, all_ids) and torch.equal(without.input_ids, kept_ids)


def _tiny_mixtral(tokenizer) -> ModelWithSplitPoints:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        router_aux_loss_coef=0.5,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        experts_implementation="eager",  # the grouped matmul has no float64 kernel
    )
    model = MixtralForCausalLM(config).double().eval()
    return ModelWithSplitPoints(model, split_point="model.layers.0", tokenizer=tokenizer, batch_size=1)


def _own_loss_gradient(mwsp: ModelWithSplitPoints, input_ids: torch.Tensor) -> torch.Tensor:
    """dL/dh at the split point of the model's own loss (labels = inputs, router logits on): plain autograd."""
    model, store = mwsp._model, {}
    module = model.get_submodule(mwsp.split_point)
    handle = module.register_forward_hook(
        lambda m, a, out: store.setdefault("h", out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.enable_grad():
            loss = model(input_ids=input_ids[None], labels=input_ids[None], output_router_logits=True).loss
            (gradient,) = torch.autograd.grad(loss, store["h"])
    finally:
        handle.remove()
    return gradient[0]


def test_include_aux_loss_differentiates_the_moe_models_own_training_loss(tokenizers, texts):
    mwsp = _tiny_mixtral(tokenizers["decoder"])
    text = texts[0]
    input_ids = torch.tensor(mwsp.tokenizer(text)["input_ids"])
    expected = _own_loss_gradient(mwsp, input_ids)[:-1]  # the last token predicts nothing: no row
    with_aux = ia.GradientProbe(mwsp, objective=CausalLMObjective(reduction="mean", include_aux_loss=True))
    assert with_aux.objective.aux_loss_coef == 0.5 and with_aux.objective.describe()["include_aux_loss"] is True
    rows = with_aux.gradients([text])
    assert torch.equal(rows.input_ids, input_ids[:-1])
    torch.testing.assert_close(rows.gradients.double(), expected, rtol=1e-6, atol=1e-9)
    # "sum" is the same loss times the number of predicted tokens
    summed = ia.GradientProbe(mwsp, objective=CausalLMObjective(include_aux_loss=True)).gradients([text])
    # (up to the float32 rounding of the router's loss, which transformers computes in float32)
    scaled = expected * (len(input_ids) - 1)
    assert (summed.gradients.double() - scaled).norm() < 1e-6 * scaled.norm()
    # without the router's loss the gradients differ (the default leaves it out)
    plain = ia.GradientProbe(mwsp, objective=CausalLMObjective(reduction="mean")).gradients([text])
    assert "include_aux_loss" not in ia.GradientProbe(mwsp).objective.describe()
    assert (plain.gradients.double() - expected).norm() > 1e-3 * expected.norm()


def test_include_aux_loss_is_refused_on_a_model_without_a_router(tokenizers):
    with pytest.raises(InvalidInputError, match="include_aux_loss.*GPT2LMHeadModel"):
        ia.GradientProbe(_mwsp("gpt2", tokenizers), objective=CausalLMObjective(include_aux_loss=True))
    with pytest.raises(ia.errors.InvalidInputError, match="include_aux_loss.*'yes'"):
        CausalLMObjective(include_aux_loss="yes")
