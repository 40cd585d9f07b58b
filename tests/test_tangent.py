# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""TangentExplainer on synthetic activations, against independent numpy / scikit-learn computations.

The splitter is the tiny GPT-NeoX fixture (d = 64); the activations are synthetic, anisotropic and with a clear
spectral gap after the k-th direction, so the top-k principal subspace is well conditioned and can be compared
with a float64 numpy SVD to 1e-4 rad.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
from interpreto import ModelWithSplitPoints
from interpreto.concepts import (
    ICAConcepts,
    KMeansConcepts,
    NMFConcepts,
    PCAConcepts,
    SemiNMFConcepts,
    SVDConcepts,
    TopKSAEConcepts,
)
from interpreto.concepts.base import ConceptAutoEncoderExplainer
from threadpoolctl import threadpool_limits

from interpreto_anisotropy.demo import build_model
from interpreto_anisotropy.errors import (
    AnisotropyError,
    DegenerateStatisticsWarning,
    InvalidInputError,
    NonFiniteError,
    OutOfOrderError,
)
from interpreto_anisotropy.tangents.controls import normal_controls
from interpreto_anisotropy.tangents.explainers import (
    _NAMED_TANGENTS,
    ICATangent,
    NMFTangent,
    PCATangent,
    SemiNMFTangent,
    SklearnPCATangent,
    SVDTangent,
    TangentExplainer,
    TopKSAETangent,
    method_streams,
    tangent_method_names,
)
from interpreto_anisotropy.tangents.subspace import Subspace

D = 64
K = 6


def synthetic(n: int, *, seed: int = 0, offset: float = 5.0) -> torch.Tensor:
    """(n, 64) float32 rows: a rotated spectrum 8, 7, ..., 3 then 0.5 and below (gap at k = 6), plus an offset."""
    rng = np.random.default_rng(seed)
    scales = np.concatenate([np.linspace(8.0, 3.0, K), np.linspace(0.5, 0.05, D - K)])
    rotation, _ = np.linalg.qr(np.random.default_rng(1234).standard_normal((D, D)))  # same frame for every seed
    rows = (rng.standard_normal((n, D)) * scales) @ rotation.T + offset * np.random.default_rng(99).standard_normal(D)
    return torch.from_numpy(rows.astype(np.float32))


def numpy_pca_basis(x: torch.Tensor, k: int, *, center: bool = True) -> np.ndarray:
    """Top-k right singular vectors of the (centred) rows, float64 numpy: the reference PCA."""
    rows = x.double().numpy()
    if center:
        rows = rows - rows.mean(0)
    with threadpool_limits(limits=1, user_api="blas"):  # a threaded OpenBLAS next to torch's threads crawls
        _, _, vt = np.linalg.svd(rows, full_matrices=False)
    return vt[:k].T


def largest_angle(a, b) -> float:
    a = a.basis.double().numpy() if isinstance(a, Subspace) else np.asarray(a, dtype=np.float64)
    b = b.basis.double().numpy() if isinstance(b, Subspace) else np.asarray(b, dtype=np.float64)
    return float(scipy.linalg.subspace_angles(a, b).max())


@pytest.fixture(scope="module")
def acts() -> torch.Tensor:
    return synthetic(3000)


@pytest.fixture(scope="module")
def splitter(gpt_neox_mwsp):
    return gpt_neox_mwsp


@pytest.fixture(scope="module")
def pca(splitter, acts) -> PCATangent:
    """One PCA tangent fitted on `acts`, shared by the read-only tests (building one scans the model)."""
    return PCATangent(splitter, nb_concepts=K).fit(acts)


@pytest.fixture(scope="module")
def throwaway(splitter) -> dict[str, TangentExplainer]:
    """Unfitted explainers for the bad-input tests, which only check that fit raises."""
    return {method: TangentExplainer(splitter, nb_concepts=4, method=method) for method in ("pca", "svd")}


# --------------------------------------------------------------------------- PCA against numpy
def test_pca_tangent_equals_numpy_svd(pca, acts):
    Q = pca.subspace
    assert (Q.dim, Q.rank) == (D, K)
    assert largest_angle(Q, numpy_pca_basis(acts, K)) < 1e-4
    np.testing.assert_allclose(Q.mean.double().numpy(), acts.double().numpy().mean(0), rtol=1e-6, atol=1e-5)
    basis = Q.basis.double()
    assert (basis.T @ basis - torch.eye(K, dtype=torch.float64)).abs().max() < 1e-6


def test_pca_tangent_directions_are_ordered_principal_axes(pca, acts):
    """Not only the span: each column is the matching right singular vector (up to sign)."""
    Q = pca.subspace.basis.double().numpy()
    reference = numpy_pca_basis(acts, K)
    np.testing.assert_allclose(np.abs(np.sum(Q * reference, axis=0)), 1.0, atol=1e-6)


def test_uncentred_pca_uses_the_second_moment(splitter, acts):
    tangent = PCATangent(splitter, nb_concepts=K, center=False).fit(acts)
    Q = tangent.subspace
    assert Q.mean is None
    assert largest_angle(Q, numpy_pca_basis(acts, K, center=False)) < 1e-4
    # Concepts are plain coordinates when nothing is centred.
    torch.testing.assert_close(tangent.activations_to_concepts(acts[:5]), acts[:5] @ Q.basis)


# --------------------------------------------------------------------------- streaming and pooling
def test_partial_fit_over_batches_equals_one_shot_fit(splitter, pca, acts):
    one_shot = pca.subspace
    streamed = PCATangent(splitter, nb_concepts=K)
    for batch in acts.split(256):
        streamed.partial_fit(batch)
    assert largest_angle(streamed.subspace, one_shot) < 1e-5
    torch.testing.assert_close(streamed.subspace.mean, one_shot.mean, rtol=1e-6, atol=1e-5)


def test_fit_on_a_generator_of_batches_equals_one_shot_fit(splitter, pca, acts):
    one_shot = pca.subspace
    consumed = []

    def batches():
        for batch in acts.split(500):
            consumed.append(batch.shape[0])
            yield batch

    streamed = PCATangent(splitter, nb_concepts=K).fit(batches()).subspace
    assert sum(consumed) == acts.shape[0]
    assert largest_angle(streamed, one_shot) < 1e-5
    assert largest_angle(streamed, numpy_pca_basis(acts, K)) < 1e-4


def test_pooled_fit_equals_fit_on_the_concatenation(splitter):
    early, late = synthetic(1500, seed=1, offset=5.0), synthetic(2000, seed=2, offset=6.0)
    tangent = PCATangent(splitter, nb_concepts=K)
    pooled = tangent.fit([early, late]).subspace
    concatenated = tangent.fit(torch.cat([early, late])).subspace
    assert pooled.basis is not concatenated.basis
    assert largest_angle(pooled, concatenated) < 1e-5
    assert largest_angle(pooled, numpy_pca_basis(torch.cat([early, late]), K)) < 1e-4
    torch.testing.assert_close(pooled.mean, concatenated.mean, rtol=1e-6, atol=1e-5)


def test_fit_restarts_and_partial_fit_continues(splitter):
    first, second = synthetic(1000, seed=3), synthetic(1000, seed=4, offset=-3.0)
    tangent = PCATangent(splitter, nb_concepts=K).fit(first).partial_fit(second)
    assert largest_angle(tangent.subspace, numpy_pca_basis(torch.cat([first, second]), K)) < 1e-4
    tangent.fit(second)  # fit forgets what came before
    assert largest_angle(tangent.subspace, numpy_pca_basis(second, K)) < 1e-4


def test_numpy_activations_are_accepted_and_refitting_is_deterministic(splitter, pca, acts):
    tangent = PCATangent(splitter, nb_concepts=K)
    from_numpy = tangent.fit(acts.numpy()).subspace
    assert torch.equal(from_numpy.basis, pca.subspace.basis) and torch.equal(from_numpy.mean, pca.subspace.mean)
    pooled = tangent.fit([acts[:1000].numpy(), acts[1000:]]).subspace
    assert largest_angle(pooled, from_numpy) < 1e-5


# --------------------------------------------------------------------------- other methods, independently
def test_sklearn_pca_method_agrees_with_the_streamed_pca(splitter, pca, acts):
    ours = pca.subspace
    sklearn = TangentExplainer(splitter, nb_concepts=K, method="pca_sklearn").fit(acts).subspace
    assert sklearn.method == "pca_sklearn" and sklearn.rank == K
    assert largest_angle(ours, sklearn) < 1e-3


def test_svd_method_on_centred_activations_spans_the_principal_subspace(splitter, acts):
    Q = SVDTangent(splitter, nb_concepts=K).fit(acts).subspace
    assert largest_angle(Q, numpy_pca_basis(acts, K)) < 1e-2


def test_interpreto_class_as_method(splitter, acts):
    tangent = TangentExplainer(splitter, nb_concepts=K, method=PCAConcepts).fit(acts)
    assert tangent.method_name == "PCAConcepts"
    assert isinstance(tangent.inner_explainer, PCAConcepts)
    assert largest_angle(tangent.subspace, numpy_pca_basis(acts, K)) < 1e-3


class _DuplicatedAtoms(ConceptAutoEncoderExplainer):
    """A toy Interpreto explainer whose dictionary repeats atoms and has a dead one: rank 3 of 6 atoms."""

    def __init__(self, splitter, *, nb_concepts, device="cpu"):
        self.splitter = splitter
        self._dictionary = None
        self.nb_concepts = nb_concepts

    def fit(self, activations):
        atoms = torch.linalg.svd(activations.double(), full_matrices=False).Vh[:3].float()
        self._dictionary = torch.cat([atoms, 2 * atoms[:2], torch.zeros(1, atoms.shape[1])])

    def get_dictionary(self):
        return self._dictionary


def test_rank_revealing_orthonormalisation_of_a_degenerate_dictionary(splitter, acts):
    tangent = TangentExplainer(splitter, nb_concepts=K, method=_DuplicatedAtoms)
    with pytest.warns(DegenerateStatisticsWarning, match=r"\b3 dimensions"):
        tangent.fit(acts)
    Q = tangent.subspace
    assert Q.rank == 3 and Q.info["dropped_rank"] == 3 and Q.info["dictionary_size"] == K
    assert tangent.concept_model.nb_concepts == 3
    assert tangent.activations_to_concepts(acts[:4]).shape == (4, 3)
    assert largest_angle(Q, numpy_pca_basis(acts, 3)) < 1e-4


# --------------------------------------------------------------------------- the concept model's algebra
def test_concepts_reconstructions_and_dictionary_are_the_basis_formulas(pca, acts):
    tangent = pca
    Q = tangent.subspace
    x = acts[:50]
    z = tangent.activations_to_concepts(x)
    torch.testing.assert_close(z, (x - Q.mean) @ Q.basis)
    torch.testing.assert_close(tangent.concepts_to_activations(z), z @ Q.basis.T + Q.mean)
    torch.testing.assert_close(tangent.concepts_to_activations(z), Q.project(x), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(tangent.get_dictionary(), Q.basis.T)
    assert tangent.get_dictionary().shape == (K, D)


def test_concepts_are_differentiable(pca, acts):
    tangent = pca
    assert tangent.has_differentiable_concept_encoder and tangent.has_differentiable_concept_decoder
    x = acts[:3].clone().requires_grad_(True)
    tangent.activations_to_concepts(x).sum().backward()
    torch.testing.assert_close(x.grad, tangent.subspace.basis.sum(1).expand(3, D))


def test_subspace_metadata_and_controls(splitter, pca, acts):
    Q = pca.subspace
    assert (Q.name, Q.method, Q.split_point) == ("tangent", "pca", splitter.split_point)
    controls = normal_controls(Q, n=5, seed=0)
    for control in controls:
        assert (Q.basis.double().T @ control.basis.double()).abs().max() < 1e-6
    # The tangent holds far more activation variance than any control.
    centred = acts - Q.mean
    assert Q.energy_share(centred) > 0.9 > 0.1 > max(c.energy_share(centred) for c in controls)


@pytest.mark.parametrize(
    ("cls", "method", "concept_class"),
    [
        (PCATangent, "pca", None),
        (SklearnPCATangent, "pca_sklearn", PCAConcepts),
        (SemiNMFTangent, "semi_nmf", SemiNMFConcepts),
        (NMFTangent, "nmf", NMFConcepts),
        (ICATangent, "ica", ICAConcepts),
        (SVDTangent, "svd", SVDConcepts),
        (TopKSAETangent, "topk_sae", TopKSAEConcepts),
    ],
)
def test_subclasses_pick_their_method(splitter, cls, method, concept_class):
    tangent = cls(splitter, nb_concepts=4)
    assert tangent.method_name == method and tangent.concept_class is concept_class
    assert tangent.streams is (concept_class is None) and method_streams(method) is tangent.streams
    by_name = TangentExplainer(splitter, nb_concepts=4, method=method)
    assert (by_name.method_name, by_name.concept_class) == (method, concept_class)
    assert isinstance(tangent, TangentExplainer) and isinstance(tangent, ConceptAutoEncoderExplainer)
    assert tangent.input_size == D and not tangent.is_fitted
    assert "unfitted" in repr(tangent)
    # The docstring is the class's own summary, then TangentExplainer's sections, with this class in its examples.
    assert f'method="{method}"' in cls.__doc__ and f"ia.{cls.__name__}(" in cls.__doc__
    assert cls.__doc__.count("    Args:") == 1 and "        nb_concepts: Requested rank k." in cls.__doc__


def test_the_method_names_are_those_of_the_named_classes():
    """The names come from the class declarations, in order; the sweep's and the CLI's method option takes them."""
    assert tangent_method_names() == ["pca", "pca_sklearn", "semi_nmf", "nmf", "ica", "svd", "topk_sae"]
    ours = [cls for cls in TangentExplainer.__subclasses__() if cls.__module__ == TangentExplainer.__module__]
    assert [cls.default_method for cls in ours] == tangent_method_names()


def test_a_declared_subclass_becomes_a_method_name(splitter, acts):
    """One declaration names a method: `method="kmeans"` then works wherever a method name does."""

    class KMeansTangent(TangentExplainer, method="kmeans", concept_class=KMeansConcepts):
        """Tangent spanned by k-means centroids."""

    try:
        assert tangent_method_names()[-1] == "kmeans" and not method_streams("kmeans")
        assert "Tangent spanned by k-means centroids." in KMeansTangent.__doc__ and "Args:" in KMeansTangent.__doc__
        tangent = TangentExplainer(splitter, nb_concepts=4, method="kmeans", center=False)  # centred: rank k - 1
        tangent.fit(acts[:300], n_init=1)
        assert tangent.method_name == "kmeans" and isinstance(tangent.inner_explainer, KMeansConcepts)
        centroids = tangent.inner_explainer.get_dictionary().detach().double().numpy()
        assert largest_angle(tangent.subspace, np.linalg.qr(centroids.T)[0]) < 1e-5
    finally:
        _NAMED_TANGENTS.pop("kmeans")
    with pytest.raises(InvalidInputError, match="'kmeans'"):
        TangentExplainer(splitter, nb_concepts=4, method="kmeans")


def test_repr_of_a_fitted_tangent(pca):
    assert "rank=6" in repr(pca) and "'pca'" in repr(pca)


# --------------------------------------------------------------------------- bad input
def test_no_room_for_controls_is_refused(splitter):
    with pytest.raises(InvalidInputError, match="nb_concepts <= 31"):
        PCATangent(splitter, nb_concepts=33)
    with pytest.raises(InvalidInputError, match=r"nb_concepts=32.*R\^64.*nb_concepts <= 31"):
        PCATangent(splitter, nb_concepts=32)  # 2k = d: the only rank-k subspace of the complement is itself
    with pytest.raises(InvalidInputError):
        PCATangent(splitter, nb_concepts=64)
    PCATangent(splitter, nb_concepts=31)  # 2k = d - 2 < d: room for random controls


@pytest.mark.parametrize("nb_concepts", [0, -1, 2.5, "4"])
def test_bad_nb_concepts_is_refused(splitter, nb_concepts):
    with pytest.raises(InvalidInputError):
        PCATangent(splitter, nb_concepts=nb_concepts)


def test_unknown_method_is_refused(splitter):
    with pytest.raises(InvalidInputError, match="'kmeans'"):
        TangentExplainer(splitter, nb_concepts=4, method="kmeans")
    with pytest.raises(InvalidInputError):
        TangentExplainer(splitter, nb_concepts=4, method=dict)


def test_a_model_instead_of_a_splitter_is_refused(gpt_neox_model):
    with pytest.raises(InvalidInputError, match="ModelWithSplitPoints"):
        PCATangent(gpt_neox_model[0], nb_concepts=4)


@pytest.mark.parametrize("method", ["pca", "svd"])
@pytest.mark.parametrize(
    ("activations", "error"),
    [
        (torch.zeros(10, 4, D), InvalidInputError),  # 3-D, e.g. forgot the TOKEN granularity
        (torch.zeros(D), InvalidInputError),  # 1-D
        (torch.full((10, D), float("nan")), NonFiniteError),
        (torch.zeros(10, 32), InvalidInputError),  # another layer or model
        ([torch.zeros(10, D), torch.zeros(10, 32)], InvalidInputError),  # a list mixing two sizes
        (torch.zeros(0, D), InvalidInputError),
        ([], InvalidInputError),
        (42, InvalidInputError),
    ],
)
def test_bad_activations_raise_our_errors(throwaway, method, activations, error):
    tangent = throwaway[method]
    with pytest.raises(error) as info:
        tangent.fit(activations)
    assert isinstance(info.value, AnisotropyError)


def test_dimension_mismatch_message_names_the_split_point(throwaway):
    with pytest.raises(InvalidInputError, match=r"d=32.*layers\.1.*d=64"):
        throwaway["pca"].fit(torch.zeros(10, 32))


def test_subspace_before_fit_raises_not_fitted(splitter):
    for method in ("pca", "semi_nmf"):
        with pytest.raises(OutOfOrderError, match="fit"):
            _ = TangentExplainer(splitter, nb_concepts=4, method=method).subspace


def test_partial_fit_is_for_pca_only(throwaway, acts):
    with pytest.raises(InvalidInputError, match="partial_fit"):
        throwaway["svd"].partial_fit(acts)


def test_partial_fit_of_nothing_then_rows_works(splitter, acts):
    tangent = PCATangent(splitter, nb_concepts=K)
    with pytest.raises(InvalidInputError):
        tangent.partial_fit(torch.zeros(0, D))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tangent.partial_fit(acts)
    assert largest_angle(tangent.subspace, numpy_pca_basis(acts, K)) < 1e-4


def test_streaming_api_partial_fit_merge_finalize(splitter, acts):
    """partial_fit on shards + a merge of their moments = one fit on everything; finalize fixes the subspace."""
    whole = PCATangent(splitter, nb_concepts=K).fit(acts).subspace
    shards = [PCATangent(splitter, nb_concepts=K).partial_fit(part) for part in (acts[:700], acts[700:])]
    assert all(shard.streams for shard in shards)
    other = shards[1].concept_model.moments
    shards[0].concept_model.merge(lambda mine: mine.merge(other))  # what an all-reduce over two ranks does
    merged = shards[0].merge_across_ranks().finalize().subspace  # no process group: merge_across_ranks is a no-op
    assert merged.principal_angles(whole).max() < 1e-5
    with pytest.raises(OutOfOrderError):
        PCATangent(splitter, nb_concepts=K).finalize()
    assert not SVDTangent(splitter, nb_concepts=K).streams
    with pytest.raises(InvalidInputError, match="'svd'"):
        SVDTangent(splitter, nb_concepts=K).merge_across_ranks()


def test_reading_subspace_never_changes_it(splitter, acts):
    tangent = PCATangent(splitter, nb_concepts=K).fit(acts)
    first = tangent.subspace
    first.name, first.step = "renamed", 7
    first.info["mine"] = 1
    again = tangent.subspace
    assert again.name == "tangent" and again.step is None and "mine" not in again.info
    assert torch.equal(again.basis, first.basis)


@pytest.mark.parametrize("method", ["semi_nmf", "ica", "svd"])
def test_iterative_methods_follow_the_seed(splitter, acts, method):
    """Same seed, same tangent (whatever the global random state); another seed, another start."""
    options = {"semi_nmf": {"max_iter": 20}}.get(method, {})

    def fitted(seed: int) -> torch.Tensor:
        torch.manual_seed(1000 + seed * 7)  # the global state differs between the calls
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tangent = TangentExplainer(splitter, nb_concepts=K, method=method, seed=seed)
            return tangent.fit(acts[:800], **options).subspace.basis

    first, again = fitted(3), fitted(3)
    assert torch.equal(first, again)
    assert first.is_contiguous()
    with pytest.raises(InvalidInputError, match="seed"):
        TangentExplainer(splitter, nb_concepts=K, method=method, seed=-1)


@pytest.mark.parametrize("method", ["pca", "svd"])
def test_non_finite_activations_read_from_texts_say_what_to_try(gpt_neox_model, fit_texts, method):
    """Not "clean them": the rows came from the model. Weights, or float64 padded batches (Gemma2): batch_size=1."""
    tokenizer = copy.deepcopy(gpt_neox_model[1])
    model = build_model("gpt_neox", vocab_size=len(tokenizer), hidden_size=64, num_layers=2, tokenizer=tokenizer)
    with torch.no_grad():
        model.gpt_neox.layers[0].mlp.dense_h_to_4h.weight[0, 0] = float("nan")
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=8)
    tangent = TangentExplainer(mwsp, nb_concepts=4, method=method)
    with pytest.raises(NonFiniteError, match="texts.*weights") as raised:
        tangent.fit(fit_texts[:4])
    assert "weights" in str(raised.value) and "batch_size=1" in str(raised.value) and "float32" in str(raised.value)
    with pytest.raises(NonFiniteError, match="NaN.*clean"):  # activations given by the user: theirs to clean
        TangentExplainer(mwsp, nb_concepts=4, method=method).fit(torch.full((10, 64), float("nan")))
