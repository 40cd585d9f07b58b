# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Interpreto conformance of tangent explainers on the tiny GPT-NeoX, Llama and EuroBERT fixtures.

A tangent explainer must behave as any Interpreto `ConceptAutoEncoderExplainer`: token activations in, concepts
(n, k) and reconstructions (n, d) out, a (k, d) dictionary, concept-to-output gradients, `TopKInputs`
interpretations, and inputs-to-concepts attributions (`Occlusion`) through `get_inputs_to_concepts_model()`.
Every method is fitted on GPT-NeoX; PCA on all three architectures.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from interpreto import ModelWithSplitPoints, Occlusion
from interpreto.concepts import TopKInputs

from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.tangents.explainers import PCATangent, TangentExplainer
from interpreto_anisotropy.tangents.subspace import Subspace

TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN
ARCHS = ["gpt_neox", "llama", "eurobert"]
K = 8
N_FIT_TEXTS = 12

# Small budgets for the iterative methods: conformance, not convergence, is tested here.
FIT_KWARGS = {
    "semi_nmf": {"max_iter": 20},
    "nmf": {"max_iter": 20},
    "topk_sae": {"nb_epochs": 2, "batch_size": 256},
    "ica": {"max_iter": 100, "tol": 1e-2},
}
METHOD_KWARGS = {"topk_sae": {"top_k": 4}}


@pytest.fixture(scope="module")
def token_activations(request, fit_texts):
    """Token activations of the first fit texts, computed once per architecture: {arch: (mwsp, acts)}."""
    cache: dict[str, tuple[ModelWithSplitPoints, torch.Tensor]] = {}

    def get(arch: str):
        if arch not in cache:
            mwsp = request.getfixturevalue(f"{arch}_mwsp")
            activations, _ = mwsp.get_activations(fit_texts[:N_FIT_TEXTS], activation_granularity=TOKEN)
            cache[arch] = (mwsp, activations)
        return cache[arch]

    return get


def check_explainer_contract(tangent: TangentExplainer, activations: torch.Tensor) -> Subspace:
    """The concept explainer contract, checked against the tangent's own basis."""
    Q = tangent.subspace
    n, d = activations.shape
    k = Q.rank
    assert d == 64 and 1 <= k <= K
    basis = Q.basis.double()
    assert (basis.T @ basis - torch.eye(k, dtype=torch.float64)).abs().max() < 1e-5
    concepts = tangent.activations_to_concepts(activations)
    assert concepts.shape == (n, k) and torch.isfinite(concepts).all()
    reconstructions = tangent.concepts_to_activations(concepts)
    assert reconstructions.shape == (n, d)
    torch.testing.assert_close(reconstructions, Q.project(activations).float(), rtol=1e-4, atol=1e-3)
    dictionary = tangent.get_dictionary()
    assert dictionary.shape == (k, d)
    torch.testing.assert_close(dictionary, Q.basis.T.float())
    return Q


# --------------------------------------------------------------------------- PCA on every architecture
@pytest.mark.parametrize("arch", ARCHS)
def test_pca_tangent_conforms_on_every_architecture(arch, token_activations, texts):
    mwsp, activations = token_activations(arch)
    assert activations.ndim == 2 and activations.shape[0] > 100
    tangent = PCATangent(mwsp, nb_concepts=K).fit(activations)
    Q = check_explainer_contract(tangent, activations)
    assert Q.rank == K and Q.split_point == mwsp.split_point and Q.method == "pca"

    # On real activations the streamed PCA still agrees with a float64 SVD of the centred rows.
    centred = activations.double() - activations.double().mean(0)
    singular_values = torch.linalg.svdvals(centred)
    reference = Subspace(torch.linalg.svd(centred, full_matrices=False).Vh[:K].T)
    gap = (singular_values[K - 1] ** 2 - singular_values[K] ** 2) / singular_values[0] ** 2
    assert Q.principal_angles(reference).max() < max(1e-4, 1e-5 / gap.item())

    # Concept-to-output gradients, one (targets, tokens, concepts) tensor per text. For language models the
    # targets are positions (the max logit there); Interpreto's normalisation divides by each target's total,
    # which is 0/0 where a target position is padding of a shorter text, so the batch is checked unnormalised.
    couple = texts[:2]
    gradients = tangent.concept_output_gradient(
        couple, targets=[1, 3], activation_granularity=TOKEN, normalization=False
    )
    assert len(gradients) == 2
    for text, gradient in zip(couple, gradients, strict=True):
        tokens, _ = mwsp.get_activations([text], activation_granularity=TOKEN)
        assert gradient.shape == (2, tokens.shape[0], K)
        assert torch.isfinite(gradient).all()
    assert gradients[0].abs().sum() > 0
    (normalised,) = tangent.concept_output_gradient(couple[:1], targets=[1, 3], activation_granularity=TOKEN)
    torch.testing.assert_close(normalised.abs().sum(dim=(1, 2)), torch.ones(2))


def test_activations_of_another_model_width_are_refused(token_activations):
    mwsp, activations = token_activations("gpt_neox")
    with pytest.raises(InvalidInputError):
        PCATangent(mwsp, nb_concepts=K).fit(activations[:, :48])


# --------------------------------------------------------------------------- every method on GPT-NeoX
@pytest.mark.parametrize("method", ["pca", "pca_sklearn", "semi_nmf", "nmf", "ica", "svd", "topk_sae"])
def test_every_method_conforms_on_gpt_neox(method, token_activations):
    mwsp, activations = token_activations("gpt_neox")
    tangent = TangentExplainer(mwsp, nb_concepts=K, method=method, **METHOD_KWARGS.get(method, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FastICA convergence, rank drops of tiny SAEs: reported, not errors
        tangent.fit(activations, **FIT_KWARGS.get(method, {}))
    Q = check_explainer_contract(tangent, activations)
    assert Q.method == method and tangent.method_name == method
    assert Q.info.get("dropped_rank", 0) == K - Q.rank
    # Pooled fits take lists of activation tensors for every method.
    if method == "svd":
        pooled = TangentExplainer(mwsp, nb_concepts=K, method=method).fit([activations[:300], activations[300:]])
        assert pooled.subspace.principal_angles(Q).max() < 1e-2


# --------------------------------------------------------------------------- Interpreto's interpretation tools
def test_topk_inputs_interpret_tangent_concepts(token_activations, fit_texts):
    mwsp, activations = token_activations("gpt_neox")
    tangent = PCATangent(mwsp, nb_concepts=4).fit(activations)
    interpretation = TopKInputs(concept_explainer=tangent, activation_granularity=TOKEN, k=3).interpret(
        concepts_indices="all", inputs=fit_texts[:N_FIT_TEXTS], latent_activations=activations
    )
    assert set(interpretation) == {0, 1, 2, 3}
    concepts = tangent.activations_to_concepts(activations)
    for index, top in interpretation.items():
        assert top is not None and 1 <= len(top) <= 3
        assert all(isinstance(token, str) for token in top)
        values = list(top.values())
        assert values == sorted(values, reverse=True)
        # The best input's activation is the concept's largest activation over all tokens.
        assert values[0] == pytest.approx(concepts[:, index].max().item(), rel=1e-5)


def test_occlusion_attributes_tangent_concepts_to_input_words(gpt_neox_classifier_splitter, fit_texts, texts):
    splitter = gpt_neox_classifier_splitter
    sequence_activations, _ = splitter.get_activations(fit_texts)  # one row per text: the classifier's input
    assert sequence_activations.shape == (len(fit_texts), 64)
    tangent = PCATangent(splitter, nb_concepts=4).fit(sequence_activations)
    inputs_to_concepts = tangent.get_inputs_to_concepts_model()
    assert inputs_to_concepts.nb_concepts == 4

    short = sorted(texts, key=len)[:2]
    # The bridge model's "logits" are the tangent concepts of the texts.
    encoded = splitter.tokenizer(short, return_tensors="pt", padding=True)
    logits = inputs_to_concepts(**encoded).logits
    expected = tangent.activations_to_concepts(splitter.get_activations(short)[0])
    torch.testing.assert_close(logits.detach(), expected, rtol=1e-4, atol=1e-5)

    occlusion = Occlusion(inputs_to_concepts, splitter.tokenizer, batch_size=8)
    explanations = occlusion(short, targets=torch.tensor([0, 3]))
    assert len(explanations) == 2
    for explanation in explanations:
        attributions = explanation.attributions
        assert attributions.ndim == 2 and attributions.shape[0] == 2  # (targets = concepts 0 and 3, words)
        assert attributions.shape[1] >= 1 and torch.isfinite(attributions).all()
        assert np.abs(attributions.detach().numpy()).sum() > 0


@pytest.mark.parametrize(
    ("arch", "split_point", "width"),
    [
        ("gpt_neox", "gpt_neox.layers.0", 64),
        ("gpt_neox", "gpt_neox.layers.0.mlp.dense_h_to_4h", None),
        ("llama", "model.layers.1", 64),
        ("eurobert", "model.layers.0.mlp.up_proj", None),
    ],
)
def test_the_latent_width_equals_interpretos_latent_shape(arch, split_point, width, request):
    """d comes from a forward stopped at the split point; Interpreto's nnsight trace is the reference."""
    from interpreto_anisotropy.tangents.explainers import _latent_dim

    model, tokenizer = request.getfixturevalue(f"{arch}_model")
    splitter = ModelWithSplitPoints(model, split_point=split_point, tokenizer=tokenizer, batch_size=4)
    expected = int(splitter.get_latent_shape()[-1])
    assert _latent_dim(splitter) == expected
    if width is not None:
        assert expected == width
    else:
        assert expected == model.config.intermediate_size
