# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The shared test kit works: tiny models, their tokenizers, and Interpreto on top of them."""

from __future__ import annotations

import os

import pytest
import torch
from interpreto import ModelWithSplitPoints

TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN
ARCH_FIXTURES = ["gpt_neox", "llama", "eurobert"]


def test_offline_mode_is_set():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_texts_are_short_distinct_corpus_texts(texts, fit_texts, corpus_texts):
    assert len(texts) == 32 and len(fit_texts) == 32 and len(corpus_texts) == 300
    assert all(isinstance(t, str) and 64 <= len(t) <= 400 for t in texts + fit_texts)
    assert not set(texts) & set(fit_texts)
    assert not set(texts) & set(corpus_texts)


@pytest.mark.parametrize("arch", ARCH_FIXTURES)
def test_model_pairs_are_tiny_float32_eval_with_pad_token(arch, request):
    model, tokenizer = request.getfixturevalue(f"{arch}_model")
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert tokenizer.pad_token is not None and tokenizer.pad_token_id == model.config.pad_token_id
    assert len(tokenizer) <= model.config.vocab_size <= 512
    if arch == "eurobert":
        assert tokenizer.mask_token_id is not None and tokenizer.mask_token_id == model.config.mask_token_id


@pytest.mark.parametrize("arch", ARCH_FIXTURES)
def test_mwsp_token_activations_have_one_row_per_token(arch, request, texts):
    mwsp = request.getfixturevalue(f"{arch}_mwsp")
    assert isinstance(mwsp, ModelWithSplitPoints)
    assert mwsp.split_point.endswith("layers.1")
    activations, _ = mwsp.get_activations(texts[:10], activation_granularity=TOKEN)
    assert activations.ndim == 2 and activations.shape[1] == 64
    assert torch.isfinite(activations).all()
    # Each row is a real token of one of the texts (specials such as bos/eos may or may not be counted).
    tokenizer = mwsp.tokenizer
    n_plain = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts[:10])
    assert n_plain <= activations.shape[0] <= n_plain + 2 * 10


def test_models_differ_between_architectures(gpt_neox_model, llama_model, eurobert_model):
    names = {type(m).__name__ for m, _ in (gpt_neox_model, llama_model, eurobert_model)}
    assert names == {"GPTNeoXForCausalLM", "LlamaForCausalLM", "EuroBertForMaskedLM"}


def test_classifier_splitter_feeds_occlusion_on_concepts(gpt_neox_classifier_splitter, texts):
    from interpreto import Occlusion
    from interpreto.concepts import NeuronsAsConcepts

    activations, predictions = gpt_neox_classifier_splitter.get_activations(texts[:8])
    assert activations.shape == (8, 64) and predictions.shape == (8,)

    explainer = NeuronsAsConcepts(gpt_neox_classifier_splitter)
    inputs_to_concepts = explainer.get_inputs_to_concepts_model()
    occlusion = Occlusion(inputs_to_concepts, gpt_neox_classifier_splitter.tokenizer, batch_size=8)
    n_embeddings = gpt_neox_classifier_splitter._model.get_input_embeddings().weight.shape[0]
    explanations = occlusion(texts[:2], targets=torch.tensor([0, 1]))
    assert len(explanations) == 2 and explanations[0].attributions.shape[0] == 2
    # The toy tokenizer reserves Interpreto's [REPLACE] token: the shared model was not resized.
    assert gpt_neox_classifier_splitter._model.get_input_embeddings().weight.shape[0] == n_embeddings


def test_classifier_mwsp_gives_token_activations(gpt_neox_classifier_mwsp, texts):
    activations, _ = gpt_neox_classifier_mwsp.get_activations(texts[:4], activation_granularity=TOKEN)
    assert activations.ndim == 2 and activations.shape[1] == 64


def test_toy_checkpoints_reload(toy_checkpoints):
    assert [p.name for p in toy_checkpoints.checkpoints] == [f"checkpoint-{s}" for s in (0, 1, 2, 4, 8, 20)]
    assert all((p / "config.json").is_file() for p in toy_checkpoints.checkpoints)


@pytest.mark.parametrize("arch", ARCH_FIXTURES)
def test_raw_pairs_stay_unwrapped_and_copyable(arch, request):
    import copy

    model, _ = request.getfixturevalue(f"{arch}_model")
    mwsp = request.getfixturevalue(f"{arch}_mwsp")  # wrapping happens on a private copy
    assert mwsp._model is not model
    assert all(
        torch.equal(a, b) for a, b in zip(mwsp._model.state_dict().values(), model.state_dict().values(), strict=True)
    )
    clone = copy.deepcopy(model)
    fired = []
    handle = clone.get_submodule(mwsp.split_point).register_forward_hook(lambda *args: fired.append(True))
    clone(input_ids=torch.tensor([[5, 6, 7]]))
    handle.remove()
    assert fired
