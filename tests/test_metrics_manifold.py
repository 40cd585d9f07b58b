# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of interpreto_anisotropy.metrics.manifold: kNN entropy, frequency vs distance, curvature, token counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

import interpreto_anisotropy.metrics as metrics
from interpreto_anisotropy.errors import InvalidInputError, NonFiniteError
from interpreto_anisotropy.metrics import manifold


def gaussian_entropy(scales: np.ndarray) -> float:
    return 0.5 * len(scales) * math.log(2 * math.pi * math.e) + float(np.log(scales).sum())


# ---------------------------------------------------------------------------------------------- kNN entropy
@pytest.mark.parametrize(("d", "n"), [(1, 4000), (2, 4000), (3, 5000)])
def test_knn_entropy_matches_the_gaussian_closed_form(d, n):
    rng = np.random.default_rng(d)
    scales = np.linspace(0.5, 2.0, d)
    Z = rng.normal(size=(n, d)) * scales
    assert metrics.knn_entropy(Z) == pytest.approx(gaussian_entropy(scales), abs=0.06)


def test_knn_entropy_shifts_by_log_scale_and_ignores_translation():
    Z = torch.randn(500, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    base = metrics.knn_entropy(Z, k=5)
    assert metrics.knn_entropy(2.5 * Z + 7.0, k=5) == pytest.approx(base + 3 * math.log(2.5), abs=1e-9)


def test_knn_entropy_brute_force_and_kdtree_neighbours_agree(monkeypatch):
    points = torch.randn(300, 12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    anchors = np.arange(0, 300, 7)
    brute_distances, brute_indices = manifold._nearest_neighbours(points, 4, anchors)  # d = 12: brute force
    monkeypatch.setattr(manifold, "_KDTREE_MAX_DIM", 12)
    tree_distances, tree_indices = manifold._nearest_neighbours(points, 4, anchors)
    np.testing.assert_allclose(tree_distances, brute_distances, rtol=1e-10)
    np.testing.assert_array_equal(tree_indices, brute_indices)


def test_knn_entropy_rejects_duplicates_and_tiny_samples():
    with pytest.raises(InvalidInputError, match="duplicate"):
        metrics.knn_entropy(np.repeat(np.random.default_rng(2).normal(size=(10, 2)), 4, axis=0), k=3)
    with pytest.raises(InvalidInputError):
        metrics.knn_entropy(np.random.default_rng(3).normal(size=(3, 2)), k=3)
    with pytest.raises(InvalidInputError):
        metrics.knn_entropy(np.random.default_rng(3).normal(size=(30, 2)), k=0)
    with pytest.raises(NonFiniteError):
        metrics.knn_entropy(np.array([[0.0, np.nan]] * 10))


# ---------------------------------------------------------------------------------------------- frequency / distance
def frequent_tokens_near_the_centre(seed: int = 0, n: int = 2000, vocab: int = 50):
    """Zipf-like counts; each row sits at a distance from the origin that shrinks with its token's frequency."""
    rng = np.random.default_rng(seed)
    counts = (1000 / np.arange(1, vocab + 1)).astype(np.int64)
    ids = rng.choice(vocab, size=n, p=counts / counts.sum())
    directions = rng.normal(size=(n, 16))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radius = 10.0 - np.log(counts[ids]) + 0.3 * rng.normal(size=n)
    return directions * radius[:, None], ids, counts


def test_frequency_distance_correlation_is_strongly_negative_when_frequent_tokens_sit_centrally():
    activations, ids, counts = frequent_tokens_near_the_centre()
    result = metrics.frequency_distance_correlation(activations, ids, counts)
    assert result.pearson < -0.9 and result.spearman < -0.9
    assert result.pearson_p_value < 1e-10 and result.spearman_p_value < 1e-10
    assert result.n == 2000 and result.n_excluded == 0
    distances = np.linalg.norm(activations - activations.mean(axis=0), axis=1)
    assert result.pearson == pytest.approx(stats.pearsonr(np.log(counts[ids]), distances).statistic, abs=1e-12)
    json.dumps(result.to_dict())


def test_frequency_distance_correlation_is_near_zero_without_a_relation():
    rng = np.random.default_rng(4)
    counts = np.arange(1, 41)
    result = metrics.frequency_distance_correlation(rng.normal(size=(3000, 8)), rng.integers(0, 40, 3000), counts)
    assert abs(result.pearson) < 0.1 and abs(result.spearman) < 0.1
    assert result.pearson_p_value > 1e-3


def test_frequency_distance_correlation_by_token_dict_counts_and_zero_counts():
    activations, ids, counts = frequent_tokens_near_the_centre(seed=5)
    as_tensor = metrics.frequency_distance_correlation(torch.from_numpy(activations), torch.from_numpy(ids), counts)
    as_dict = metrics.frequency_distance_correlation(activations, ids, {i: int(c) for i, c in enumerate(counts)})
    assert as_tensor == as_dict
    by_token = metrics.frequency_distance_correlation(activations, ids, counts, by_token=True)
    assert by_token.n == len(np.unique(ids)) and by_token.by_token and by_token.spearman < -0.9
    zeroed = counts.copy()
    zeroed[0] = 0
    dropped = metrics.frequency_distance_correlation(activations, ids, zeroed)
    assert dropped.n_excluded == int((ids == 0).sum()) and dropped.n == len(ids) - dropped.n_excluded


def test_frequency_distance_correlation_errors():
    activations, ids, counts = frequent_tokens_near_the_centre(seed=6, n=200)
    with pytest.raises(InvalidInputError):
        metrics.frequency_distance_correlation(activations, ids[:-1], counts)
    with pytest.raises(InvalidInputError, match="counts.*tokenizer"):
        metrics.frequency_distance_correlation(activations, ids, counts[:5])
    with pytest.raises(InvalidInputError, match="frequency"):
        metrics.frequency_distance_correlation(activations, ids, np.ones_like(counts))
    with pytest.raises(InvalidInputError):
        metrics.frequency_distance_correlation(activations, ids.astype(float), counts)
    with pytest.raises(InvalidInputError, match="at least 3"):
        metrics.frequency_distance_correlation(activations, ids, np.zeros_like(counts))
    with pytest.raises(InvalidInputError):
        metrics.frequency_distance_correlation(np.zeros((0, 4)), np.zeros(0, dtype=int), counts)
    broken = activations.copy()
    broken[3, 1] = np.inf
    with pytest.raises(NonFiniteError):
        metrics.frequency_distance_correlation(broken, ids, counts)


# ---------------------------------------------------------------------------------------------- curvature visibility
def embed(points: np.ndarray, d: int, seed: int) -> np.ndarray:
    """Place low-dimensional points in R^d with a random isometry."""
    basis, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, points.shape[1])))
    return points @ basis.T


def test_curvature_is_less_visible_on_a_short_densely_sampled_arc_of_a_circle():
    rng = np.random.default_rng(7)
    angles = np.concatenate([0.2 * rng.random(1000), 2 * math.pi * rng.random(1000)])
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    ids = np.repeat([0, 1], 1000)  # token 0 is frequent, seen in a small neighbourhood
    result = metrics.curvature_visibility(circle, ids, np.array([1000, 10]), n_strata=2, n_neighbors=10, tangent_dim=1)
    assert result.median_ratio[1] < 0.1 * result.median_ratio[0]
    assert result.median_radius[1] < result.median_radius[0]
    assert result.max_count.tolist() == [10.0, 1000.0] and result.n_points.tolist() == [1000, 1000]
    # a straight line has no curvature at any scale
    line = np.stack([angles, 2 * angles], axis=1)
    flat = metrics.curvature_visibility(line, ids, np.array([1000, 10]), n_strata=2, n_neighbors=10, tangent_dim=1)
    assert np.all(flat.median_ratio < 1e-12)  # rounding only


def test_curvature_visibility_orders_three_strata_on_a_parabola_in_high_dimension():
    rng = np.random.default_rng(8)
    half_widths = [2.0, 0.5, 0.1]  # rare token spread widely, frequent token packed near the vertex
    xs = [rng.uniform(-a, a, size=600) for a in half_widths]
    points = embed(np.concatenate([np.stack([x, x**2], axis=1) for x in xs]), 32, seed=9)  # brute-force neighbours
    ids = np.repeat([0, 1, 2], 600)
    result = metrics.curvature_visibility(
        torch.from_numpy(points), ids, np.array([1, 10, 100]), n_strata=3, n_neighbors=15, tangent_dim=1
    )
    assert result.median_ratio[0] > result.median_ratio[1] > result.median_ratio[2]
    assert result.median_radius[0] > result.median_radius[1] > result.median_radius[2]
    json.dumps(result.to_dict())


def test_curvature_visibility_on_a_sphere_with_a_two_dimensional_tangent_plane():
    rng = np.random.default_rng(10)
    polar = np.concatenate([0.15 * rng.random(800), math.pi * rng.random(800)])  # a cap vs the whole sphere
    azimuth = 2 * math.pi * rng.random(1600)
    sphere = np.stack([np.sin(polar) * np.cos(azimuth), np.sin(polar) * np.sin(azimuth), np.cos(polar)], axis=1)
    ids = np.repeat([0, 1], 800)
    result = metrics.curvature_visibility(sphere, ids, {0: 500, 1: 5}, n_strata=2, n_neighbors=12, tangent_dim=2)
    assert result.median_ratio[1] < result.median_ratio[0]


def test_curvature_visibility_subsamples_anchors_reproducibly():
    rng = np.random.default_rng(11)
    points, ids = rng.normal(size=(400, 5)), rng.integers(0, 20, 400)
    counts = np.arange(1, 21)
    first = metrics.curvature_visibility(points, ids, counts, n_strata=2, tangent_dim=2, max_anchors=50, seed=3)
    again = metrics.curvature_visibility(points, ids, counts, n_strata=2, tangent_dim=2, max_anchors=50, seed=3)
    assert first.n_anchors.tolist() == [50, 50]
    np.testing.assert_array_equal(first.median_ratio, again.median_ratio)


def test_curvature_visibility_errors():
    rng = np.random.default_rng(12)
    points, ids, counts = rng.normal(size=(100, 6)), rng.integers(0, 10, 100), np.arange(1, 11)
    with pytest.raises(InvalidInputError, match="tangent_dim"):
        metrics.curvature_visibility(points, ids, counts, tangent_dim=6)
    with pytest.raises(InvalidInputError, match="tangent_dim"):
        metrics.curvature_visibility(points, ids, counts, n_neighbors=4, tangent_dim=4)
    with pytest.raises(InvalidInputError, match="stratum"):
        metrics.curvature_visibility(points, ids, counts, n_strata=10, n_neighbors=20, tangent_dim=2)
    with pytest.raises(InvalidInputError):
        metrics.curvature_visibility(points, ids, counts, n_strata=0)
    with pytest.raises(InvalidInputError):
        metrics.curvature_visibility(points, ids, np.zeros(10, dtype=int))
    with pytest.raises(InvalidInputError, match="stratum 0.*repeated"):
        metrics.curvature_visibility(np.ones((100, 6)), ids, counts, n_strata=1, tangent_dim=2)


# ---------------------------------------------------------------------------------------------- token counting
@pytest.fixture(scope="module")
def word_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {"[UNK]": 0, "<s>": 1, "the": 2, "cat": 3, "sat": 4, "mat": 5}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.post_processor = tokenizers.processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", bos_token="<s>")


def test_count_token_frequencies_with_a_hugging_face_tokenizer(word_tokenizer):
    texts = ["the cat sat", "the mat", "the dog"]
    counts = metrics.count_token_frequencies(texts, word_tokenizer, batch_size=2)
    assert counts.dtype == torch.int64 and counts.shape == (len(word_tokenizer),)
    assert counts.tolist() == [1, 0, 3, 1, 1, 1]
    with_specials = metrics.count_token_frequencies(texts, word_tokenizer, add_special_tokens=True)
    assert with_specials[1] == 3
    assert metrics.count_token_frequencies("the the", word_tokenizer).tolist() == [0, 0, 2, 0, 0, 0]
    assert metrics.count_token_frequencies(texts, word_tokenizer, vocab_size=10).shape == (10,)


def test_count_token_frequencies_errors(word_tokenizer):
    with pytest.raises(InvalidInputError):
        metrics.count_token_frequencies([], word_tokenizer)
    with pytest.raises(InvalidInputError):
        metrics.count_token_frequencies([1, 2], word_tokenizer)
    with pytest.raises(InvalidInputError):
        metrics.count_token_frequencies(["the"], object())
    with pytest.raises(InvalidInputError, match="vocab_size"):
        metrics.count_token_frequencies(["the mat"], word_tokenizer, vocab_size=3)
    with pytest.raises(InvalidInputError):
        metrics.count_token_frequencies(["the"], lambda texts, add_special_tokens: {"ids": []})
