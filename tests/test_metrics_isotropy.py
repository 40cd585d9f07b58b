# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of interpreto_anisotropy.metrics.isotropy: known answers, the reference package, invariances, edge cases."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import interpreto_anisotropy.metrics as metrics
from interpreto_anisotropy.commons.tensors import scaled_by_power_of_two
from interpreto_anisotropy.errors import InvalidInputError, NonFiniteError

FAST = settings(max_examples=25, deadline=None)


def anisotropic_cloud(seed: int, n: int, d: int, *, power: float = 2.0, shift: float = 0.0) -> np.ndarray:
    """Gaussian points with decaying variances in a random orientation, optionally off-centre."""
    rng = np.random.default_rng(seed)
    scales = rng.exponential(size=d) ** power + 1e-3
    rotation, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (rng.normal(size=(n, d)) * scales) @ rotation + shift * rng.normal(size=d)


def random_rotation(seed: int, d: int) -> np.ndarray:
    rotation, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return rotation


def brute_force_mean_cosine(X: np.ndarray) -> float:
    units = X / np.linalg.norm(X, axis=1, keepdims=True)
    similarities = units @ units.T
    n = len(X)
    return float((similarities.sum() - np.trace(similarities)) / (n * (n - 1)))


def isoscore_by_the_algorithm(cov: np.ndarray) -> float:
    """IsoScore step by step as in Rudman et al. (2022): eigenvalues, normalise, defect, rescale."""
    d = cov.shape[0]
    eigenvalues = np.linalg.eigvalsh(cov)
    normalised = eigenvalues * math.sqrt(d) / np.linalg.norm(eigenvalues)
    defect = np.linalg.norm(normalised - 1) / math.sqrt(2 * (d - math.sqrt(d)))
    fraction = (d - defect**2 * (d - math.sqrt(d))) ** 2 / d**2
    return (d * fraction - 1) / (d - 1)


clouds = st.builds(
    anisotropic_cloud,
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(3, 40),
    d=st.integers(2, 8),
    power=st.floats(0.0, 3.0),
    shift=st.floats(0.0, 5.0),
)


# ---------------------------------------------------------------------------------------------- known answers
def test_isotropic_gaussian_has_isoscore_near_one_and_small_mean_cosine():
    X = np.random.default_rng(0).normal(size=(5000, 10))
    assert metrics.isoscore(X) > 0.98
    assert abs(metrics.mean_cosine_similarity(X)) < 0.01


def test_points_on_a_line_have_isoscore_zero():
    t = np.linspace(-3, 7, 50)[:, None]
    X = t * np.array([1.0, -2.0, 0.5, 3.0]) + np.array([4.0, 1.0, 0.0, -1.0])
    assert metrics.isoscore(X) == pytest.approx(0.0, abs=1e-12)
    assert metrics.effective_rank(X - X.mean(axis=0)) == pytest.approx(1.0, abs=1e-9)


def test_identical_vectors_have_mean_cosine_one():
    assert metrics.mean_cosine_similarity(torch.tensor([[0.3, -1.0, 2.0]]).repeat(7, 1)) == pytest.approx(
        1.0, abs=1e-12
    )


def test_uniform_spectrum_has_full_effective_rank():
    d = 12
    assert metrics.effective_rank(3.0 * random_rotation(0, d)) == pytest.approx(d, rel=1e-12)
    assert metrics.effective_rank(np.eye(d)) == pytest.approx(d, rel=1e-12)


def test_effective_rank_matches_the_entropy_of_normalised_singular_values():
    X = anisotropic_cloud(3, 60, 9)
    singular_values = np.linalg.svd(X, compute_uv=False)
    p = singular_values / singular_values.sum()
    assert metrics.effective_rank(X) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-10)


@pytest.mark.parametrize(("seed", "n", "d", "rank"), [(4, 6, 30, 6), (5, 80, 12, 3), (6, 9, 40, 2)])
def test_effective_rank_of_wide_and_rank_deficient_clouds_matches_the_svd(seed, n, d, rank):
    """From the smaller Gram's eigenvalues (X X^T when n < d), exact zeros staying zeros, as numpy's SVD says."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d))
    singular_values = np.linalg.svd(X, compute_uv=False)
    p = singular_values[singular_values > 1e-10 * singular_values[0]]
    p = p / p.sum()
    assert metrics.effective_rank(X) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-10)


# ---------------------------------------------------------------------------------------------- reference package
@pytest.mark.parametrize(("n", "d"), [(500, 10), (2000, 64), (30, 100)])
def test_isoscore_agrees_with_the_pypi_package(n, d):
    reference = pytest.importorskip("IsoScore.IsoScore")
    X = anisotropic_cloud(n + d, n, d, shift=2.0)
    assert metrics.isoscore(X) == pytest.approx(float(reference.IsoScore(X)), abs=1e-6)
    assert float(metrics.isoscore_from_covariance(np.cov(X.T))) == pytest.approx(
        float(reference.IsoScore_cov(np.cov(X.T))), abs=1e-6
    )


@pytest.mark.parametrize("zeta", [0.0, 0.2, 0.75])
def test_isoscore_star_agrees_with_the_pypi_package(zeta):
    reference = pytest.importorskip("IsoScore.IsoScore")
    X = anisotropic_cloud(1, 40, 30)
    C0 = np.cov(anisotropic_cloud(2, 5000, 30).T)
    ours = metrics.isoscore_star(X, zeta=zeta, C0=C0)
    assert ours == pytest.approx(float(reference.IsoScore_star(X, C0, zeta)), abs=1e-6)
    # the package's own advice without a larger sample: shrink toward the identity
    scaled = X / np.sqrt(np.trace(np.cov(X.T)) / 30)  # mean variance 1, so our default C0 is the identity
    assert metrics.isoscore_star(scaled, zeta=zeta) == pytest.approx(
        float(reference.IsoScore_star(scaled, np.eye(30), zeta)), abs=1e-6
    )


def test_isoscore_from_covariance_equals_the_step_by_step_algorithm():
    cov = np.cov(anisotropic_cloud(5, 300, 16).T)
    assert float(metrics.isoscore_from_covariance(cov)) == pytest.approx(isoscore_by_the_algorithm(cov), abs=1e-12)


def test_mean_cosine_agrees_with_brute_force_pairs():
    X = anisotropic_cloud(7, 300, 20, shift=3.0)
    assert metrics.mean_cosine_similarity(X) == pytest.approx(brute_force_mean_cosine(X), abs=1e-12)
    centred = X - X.mean(axis=0)
    assert metrics.mean_cosine_similarity(X, center=True) == pytest.approx(brute_force_mean_cosine(centred), abs=1e-12)


@FAST
@given(clouds)
def test_mean_cosine_agrees_with_brute_force_on_any_cloud(X):
    assert metrics.mean_cosine_similarity(X) == pytest.approx(brute_force_mean_cosine(X), abs=1e-10)


@pytest.mark.parametrize(
    ("n", "d", "expected"),
    # sklearn.covariance.OAS().fit(X).shrinkage_ with scikit-learn 1.9.1 (pinned: importing sklearn takes seconds)
    [(25, 40, 0.1160938913359667), (400, 10, 0.009300567342269752)],
)
def test_oas_shrinkage_agrees_with_scikit_learn(n, d, expected):
    X = anisotropic_cloud(4, n, d)
    assert metrics.oas_shrinkage(np.cov(X.T), n=n) == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------------------------------------- IsoScore*
def test_isoscore_star_is_isoscore_without_shrinkage_and_one_with_full_shrinkage():
    X = anisotropic_cloud(8, 100, 12)
    assert metrics.isoscore_star(X, zeta=0.0) == pytest.approx(metrics.isoscore(X), abs=1e-12)
    assert metrics.isoscore_star(X, zeta=1.0) == pytest.approx(1.0, abs=1e-12)


def test_isoscore_star_is_stable_when_points_are_fewer_than_dimensions():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 100))  # isotropic, but 20 points span at most 19 directions
    assert metrics.isoscore(X) <= 18 / 99 + 1e-12
    assert metrics.isoscore_star(X) > metrics.isoscore(X)
    assert metrics.isoscore_star(X, zeta="oas") > 0.9


def test_isoscore_star_x_and_covariance_routes_agree():
    X = torch.from_numpy(anisotropic_cloud(9, 50, 20))
    from_covariance = metrics.isoscore_star_from_covariance(torch.cov(X.T), n=50, zeta=0.3)
    assert isinstance(from_covariance, torch.Tensor) and from_covariance.dtype == torch.float64
    assert float(from_covariance) == pytest.approx(metrics.isoscore_star(X, zeta=0.3), abs=1e-12)


def test_isoscore_star_of_a_removed_subspace_from_the_projected_covariance():
    # the gradient probe's use: IsoScore* inside the orthogonal complement of a rank-k subspace
    X = torch.from_numpy(anisotropic_cloud(10, 80, 24))
    complement = torch.from_numpy(random_rotation(11, 24)[:, 4:])  # (d, d - k) orthonormal
    projected_cov = complement.T @ torch.cov(X.T) @ complement
    assert float(metrics.isoscore_star_from_covariance(projected_cov, n=80)) == pytest.approx(
        metrics.isoscore_star(X @ complement), abs=1e-12
    )


def test_isoscore_star_is_differentiable():
    X = torch.from_numpy(anisotropic_cloud(12, 15, 30)).requires_grad_(True)
    score = metrics.isoscore_star(X, as_tensor=True)
    score.backward()
    assert X.grad is not None and torch.isfinite(X.grad).all() and X.grad.abs().sum() > 0
    small = torch.from_numpy(anisotropic_cloud(13, 6, 4)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda Y: metrics.isoscore_star(Y, zeta=0.4, as_tensor=True), (small,))


def test_isoscore_star_rejects_bad_options():
    X = anisotropic_cloud(14, 10, 5)
    for zeta in (-0.1, 1.5, "ledoit", True):
        with pytest.raises(InvalidInputError):
            metrics.isoscore_star(X, zeta=zeta)
    with pytest.raises(InvalidInputError):
        metrics.isoscore_star(X, C0=np.eye(4))
    with pytest.raises(NonFiniteError):
        metrics.isoscore_star(X, C0=np.full((5, 5), np.nan))
    with pytest.raises(InvalidInputError):
        metrics.isoscore_star_from_covariance(np.eye(5), n=1)
    with pytest.raises(InvalidInputError):
        metrics.isoscore_from_covariance(np.ones((3, 4)))


# ---------------------------------------------------------------------------------------------- partition, rogue, outliers
def partition_isotropy_by_definition(X: np.ndarray) -> float:
    _, eigenvectors = np.linalg.eigh(X.T @ X)
    directions = np.concatenate([eigenvectors, -eigenvectors], axis=1)
    partition = np.exp(X @ directions).sum(axis=0)
    return float(partition.min() / partition.max())


def test_partition_isotropy_matches_its_definition_and_centring_matters():
    X = 0.3 * anisotropic_cloud(15, 400, 6, power=0.5) + 2.0
    centred = X - X.mean(axis=0)
    assert metrics.partition_isotropy(X) == pytest.approx(partition_isotropy_by_definition(centred), rel=1e-9)
    assert metrics.partition_isotropy(X, center=False) == pytest.approx(partition_isotropy_by_definition(X), rel=1e-9)
    assert metrics.partition_isotropy(X, center=False) < 1e-3 < metrics.partition_isotropy(X)


def test_partition_isotropy_does_not_overflow_on_large_activations():
    X = 500.0 * anisotropic_cloud(16, 100, 8, shift=10.0)
    value = metrics.partition_isotropy(X, center=False)
    assert 0.0 <= value <= 1.0 and math.isfinite(value)


def test_rogue_dimensions_sum_to_the_mean_cosine_and_find_a_planted_dimension():
    rng = np.random.default_rng(17)
    X = rng.normal(size=(200, 16))
    X[:, 5] += 10.0
    rogue = metrics.rogue_dimensions(X, top=1)
    assert rogue.top_indices.tolist() == [5]
    assert rogue.contributions.sum() == pytest.approx(rogue.mean_cosine, abs=1e-12)
    assert rogue.mean_cosine == pytest.approx(metrics.mean_cosine_similarity(X), abs=1e-12)
    assert rogue.top_share > 0.95
    units = X / np.linalg.norm(X, axis=1, keepdims=True)
    brute_force = [
        (np.outer(units[:, i], units[:, i]).sum() - (units[:, i] ** 2).sum()) / (200 * 199) for i in range(16)
    ]
    np.testing.assert_allclose(rogue.contributions, brute_force, atol=1e-12)
    json.dumps(rogue.to_dict())


def test_outlier_dimensions_find_a_planted_magnitude_outlier():
    X = np.random.default_rng(18).normal(size=(100, 64))
    X[:, 7] *= 50.0
    outliers = metrics.outlier_dimensions(X)
    assert outliers.indices.tolist() == [7]
    assert outliers.magnitudes.shape == (64,)
    assert metrics.outlier_dimensions(np.ones((10, 5))).indices.tolist() == []
    json.dumps(outliers.to_dict())


def test_summary_reports_every_measure_as_a_plain_float():
    result = metrics.summary(torch.from_numpy(anisotropic_cloud(19, 200, 10, shift=2.0)).float())
    assert set(result) == {
        "n",
        "d",
        "mean_cosine",
        "mean_cosine_centered",
        "isoscore",
        "isoscore_star",
        "partition_isotropy",
        "partition_isotropy_uncentered",
        "effective_rank",
        "rogue_top_share",
        "n_outlier_dimensions",
    }
    assert all(type(value) is float and math.isfinite(value) for value in result.values())
    json.dumps(result)


@pytest.mark.parametrize(("n", "d"), [(300, 12), (7, 25)])
def test_summary_equals_each_measure_computed_alone_bit_for_bit(n, d):
    """`summary` shares one covariance, one X^T X and one projection per I(W): the values must not move."""
    X = torch.from_numpy(anisotropic_cloud(8, n, d, shift=3.0))
    result = metrics.summary(X, zeta=0.3, top=2)
    assert result == {
        "n": float(n),
        "d": float(d),
        "mean_cosine": metrics.mean_cosine_similarity(X),
        "mean_cosine_centered": metrics.mean_cosine_similarity(X, center=True),
        "isoscore": metrics.isoscore(X),
        "isoscore_star": metrics.isoscore_star(X, zeta=0.3),
        "partition_isotropy": metrics.partition_isotropy(X),
        "partition_isotropy_uncentered": metrics.partition_isotropy(X, center=False),
        "effective_rank": metrics.effective_rank(X),
        "rogue_top_share": metrics.rogue_dimensions(X, top=2).top_share,
        "n_outlier_dimensions": float(len(metrics.outlier_dimensions(X).indices)),
    }


# ---------------------------------------------------------------------------------------------- input handling
def test_numpy_and_torch_inputs_agree():
    X = anisotropic_cloud(20, 50, 8)
    for measure in (metrics.isoscore, metrics.isoscore_star, metrics.mean_cosine_similarity, metrics.effective_rank):
        assert measure(X) == pytest.approx(measure(torch.from_numpy(X)), abs=1e-12)
        assert measure(X) == pytest.approx(measure(torch.from_numpy(X).float()), abs=1e-5)


def test_degenerate_inputs_raise_our_errors():
    with pytest.raises(InvalidInputError):
        metrics.isoscore(np.zeros((0, 4)))
    with pytest.raises(InvalidInputError):
        metrics.isoscore(np.ones((1, 4)))  # one point
    with pytest.raises(InvalidInputError):
        metrics.mean_cosine_similarity(np.ones((1, 4)))
    with pytest.raises(InvalidInputError):
        metrics.isoscore(np.ones(4))  # not 2-D
    with pytest.raises(InvalidInputError, match=r"\bX\b.*dtype object"):
        metrics.isoscore(np.array([["a", "b"], ["c", "d"]], dtype=object))
    with pytest.raises(InvalidInputError):
        metrics.isoscore(np.tile([1.0, 2.0, 3.0], (5, 1)))  # no variance at all
    with pytest.raises(InvalidInputError):
        metrics.mean_cosine_similarity(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))  # a zero vector
    with pytest.raises(InvalidInputError):
        metrics.rogue_dimensions(np.array([[1.0, 0.0], [0.0, 0.0]]))
    nan_cloud = np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 2.0]])
    for measure in (
        metrics.isoscore,
        metrics.isoscore_star,
        metrics.mean_cosine_similarity,
        metrics.effective_rank,
        metrics.partition_isotropy,
        metrics.summary,
    ):
        with pytest.raises(NonFiniteError):
            measure(nan_cloud)
    with pytest.raises(NonFiniteError):
        metrics.isoscore_from_covariance(np.array([[1.0, np.inf], [np.inf, 1.0]]))


def test_documented_values_for_edge_cases():
    X = np.random.default_rng(21).normal(size=(30, 3))
    X[:, 1] = 4.0  # a constant column is a zero-variance direction, not an error
    assert metrics.isoscore(X) == pytest.approx(isoscore_by_the_algorithm(np.cov(X.T)), abs=1e-12)
    assert metrics.isoscore(np.arange(5.0)[:, None]) == 1.0  # d = 1
    assert metrics.effective_rank(np.zeros((4, 3))) == 0.0
    assert metrics.partition_isotropy(np.zeros((4, 3))) == 1.0


# ---------------------------------------------------------------------------------------------- invariances
@FAST
@given(clouds, st.integers(0, 2**32 - 1))
def test_isoscore_and_effective_rank_are_rotation_invariant(X, seed):
    rotated = X @ random_rotation(seed, X.shape[1])
    assert metrics.isoscore(rotated) == pytest.approx(metrics.isoscore(X), abs=1e-9)
    assert metrics.isoscore_star(rotated) == pytest.approx(metrics.isoscore_star(X), abs=1e-9)
    assert metrics.effective_rank(rotated) == pytest.approx(metrics.effective_rank(X), rel=1e-9)


@FAST
@given(clouds, st.floats(1e-3, 1e3))
def test_measures_are_scale_invariant(X, scale):
    scaled = scale * X
    assert metrics.isoscore(scaled) == pytest.approx(metrics.isoscore(X), abs=1e-9)
    assert metrics.isoscore_star(scaled) == pytest.approx(metrics.isoscore_star(X), abs=1e-9)
    assert metrics.isoscore_star(scaled, zeta="oas") == pytest.approx(metrics.isoscore_star(X, zeta="oas"), abs=1e-9)
    assert metrics.effective_rank(scaled) == pytest.approx(metrics.effective_rank(X), rel=1e-9)
    assert metrics.mean_cosine_similarity(scaled) == pytest.approx(metrics.mean_cosine_similarity(X), abs=1e-9)


@FAST
@given(st.integers(0, 2**32 - 1), st.floats(-320.0, 305.0))  # normal draws times 1e306 can overflow
def test_power_of_two_scaling_changes_no_mantissa(seed, exponent):
    x = torch.from_numpy(np.random.default_rng(seed).normal(size=(5, 3)) * 10.0**exponent)
    for dim in (None, 1):
        scaled = scaled_by_power_of_two(x, dim=dim)
        peak = scaled.abs().amax() if dim is None else scaled.abs().amax(dim=1)
        assert bool(((peak >= 0.5) & (peak < 2.0)).all()) or not bool(x.any())
        assert torch.equal(torch.frexp(scaled).mantissa, torch.frexp(x).mantissa)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_measures_of_huge_and_tiny_float64_points_are_exact(scale):
    """Squares of such values overflow or vanish in float64: the measures work on power-of-two-scaled copies."""
    cross = scale * np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # isotropic, opposite pairs
    assert metrics.isoscore(cross) == pytest.approx(1.0, rel=1e-14)
    assert metrics.isoscore_star(cross) == pytest.approx(1.0, rel=1e-14)
    assert metrics.isoscore_star(cross, zeta="oas") == pytest.approx(1.0, rel=1e-14)
    assert metrics.mean_cosine_similarity(cross) == pytest.approx(-1 / 3, rel=1e-14)
    assert metrics.effective_rank(cross) == pytest.approx(2.0, rel=1e-14)
    assert metrics.rogue_dimensions(cross, center=False).contributions == pytest.approx([-1 / 6, -1 / 6], rel=1e-14)
    line = scale * np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    assert metrics.isoscore(line) == pytest.approx(0.0, abs=1e-14)
    assert metrics.mean_cosine_similarity(line) == pytest.approx(1.0, rel=1e-14)
    planted = np.random.default_rng(18).normal(size=(100, 64))
    planted[:, 7] *= 50.0
    outliers = metrics.outlier_dimensions(scale * planted)
    assert outliers.indices.tolist() == [7]
    assert outliers.threshold == pytest.approx(scale * metrics.outlier_dimensions(planted).threshold, rel=1e-12)
    assert 0.0 <= metrics.partition_isotropy(scale * planted) <= 1.0  # scale-dependent, but no overflow


@FAST
@given(clouds, st.floats(-300.0, 300.0))
def test_measures_are_invariant_to_any_float64_scale(X, exponent):
    scaled = 10.0**exponent * X
    assert metrics.isoscore(scaled) == pytest.approx(metrics.isoscore(X), abs=1e-9)
    assert metrics.isoscore_star(scaled) == pytest.approx(metrics.isoscore_star(X), abs=1e-9)
    assert metrics.isoscore_star(scaled, zeta="oas") == pytest.approx(metrics.isoscore_star(X, zeta="oas"), abs=1e-9)
    assert metrics.mean_cosine_similarity(scaled) == pytest.approx(metrics.mean_cosine_similarity(X), abs=1e-9)
    assert metrics.mean_cosine_similarity(scaled, center=True) == pytest.approx(
        metrics.mean_cosine_similarity(X, center=True), abs=1e-9
    )
    assert metrics.rogue_dimensions(scaled).top_share == pytest.approx(metrics.rogue_dimensions(X).top_share, abs=1e-9)
    assert metrics.outlier_dimensions(scaled).indices.tolist() == metrics.outlier_dimensions(X).indices.tolist()


@FAST
@given(clouds, st.integers(0, 2**32 - 1))
def test_measures_are_invariant_to_the_order_of_rows(X, seed):
    shuffled = X[np.random.default_rng(seed).permutation(len(X))]
    for measure in (
        metrics.isoscore,
        metrics.isoscore_star,
        metrics.effective_rank,
        metrics.mean_cosine_similarity,
        metrics.partition_isotropy,
    ):
        assert measure(shuffled) == pytest.approx(measure(X), rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(
        metrics.rogue_dimensions(shuffled).contributions, metrics.rogue_dimensions(X).contributions, atol=1e-12
    )


@FAST
@given(clouds)
def test_scores_stay_in_their_ranges(X):
    assert -1e-12 <= metrics.isoscore(X) <= 1 + 1e-12
    assert -1e-12 <= metrics.isoscore_star(X) <= 1 + 1e-12
    assert -1 / (len(X) - 1) - 1e-12 <= metrics.mean_cosine_similarity(X) <= 1.0
    assert 1 - 1e-9 <= metrics.effective_rank(X) <= min(X.shape) + 1e-9
    assert 0.0 <= metrics.partition_isotropy(X) <= 1.0
