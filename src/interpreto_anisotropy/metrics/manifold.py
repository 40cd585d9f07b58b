# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Manifold analyses behind the paper's theory: on-manifold entropy, frequency vs. distance, curvature visibility."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy.spatial import cKDTree
from scipy.special import digamma

from ..commons.options import check_positive_int
from ..errors import InvalidInputError
from .isotropy import Points, _as_points, _JsonReady

__all__ = [
    "knn_entropy",
    "FrequencyDistanceCorrelation",
    "frequency_distance_correlation",
    "CurvatureVisibility",
    "curvature_visibility",
    "count_token_frequencies",
]

TokenIds = Int[torch.Tensor, " n"] | np.ndarray
Counts = Int[torch.Tensor, " vocab"] | np.ndarray | Mapping[int, int]

_KDTREE_MAX_DIM = 10  # above this a k-d tree is slower than brute force (measured on Gaussian clouds)
_BRUTE_FORCE_BLOCK_ENTRIES = 1 << 23  # distance entries per block (64 MiB of float64)


def _nearest_neighbours(
    points: Float[torch.Tensor, "m d"], k: int, anchors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices into `points` of the k nearest other points of each anchor, nearest first, (A, k) each."""
    if points.shape[1] <= _KDTREE_MAX_DIM:
        cloud = points.cpu().numpy()
        distances, indices = cKDTree(cloud).query(cloud[anchors], k=k + 1, workers=-1)
        is_self = indices == anchors[:, None]
        # With duplicates the anchor may come after its copies, or be pushed out of the k + 1: drop the last instead.
        is_self[~is_self.any(axis=1), -1] = True
        return distances[~is_self].reshape(len(anchors), k), indices[~is_self].reshape(len(anchors), k)
    anchor_index = torch.as_tensor(anchors, device=points.device)  # brute force, in blocks of anchors
    block = max(1, _BRUTE_FORCE_BLOCK_ENTRIES // points.shape[0])
    all_distances, all_indices = [], []
    for start in range(0, len(anchors), block):
        rows = anchor_index[start : start + block]
        distances = torch.cdist(points[rows], points)
        distances[torch.arange(len(rows), device=points.device), rows] = math.inf
        nearest = torch.topk(distances, k, dim=1, largest=False)
        all_distances.append(nearest.values.cpu())
        all_indices.append(nearest.indices.cpu())
    return torch.cat(all_distances).numpy(), torch.cat(all_indices).numpy()


def knn_entropy(Z: Points, *, k: int = 3) -> float:
    """Kozachenko-Leonenko k-nearest-neighbour estimate of differential entropy, in nats.

    Args:
        Z: Coordinates, shape (n, m), n > k.
        k: Neighbour order (3 to 10 are usual).

    Returns:
        The estimate in nats (it can be negative).

    Raises:
        InvalidInputError: k < 1, n <= k, or a point with k exact duplicates (deduplicate or add noise).

    Examples:
        >>> import math
        >>> Z = torch.randn(4000, 2, generator=torch.Generator().manual_seed(0))
        >>> abs(ia.metrics.knn_entropy(Z) - math.log(2 * math.pi * math.e)) < 0.05
        True
    """
    check_positive_int("k", k)
    points = _as_points(Z, name="Z", min_points=k + 1)
    n, m = points.shape
    distances, _ = _nearest_neighbours(points, k, np.arange(n))
    kth = distances[:, -1]
    if np.any(kth <= 0):
        raise InvalidInputError(
            f"{int(np.sum(kth <= 0))} point(s) of Z have {k} or more exact duplicates, which sends the "
            "Kozachenko-Leonenko estimate to -infinity; deduplicate Z (torch.unique(Z, dim=0)) or add tiny noise."
        )
    log_unit_ball = (m / 2) * math.log(math.pi) - math.lgamma(m / 2 + 1)
    return float(digamma(n) - digamma(k) + log_unit_ball + m * np.mean(np.log(kth)))


def _ids_and_counts(token_ids: Any, counts: Counts, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's token id (int64) and its token's corpus count (float64; 0 for a token absent from a dict)."""
    ids = token_ids.detach().cpu().numpy() if isinstance(token_ids, torch.Tensor) else np.asarray(token_ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise InvalidInputError(f"token_ids must be 1-D with one id per activation row ({n}), got shape {ids.shape}.")
    if not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0):
        raise InvalidInputError(f"token_ids must be non-negative integers, got dtype {ids.dtype}.")
    ids = index = ids.astype(np.int64)
    if isinstance(counts, Mapping):  # a table of the distinct ids, indexed by each row's place among them
        distinct, index = np.unique(ids, return_inverse=True)
        table = np.array([counts.get(int(token), 0) for token in distinct], dtype=np.float64)
    else:
        table = counts.detach().cpu().numpy() if isinstance(counts, torch.Tensor) else np.asarray(counts)
        if table.ndim != 1:
            raise InvalidInputError(f"counts must be a 1-D array of size vocab or a dict, got shape {table.shape}.")
    if not np.all(np.isfinite(table)) or np.any(table < 0):
        raise InvalidInputError("counts must be finite and non-negative.")
    if index.size and index.max() >= table.shape[0]:
        raise InvalidInputError(f"token id {int(index.max())} is outside counts ({table.shape[0]}): same tokenizer?")
    return ids, table[index].astype(np.float64)


@dataclass(frozen=True)
class FrequencyDistanceCorrelation(_JsonReady):
    """Correlation between token log-frequency and distance to the activation centroid.

    Attributes:
        pearson: Pearson r between log(count) and distance.
        pearson_p_value: Its two-sided p-value (`scipy.stats.pearsonr`).
        spearman: Spearman rho.
        spearman_p_value: Its two-sided p-value.
        n: Points correlated (rows, or distinct tokens if `by_token`).
        n_excluded: Rows dropped because their token has count 0.
        by_token: Whether distances were averaged per token id first.

    Examples:
        >>> ia.metrics.frequency_distance_correlation(torch.tensor([[0.0], [1.0], [3.0], [6.0]]), [0, 1, 2, 3], [8, 4, 2, 1]).n
        4
    """

    pearson: float
    pearson_p_value: float
    spearman: float
    spearman_p_value: float
    n: int
    n_excluded: int
    by_token: bool


def frequency_distance_correlation(
    activations: Points, token_ids: TokenIds, counts: Counts, *, by_token: bool = False
) -> FrequencyDistanceCorrelation:
    """Pearson and Spearman correlation of log(count of each row's token) with its distance to the rows' mean.

    Args:
        activations: Rows, shape (n, d).
        token_ids: Token id of each row, shape (n,).
        counts: Count of every token id: 1-D of size vocab, or a dict {id: count} (missing ids count 0).
        by_token: Correlate over distinct tokens (distances averaged per id) instead of over occurrences.

    Returns:
        A `FrequencyDistanceCorrelation`.

    Examples:
        >>> ids = torch.arange(200) % 20
        >>> counts = torch.arange(1, 21) ** 2
        >>> acts = torch.randn(200, 8, generator=torch.Generator().manual_seed(0)) / counts[ids, None]
        >>> ia.metrics.frequency_distance_correlation(acts, ids, counts).spearman < -0.5
        True
    """
    points = _as_points(activations, name="activations")
    ids, frequencies = _ids_and_counts(token_ids, counts, points.shape[0])
    distances = torch.linalg.vector_norm(points - points.mean(dim=0, keepdim=True), dim=1).cpu().numpy()
    kept = frequencies > 0
    ids, frequencies, distances = ids[kept], frequencies[kept], distances[kept]
    if by_token:
        ids, inverse = np.unique(ids, return_inverse=True)
        distances = np.bincount(inverse, weights=distances) / np.bincount(inverse)
        frequencies = np.bincount(inverse, weights=frequencies) / np.bincount(inverse)
    from scipy import stats  # deferred: scipy.stats takes a second to import

    log_frequencies = np.log(frequencies)
    _check_correlatable(log_frequencies, distances)
    tests = stats.pearsonr(log_frequencies, distances), stats.spearmanr(log_frequencies, distances)
    numbers = [float(number) for test in tests for number in (test.statistic, test.pvalue)]
    return FrequencyDistanceCorrelation(
        *numbers, n=int(len(distances)), n_excluded=int((~kept).sum()), by_token=by_token
    )


def _check_correlatable(log_frequencies: np.ndarray, distances: np.ndarray) -> None:
    if len(distances) < 3:
        raise InvalidInputError(f"{len(distances)} row(s) of non-zero token count: a correlation needs at least 3.")
    if np.ptp(log_frequencies) == 0:
        raise InvalidInputError("every token has the same frequency: the correlation is undefined.")
    if np.ptp(distances) == 0:
        raise InvalidInputError("every point is at the same distance from the centroid: the correlation is undefined.")


@dataclass(frozen=True)
class CurvatureVisibility(_JsonReady):
    """Normal-to-tangent variance ratio of local neighbourhoods, one array entry per frequency stratum, rarest first.

    Attributes:
        median_ratio: Median over anchors of normal / tangent variance (the curvature visibility).
        mean_ratio: Mean of the same ratios.
        median_radius: Median distance from an anchor to its `n_neighbors`-th neighbour.
        mean_log_frequency: Mean log(count) of the stratum's rows.
        min_count: Smallest token count in the stratum.
        max_count: Largest token count in the stratum.
        n_points: Rows in the stratum.
        n_anchors: Anchors averaged (at most `max_anchors`, minus any with zero tangent variance).
        n_neighbors: Neighbours per neighbourhood (the anchor is added to them).
        tangent_dim: Dimension of the local tangent plane.
        n_excluded: Rows dropped because their token has count 0.

    Examples:
        >>> line = torch.stack([torch.arange(50.0), torch.zeros(50)], dim=1)
        >>> ia.metrics.curvature_visibility(line, [0] * 50, [5], n_strata=1, n_neighbors=5, tangent_dim=1).n_points
        array([50])
    """

    median_ratio: np.ndarray
    mean_ratio: np.ndarray
    median_radius: np.ndarray
    mean_log_frequency: np.ndarray
    min_count: np.ndarray
    max_count: np.ndarray
    n_points: np.ndarray
    n_anchors: np.ndarray
    n_neighbors: int
    tangent_dim: int
    n_excluded: int


def curvature_visibility(
    activations: Points,
    token_ids: TokenIds,
    counts: Counts,
    *,
    n_strata: int = 5,
    n_neighbors: int = 20,
    tangent_dim: int = 5,
    max_anchors: int | None = 1000,
    seed: int = 0,
) -> CurvatureVisibility:
    """How visible the manifold's curvature is in k-NN neighbourhoods, per token-frequency stratum.

    Args:
        activations: Rows, shape (n, d).
        token_ids: Token id of each row, shape (n,).
        counts: Count of every token id (1-D of size vocab, or a dict); rows with count 0 are dropped.
        n_strata: Number of equal-size frequency strata.
        n_neighbors: Neighbours of each anchor (each stratum needs more rows).
        tangent_dim: Local tangent dimension, 1 <= tangent_dim < min(n_neighbors, d).
        max_anchors: Anchors drawn per stratum without replacement; None: every row.
        seed: Seed of the anchor draw.

    Returns:
        A `CurvatureVisibility`.

    Raises:
        InvalidInputError: Every row's token has count 0.

    Examples:
        >>> import math
        >>> # a frequent token seen 1000 times on a short arc, a rare one 1000 times around the whole circle
        >>> angles = torch.cat([0.2 * torch.rand(1000), 2 * math.pi * torch.rand(1000)])
        >>> circle = torch.stack([angles.cos(), angles.sin()], dim=1)
        >>> ids = torch.cat([torch.zeros(1000, dtype=torch.long), torch.ones(1000, dtype=torch.long)])
        >>> result = ia.metrics.curvature_visibility(
        ...     circle, ids, torch.tensor([1000, 10]), n_strata=2, n_neighbors=10, tangent_dim=1
        ... )
        >>> bool(result.median_ratio[1] < result.median_ratio[0])  # the frequent stratum looks flatter
        True
    """
    points = _as_points(activations, name="activations")
    _check_curvature_options(n_strata, n_neighbors, tangent_dim, max_anchors, points.shape[1])
    ids, frequencies = _ids_and_counts(token_ids, counts, points.shape[0])
    kept = np.flatnonzero(frequencies > 0)
    if kept.size == 0:
        raise InvalidInputError("every row's token has count 0: there is no frequency to stratify by.")
    order = kept[np.lexsort((ids[kept], frequencies[kept]))]
    strata = np.array_split(order, n_strata)
    rng = np.random.default_rng(seed)
    rows = [
        _stratum_row(number, points, members, frequencies[members], max_anchors, rng, n_neighbors, tangent_dim)
        for number, members in enumerate(strata)
    ]
    return CurvatureVisibility(
        **{name: np.array([row[name] for row in rows]) for name in rows[0]},  # float64, or int64 for the counts
        n_neighbors=n_neighbors,
        tangent_dim=tangent_dim,
        n_excluded=int(len(ids) - kept.size),
    )


def _stratum_row(
    number: int,
    points: torch.Tensor,
    members: np.ndarray,
    stratum_counts: np.ndarray,
    max_anchors: int | None,
    rng: np.random.Generator,
    n_neighbors: int,
    tangent_dim: int,
) -> dict[str, Any]:
    """One stratum's fields of `CurvatureVisibility`: normal / tangent variance of each anchor's neighbourhood."""
    if len(members) <= n_neighbors:
        raise InvalidInputError(
            f"frequency stratum {number} has {len(members)} rows but needs more than n_neighbors={n_neighbors}; "
            "pass fewer strata, fewer neighbours or more activations."
        )
    m = len(members)
    anchors = np.arange(m) if max_anchors is None or m <= max_anchors else np.sort(rng.choice(m, max_anchors, False))
    points = points[torch.as_tensor(members, device=points.device)]
    distances, neighbours = _nearest_neighbours(points, n_neighbors, anchors)
    neighbourhoods = torch.as_tensor(np.concatenate([anchors[:, None], neighbours], axis=1), device=points.device)
    ratios = []
    for block in torch.split(neighbourhoods, 256):
        gathered = points[block]
        centred = gathered - gathered.mean(dim=1, keepdim=True)
        # The (k+1, k+1) Gram matrix has the same non-zero eigenvalues as the (d, d) local covariance.
        eigenvalues = torch.linalg.eigvalsh(centred @ centred.transpose(1, 2)).flip(-1).clamp(min=0)
        tangent = eigenvalues[:, :tangent_dim].sum(dim=1)
        normal = eigenvalues[:, tangent_dim:].sum(dim=1)
        valid = tangent > 0  # anchors with no tangent variance are dropped
        ratios.append((normal[valid] / tangent[valid]).cpu())
    ratios = torch.cat(ratios).numpy()
    if ratios.size == 0:
        raise InvalidInputError(f"every neighbourhood of frequency stratum {number} is a single repeated point.")
    return {
        "median_ratio": np.median(ratios),
        "mean_ratio": ratios.mean(),
        "median_radius": np.median(distances[:, -1]),
        "mean_log_frequency": np.log(stratum_counts).mean(),
        "min_count": stratum_counts.min(),
        "max_count": stratum_counts.max(),
        "n_points": len(members),
        "n_anchors": ratios.size,
    }


def _check_curvature_options(
    n_strata: int, n_neighbors: int, tangent_dim: int, max_anchors: int | None, d: int
) -> None:
    """Refuse an option that is no integer in its range, naming it."""

    def check(name: str, value: Any, least: int, most: float = math.inf) -> None:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not least <= value <= most:
            bounds = f">= {least}" + (f" and <= {most}" if most < math.inf else "")
            raise InvalidInputError(f"{name} must be an integer {bounds}, got {value!r}.")

    check("n_strata", n_strata, 1)
    check("n_neighbors", n_neighbors, 2)
    check("tangent_dim", tangent_dim, 1, min(n_neighbors, d) - 1)  # the normal part needs at least one direction
    if max_anchors is not None:
        check("max_anchors", max_anchors, 1)


def count_token_frequencies(
    texts: str | Iterable[str],
    tokenizer: Any,
    *,
    vocab_size: int | None = None,
    add_special_tokens: bool = False,
    batch_size: int = 1000,
) -> Int[torch.Tensor, " vocab"]:
    """How often each token id occurs in `texts`, tokenized in batches by `tokenizer(batch, add_special_tokens=...)`.

    Args:
        texts: A text or an iterable of texts.
        tokenizer: A Hugging Face tokenizer, or a callable that answers `{"input_ids": ...}` the same way.
        vocab_size: Size of the result; by default `len(tokenizer)`, grown if an id exceeds it.
        add_special_tokens: Count special tokens too (off: their rows get count 0 and are dropped by the analyses).
        batch_size: Texts per tokenizer call.

    Returns:
        An int64 CPU tensor (vocab,), entry i the occurrences of token id i.

    Raises:
        InvalidInputError: No text, a text not a string, `batch_size` < 1, or an id beyond an explicit `vocab_size`.

    Examples:
        >>> class Words:  # a stand-in for a tokenizer: one id per vocabulary word
        ...     vocab = {"a": 0, "b": 1, "c": 2}
        ...     def __len__(self): return 3
        ...     def __call__(self, texts, add_special_tokens=False):
        ...         return {"input_ids": [[self.vocab[w] for w in t.split()] for t in texts]}
        >>> ia.metrics.count_token_frequencies(["a b a", "c a"], Words()).tolist()
        [3, 1, 1]
    """
    batch = [texts] if isinstance(texts, str) else list(texts)
    if not batch or not all(isinstance(text, str) for text in batch):
        raise InvalidInputError(f"texts must be a string or a non-empty list of strings, got {type(texts).__name__}.")
    check_positive_int("batch_size", batch_size)
    if not callable(tokenizer):
        raise InvalidInputError(f"tokenizer must be callable like a Hugging Face tokenizer, got {type(tokenizer)}.")
    size = vocab_size if vocab_size is not None else len(tokenizer) if hasattr(tokenizer, "__len__") else 0
    counts = torch.zeros(size, dtype=torch.int64)
    for start in range(0, len(batch), batch_size):
        texts = batch[start : start + batch_size]
        try:  # counting is no model input: no "sequence length is longer than the maximum" warning
            encoded = tokenizer(texts, add_special_tokens=add_special_tokens, verbose=False)
        except TypeError:  # a plain callable without Hugging Face's `verbose`
            encoded = tokenizer(texts, add_special_tokens=add_special_tokens)
        try:
            ids = torch.from_numpy(np.fromiter(chain.from_iterable(encoded["input_ids"]), dtype=np.int64))
        except (KeyError, TypeError, IndexError) as error:
            raise InvalidInputError("the tokenizer did not return 'input_ids' for a batch of texts.") from error
        if vocab_size is not None and ids.numel() and int(ids.max()) >= vocab_size:
            raise InvalidInputError(f"token id {int(ids.max())} does not fit vocab_size={vocab_size}.")
        found = torch.bincount(ids, minlength=counts.shape[0])  # longer when an id exceeds the size so far
        counts = torch.nn.functional.pad(counts, (0, found.shape[0] - counts.shape[0])) + found
    return counts
