# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Reads run the model in eval mode, whatever mode the caller left it in (issue 27, finding 7).

A model built from a config starts in `train()` mode with dropout on. Read that way, a tangent fitted on texts fell
31-86 degrees from the eval-mode fit, and two identical fits 51-55 degrees apart. Every read now switches dropout
off and gives each module its mode back afterwards, also when the read raises.
"""

from __future__ import annotations

import copy

import pytest
import torch
from interpreto import ModelWithSplitPoints
from transformers import GPTNeoXForCausalLM

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import build_model
from interpreto_anisotropy.reading.split_point import eval_mode

DROPOUT = 0.5
K = 4


def _dropout_model(tokenizer, *, training: bool) -> GPTNeoXForCausalLM:
    """The toy decoder with dropout 0.5 on its hidden states and attention, in train or eval mode."""
    base = build_model("gpt_neox", vocab_size=len(tokenizer), hidden_size=64, num_layers=2, tokenizer=tokenizer)
    config = copy.deepcopy(base.config)
    config.hidden_dropout = config.attention_dropout = DROPOUT
    model = GPTNeoXForCausalLM(config)
    model.load_state_dict(base.state_dict())
    return model.train(training)


@pytest.fixture(scope="module")
def splitters(gpt_neox_model):
    """(train-mode splitter, eval-mode splitter) of two copies of the same dropout model."""
    tokenizer = gpt_neox_model[1]

    def wrap(training: bool) -> ModelWithSplitPoints:
        own = copy.deepcopy(tokenizer)
        return ModelWithSplitPoints(_dropout_model(own, training=training), split_point=1, tokenizer=own, batch_size=8)

    return wrap(True), wrap(False)


def _all_training(splitter) -> bool:
    return all(module.training for module in splitter._model.modules())


def test_the_toy_model_has_dropout_in_train_mode(splitters, fit_texts):
    """The check below is not vacuous: two train-mode forwards of this model differ."""
    model, tokenizer = splitters[0]._model, splitters[0].tokenizer
    input_ids = tokenizer(fit_texts[0], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        first, second = (model(input_ids=input_ids).logits for _ in range(2))
    assert not torch.allclose(first, second)


def test_token_activations_are_the_eval_mode_rows_and_the_mode_comes_back(splitters, fit_texts):
    training, evaluating = splitters
    rows, ids = ia.token_activations(training, fit_texts)
    expected, expected_ids = ia.token_activations(evaluating, fit_texts)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(rows, expected, rtol=0, atol=1e-6)
    assert _all_training(training)
    assert not evaluating._model.training


def test_a_pca_tangent_through_a_train_mode_model_is_the_eval_mode_fit(splitters, fit_texts):
    training, evaluating = splitters
    first = ia.PCATangent(training, nb_concepts=K).fit(fit_texts).subspace
    second = ia.PCATangent(training, nb_concepts=K).fit(fit_texts).subspace
    reference = ia.PCATangent(evaluating, nb_concepts=K).fit(fit_texts).subspace
    assert float(first.principal_angles(reference).max()) < 1e-5
    assert torch.equal(first.basis, second.basis)
    assert _all_training(training)


def test_the_gradient_probe_gives_a_partly_trained_model_back_module_by_module(splitters, fit_texts):
    """The probe was in eval mode before; it used to give the mode back wholesale (`model.train(True)`)."""
    training, evaluating = splitters
    frozen = training._model.get_submodule("gpt_neox.layers.0").eval()  # a part the caller keeps in eval mode
    flags = [module.training for module in training._model.modules()]
    try:
        gradients = ia.GradientProbe(training).gradients(fit_texts[:4]).gradients
        assert [module.training for module in training._model.modules()] == flags
    finally:
        frozen.train()
    expected = ia.GradientProbe(evaluating).gradients(fit_texts[:4]).gradients
    torch.testing.assert_close(gradients, expected, rtol=0, atol=1e-6)


def test_a_read_that_raises_ran_in_eval_mode_and_gives_the_mode_back(splitters, fit_texts):
    training = splitters[0]
    seen = []

    def fail(module, args):
        seen.append(module.training)
        raise RuntimeError("a broken layer")

    handle = training._model.get_submodule("gpt_neox.layers.0").register_forward_pre_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="a broken layer"):
            ia.token_activations(training, fit_texts[:2])
    finally:
        handle.remove()
    assert seen == [False]
    assert _all_training(training)


def test_each_module_gets_its_own_mode_back():
    """A model left partly in train mode is given back as it was, not switched wholesale by `model.train()`."""
    model = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Dropout(0.5)).train()
    model[1].eval()
    with eval_mode(model):
        assert not any(module.training for module in model.modules())
    assert [module.training for module in model.modules()] == [True, True, False]
