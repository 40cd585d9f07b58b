# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A user's own fitted Interpreto concept explainer, as a tangent (`TangentExplainer.from_interpreto`).

The explainers (Interpreto's `ConvexNMFConcepts` and `KMeansConcepts`) are built and fitted here, outside the
package, on the token activations of the tiny GPT-NeoX's split point. The adapter's basis is checked against a
float64 QR of their dictionary computed here, and the probe's energy share against one recomputed from the basis
and the raw gradients. The named tangent classes are checked to give, bit for bit, the basis the adapter gives for
the Interpreto explainer they fit, fitted by hand the way they fit it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
from interpreto import ModelWithSplitPoints
from interpreto.concepts import (
    ConvexNMFConcepts,
    ICAConcepts,
    KMeansConcepts,
    PCAConcepts,
    SemiNMFConcepts,
    SVDConcepts,
    TopKSAEConcepts,
)

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import (
    DegenerateStatisticsWarning,
    InvalidInputError,
    NonFiniteError,
    OutOfOrderError,
)
from interpreto_anisotropy.tangents.explainers import SklearnPCATangent

TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN
K = 5


@pytest.fixture(scope="module")
def activations(gpt_neox_mwsp, fit_texts) -> torch.Tensor:
    """Token activations (n, 64) of the fit texts at the fixture's split point, read by Interpreto itself."""
    rows, _ = gpt_neox_mwsp.get_activations(fit_texts[:12], activation_granularity=TOKEN)
    return rows


@pytest.fixture(scope="module")
def users_explainers(gpt_neox_mwsp, activations) -> dict[str, object]:
    """A user's own explainers, fitted outside the package: {name: fitted Interpreto explainer}."""
    convex = ConvexNMFConcepts(gpt_neox_mwsp, nb_concepts=K)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        convex.fit(activations[:200].relu(), max_iter=50)  # its multiplicative updates diverge on mixed signs
    kmeans = KMeansConcepts(gpt_neox_mwsp, nb_concepts=K, random_state=0)
    kmeans.fit(activations, n_init=1)
    return {"ConvexNMFConcepts": convex, "KMeansConcepts": kmeans}


@pytest.mark.parametrize("name", ["ConvexNMFConcepts", "KMeansConcepts"])
def test_a_users_explainer_becomes_a_tangent_spanning_its_dictionary(name, users_explainers, gpt_neox_mwsp):
    explainer = users_explainers[name]
    dictionary = explainer.get_dictionary().detach().double().numpy()  # (k, d)
    tangent = ia.TangentExplainer.from_interpreto(explainer)
    Q = tangent.subspace
    basis = Q.basis.double().numpy()
    assert basis.shape == (64, K) and Q.rank == np.linalg.matrix_rank(dictionary) == K
    np.testing.assert_allclose(basis.T @ basis, np.eye(K), atol=1e-6)
    reference, _ = np.linalg.qr(dictionary.T)  # an orthonormal basis of the atoms' span, computed here
    assert scipy.linalg.subspace_angles(basis, reference).max() < 1e-5
    # Every atom lies in the span: projecting it on the basis gives it back.
    np.testing.assert_allclose(dictionary @ basis @ basis.T, dictionary, atol=1e-5 * np.abs(dictionary).max())
    # Provenance, and the user's explainer kept as it was.
    assert (Q.name, Q.method, Q.split_point, Q.mean) == ("tangent", name, gpt_neox_mwsp.split_point, None)
    assert Q.info == {"dictionary_size": K, "dropped_rank": 0}
    assert tangent.method_name == name and tangent.inner_explainer is explainer and tangent.is_fitted
    assert np.array_equal(explainer.get_dictionary().detach().double().numpy(), dictionary)


@pytest.mark.parametrize("name", ["ConvexNMFConcepts", "KMeansConcepts"])
def test_the_probe_runs_on_a_users_explainer(name, users_explainers, gpt_neox_mwsp, texts):
    tangent = ia.TangentExplainer.from_interpreto(users_explainers[name])
    probe = ia.GradientProbe(gpt_neox_mwsp, objective="causal_lm")
    result = probe.run(texts[:20], tangent, n_controls=4, seed=1, progress=False)
    G = probe.gradients(texts[:20]).gradients.double().numpy()
    Q = tangent.subspace.basis.double().numpy()
    assert result.method == name and result.rank == K and result.n_tokens == G.shape[0]
    assert result.energy_share == pytest.approx(np.sum((G @ Q) ** 2) / np.sum(G**2), rel=1e-6)


def test_a_mean_centres_the_concepts(users_explainers, activations):
    mean = activations.mean(0)
    tangent = ia.TangentExplainer.from_interpreto(users_explainers["KMeansConcepts"], mean=mean)
    Q = tangent.subspace
    assert torch.equal(Q.mean, mean)
    concepts = tangent.activations_to_concepts(activations[:10])
    torch.testing.assert_close(concepts, (activations[:10] - mean) @ Q.basis)


def test_dependent_atoms_are_dropped(gpt_neox_mwsp, activations):
    """Atoms 3 and 4 of a k-means dictionary replaced by combinations of the others: rank 3 of 5."""
    explainer = KMeansConcepts(gpt_neox_mwsp, nb_concepts=K, random_state=0)
    explainer.fit(activations, n_init=1)
    atoms = explainer.concept_model.components.data
    atoms[3], atoms[4] = atoms[0] + atoms[1], 2 * atoms[2]
    with pytest.warns(DegenerateStatisticsWarning, match=r"\b3 dimensions"):
        Q = ia.TangentExplainer.from_interpreto(explainer).subspace
    assert Q.rank == 3 and Q.info == {"dictionary_size": 5, "dropped_rank": 2}
    reference, _ = np.linalg.qr(atoms[:3].double().numpy().T)
    assert scipy.linalg.subspace_angles(Q.basis.double().numpy(), reference).max() < 1e-5


def test_bad_explainers_are_refused_with_our_errors(gpt_neox_mwsp, activations):
    with pytest.raises(OutOfOrderError, match="KMeansConcepts.*fit"):
        ia.TangentExplainer.from_interpreto(KMeansConcepts(gpt_neox_mwsp, nb_concepts=K))
    with pytest.raises(InvalidInputError, match="ConceptAutoEncoderExplainer"):
        ia.TangentExplainer.from_interpreto(ia.Subspace.random(64, 4))
    too_many = KMeansConcepts(gpt_neox_mwsp, nb_concepts=32)
    too_many.fit(activations, n_init=1)
    with pytest.raises(InvalidInputError, match=r"KMeansConcepts.*nb_concepts=32.*R\^64"):
        ia.TangentExplainer.from_interpreto(too_many)
    fitted = KMeansConcepts(gpt_neox_mwsp, nb_concepts=K)
    fitted.fit(activations, n_init=1)
    with pytest.raises(InvalidInputError):
        ia.TangentExplainer.from_interpreto(fitted, mean=torch.zeros(48))
    fitted.concept_model.components.data[0, 0] = float("nan")  # as a diverged fit leaves it
    with pytest.raises(NonFiniteError, match="KMeansConcepts.get_dictionary"):
        ia.TangentExplainer.from_interpreto(fitted)


# Small budgets: the comparison is between two paths, not about convergence.
FIT_KWARGS = {
    "semi_nmf": {"max_iter": 20},
    "nmf": {"max_iter": 20},
    "topk_sae": {"nb_epochs": 2},  # not batch_size: with activations, fit takes it as the text reader's option
    "ica": {"max_iter": 100, "tol": 1e-2},
}
METHOD_KWARGS = {"topk_sae": {"top_k": 4}}
SKLEARN = (PCAConcepts, ICAConcepts, SVDConcepts)


@pytest.mark.parametrize(
    ("cls", "concept_class"),
    [
        (SklearnPCATangent, PCAConcepts),
        (ia.SemiNMFTangent, SemiNMFConcepts),
        (ia.ICATangent, ICAConcepts),
        (ia.SVDTangent, SVDConcepts),
        (ia.TopKSAETangent, TopKSAEConcepts),
    ],
)
def test_a_named_class_gives_the_adapters_basis_for_its_explainer(cls, concept_class, gpt_neox_mwsp, activations):
    """The named class and the adapter of the same explainer, fitted by hand on the centred rows, agree bit for bit.

    The global torch state is set alike before each (an SAE draws its initial weights from it when it is built), and
    NMF is left out (Interpreto's NMF initialisation draws from numpy's global state, which no seed fixes).
    """
    method, seed = cls.default_method, 4
    kwargs = {**METHOD_KWARGS.get(method, {}), **({"random_state": seed} if concept_class in SKLEARN else {})}
    mean = activations.mean(0)
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore")  # FastICA convergence, rank drops of tiny SAEs
        named = cls(gpt_neox_mwsp, nb_concepts=K, seed=seed, **METHOD_KWARGS.get(method, {}))
        torch.manual_seed(77)
        named.fit(activations, **FIT_KWARGS.get(method, {}))
        torch.manual_seed(77)
        by_hand = concept_class(gpt_neox_mwsp, nb_concepts=K, **kwargs)
        torch.manual_seed(seed)
        by_hand.fit(activations - mean, **FIT_KWARGS.get(method, {}))
        adapted = ia.TangentExplainer.from_interpreto(by_hand, mean=mean).subspace
    assert torch.equal(named.subspace.basis, adapted.basis) and torch.equal(named.subspace.mean, adapted.mean)
    assert (named.subspace.method, adapted.method) == (method, concept_class.__name__)
