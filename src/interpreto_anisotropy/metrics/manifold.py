# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Manifold analyses behind the paper's theory: on-manifold entropy, frequency vs. distance, curvature visibility.

- `knn_entropy`: Kozachenko-Leonenko differential entropy of coordinates (e.g. tangent coordinates).
- `frequency_distance_correlation`: how token log-frequency relates to the distance from the activation centroid.
- `curvature_visibility`: per frequency stratum, how much of a k-nearest-neighbour neighbourhood's variance lies
  off its local tangent plane. The paper's first claim: frequent tokens are sampled in small neighbourhoods, where
  the normal (curvature) offset is O(t^2) next to a tangent spread O(t), so they look flatter.
- `count_token_frequencies`: token counts over a corpus with the model's tokenizer, the `counts` these take.

Activations are (n, d) tensors or arrays, one row per token occurrence, with `token_ids` (n,) saying which token
each row is, and `counts` the corpus frequency of every token id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import chain
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy.spatial import cKDTree
from scipy.special import digamma

from ..errors import EmptyInputError, InvalidInputError, TokenizerError
from .isotropy import _as_points

__all__ = [
    "knn_entropy",
    "FrequencyDistanceCorrelation",
    "frequency_distance_correlation",
    "CurvatureVisibility",
    "curvature_visibility",
    "count_token_frequencies",
]

Points = Float[torch.Tensor, "n d"] | np.ndarray
TokenIds = Int[torch.Tensor, " n"] | np.ndarray
Counts = Int[torch.Tensor, " vocab"] | np.ndarray | Mapping[int, int]

_KDTREE_MAX_DIM = 10  # above this a k-d tree is slower than brute force (measured on Gaussian clouds)
_BRUTE_FORCE_BLOCK_ENTRIES = 1 << 23  # distance entries per block (64 MiB of float64)


# ---------------------------------------------------------------------------------------------- neighbours
def _nearest_neighbours(
    points: Float[torch.Tensor, "m d"], k: int, anchors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices of the k nearest other points of each anchor, nearest first.

    Returns:
        Two (len(anchors), k) arrays: Euclidean distances and row indices into `points`.
    """
    if points.shape[1] <= _KDTREE_MAX_DIM:
        return _neighbours_by_kdtree(points.cpu().numpy(), k, anchors)
    return _neighbours_by_brute_force(points, k, anchors)


def _neighbours_by_kdtree(points: np.ndarray, k: int, anchors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    distances, indices = cKDTree(points).query(points[anchors], k=k + 1, workers=-1)
    is_self = indices == anchors[:, None]
    # With duplicates the anchor may come after its copies, or be pushed out of the k + 1: drop the last instead.
    is_self[~is_self.any(axis=1), -1] = True
    keep = ~is_self
    return distances[keep].reshape(len(anchors), k), indices[keep].reshape(len(anchors), k)


def _neighbours_by_brute_force(
    points: Float[torch.Tensor, "m d"], k: int, anchors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    anchor_index = torch.as_tensor(anchors, device=points.device)
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


# ---------------------------------------------------------------------------------------------- entropy
def knn_entropy(Z: Points, *, k: int = 3) -> float:
    """Kozachenko-Leonenko k-nearest-neighbour estimate of differential entropy, in nats.

    H = psi(n) - psi(k) + log V_m + (m / n) sum_i log eps_i, with eps_i the Euclidean distance from point i to its
    k-th nearest neighbour, m the number of columns and V_m the volume of the unit m-ball (Kraskov et al., 2004,
    eq. 20). Consistent for any density; meant for low-dimensional coordinates, such as the tangent coordinates
    of a subspace (`Subspace.coords`), which give the "on-manifold entropy" of the activations.

    Args:
        Z: Coordinates, shape (n, m), n > k.
        k: Neighbour order; 3 to 10 are usual (larger: less variance, more bias).

    Returns:
        The entropy estimate in nats (it can be negative, as any differential entropy).

    Raises:
        InvalidInputError: If k < 1, n <= k, or some point has k exact duplicates (eps = 0 makes the estimate
            -infinity: deduplicate, e.g. `torch.unique(Z, dim=0)`, or add a little noise).
        EmptyInputError: If `Z` is empty.
        NonFiniteError: If `Z` holds NaN or infinity.

    Examples:
        >>> import math, torch
        >>> from interpreto_anisotropy import metrics
        >>> Z = torch.randn(4000, 2, generator=torch.Generator().manual_seed(0))
        >>> abs(metrics.knn_entropy(Z) - math.log(2 * math.pi * math.e)) < 0.05
        True
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}.")
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


# ---------------------------------------------------------------------------------------------- token frequencies
def _as_token_ids(token_ids: Any, n: int) -> np.ndarray:
    ids = token_ids.detach().cpu().numpy() if isinstance(token_ids, torch.Tensor) else np.asarray(token_ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise InvalidInputError(f"token_ids must be 1-D with one id per activation row ({n}), got shape {ids.shape}.")
    if not np.issubdtype(ids.dtype, np.integer):
        raise InvalidInputError(f"token_ids must be integers, got dtype {ids.dtype}.")
    if np.any(ids < 0):
        raise InvalidInputError("token_ids must be non-negative.")
    return ids.astype(np.int64)


def _counts_of(token_ids: np.ndarray, counts: Counts) -> np.ndarray:
    """The corpus count of each row's token, as float64 (0 for a token absent from a dict)."""
    if isinstance(counts, Mapping):
        distinct, inverse = np.unique(token_ids, return_inverse=True)
        table = np.array([counts.get(int(token), 0) for token in distinct], dtype=np.float64)
        if np.any(table < 0) or not np.all(np.isfinite(table)):
            raise InvalidInputError("counts must be finite and non-negative.")
        return table[inverse]
    table = counts.detach().cpu().numpy() if isinstance(counts, torch.Tensor) else np.asarray(counts)
    if table.ndim != 1:
        raise InvalidInputError(f"counts must be a 1-D array of size vocab or a dict, got shape {table.shape}.")
    if not np.all(np.isfinite(table)) or np.any(table < 0):
        raise InvalidInputError("counts must be finite and non-negative.")
    if token_ids.size and token_ids.max() >= table.shape[0]:
        raise InvalidInputError(
            f"token id {int(token_ids.max())} is outside counts (size {table.shape[0]}): were the counts made "
            "with the same tokenizer?"
        )
    return table[token_ids].astype(np.float64)


def _centroid_distances(points: Float[torch.Tensor, "n d"]) -> np.ndarray:
    centroid = points.mean(dim=0, keepdim=True)
    return torch.linalg.vector_norm(points - centroid, dim=1).cpu().numpy()


@dataclass(frozen=True)
class FrequencyDistanceCorrelation:
    """Correlation between token log-frequency and distance to the activation centroid.

    Attributes:
        pearson: Pearson r between log(count) and distance.
        pearson_p_value: Two-sided p-value of `pearson` (scipy.stats.pearsonr).
        spearman: Spearman rho (rank correlation; the log does not matter for it).
        spearman_p_value: Two-sided p-value of `spearman`.
        n: Number of points correlated (rows, or distinct tokens if `by_token`).
        n_excluded: Rows dropped because their token has count 0.
        by_token: Whether distances were averaged per token id first.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> ids = torch.arange(200) % 20
        >>> counts = torch.arange(1, 21) ** 2
        >>> acts = torch.randn(200, 8, generator=torch.Generator().manual_seed(0)) / counts[ids, None]
        >>> result = metrics.frequency_distance_correlation(acts, ids, counts)
        >>> result.n, result.spearman < -0.5  # frequent tokens sit close to the centroid
        (200, True)
    """

    pearson: float
    pearson_p_value: float
    spearman: float
    spearman_p_value: float
    n: int
    n_excluded: int
    by_token: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def frequency_distance_correlation(
    activations: Points,
    token_ids: TokenIds,
    counts: Counts,
    *,
    by_token: bool = False,
) -> FrequencyDistanceCorrelation:
    """Pearson and Spearman correlation between token log-frequency and distance to the activation centroid.

    The centroid is the mean of all rows of `activations`. Each row is paired with log(count of its token). Rows
    whose token has count 0 (e.g. special tokens when counting without them) have no log-frequency and are
    dropped, and counted in `n_excluded`. The paper reports this correlation as strongly negative in decoders:
    frequent tokens sit near the centroid.

    Args:
        activations: One row per token occurrence, shape (n, d).
        token_ids: The token id of each row, shape (n,).
        counts: Corpus count of every token id: a 1-D array or tensor of size vocab (as returned by
            `count_token_frequencies`) or a dict {token id: count} (missing ids count 0).
        by_token: Average the distances of each token id's rows first, and correlate over distinct tokens (one
            point per token type) instead of over occurrences (the default, where frequent tokens weigh more).

    Returns:
        A `FrequencyDistanceCorrelation` of plain floats.

    Raises:
        InvalidInputError: If shapes disagree, ids are out of `counts`' range, fewer than 3 points remain, or the
            log-frequencies or the distances are all equal (correlation undefined).
        EmptyInputError: If `activations` is empty.
        NonFiniteError: If `activations` hold NaN or infinity.

    Examples:
        >>> import torch
        >>> from interpreto_anisotropy import metrics
        >>> ids = torch.arange(200) % 20
        >>> counts = torch.arange(1, 21) ** 2
        >>> acts = torch.randn(200, 8, generator=torch.Generator().manual_seed(0)) / counts[ids, None]
        >>> metrics.frequency_distance_correlation(acts, ids, counts).spearman < -0.5
        True
    """
    points = _as_points(activations, name="activations")
    ids = _as_token_ids(token_ids, points.shape[0])
    frequencies = _counts_of(ids, counts)
    distances = _centroid_distances(points)
    kept = frequencies > 0
    ids, frequencies, distances = ids[kept], frequencies[kept], distances[kept]
    if by_token:
        ids, inverse = np.unique(ids, return_inverse=True)
        distances = np.bincount(inverse, weights=distances) / np.bincount(inverse)
        frequencies = np.bincount(inverse, weights=frequencies) / np.bincount(inverse)
    from scipy import stats  # deferred: scipy.stats takes a second to import

    log_frequencies = np.log(frequencies)
    _check_correlatable(log_frequencies, distances)
    pearson = stats.pearsonr(log_frequencies, distances)
    spearman = stats.spearmanr(log_frequencies, distances)
    return FrequencyDistanceCorrelation(
        pearson=float(pearson.statistic),
        pearson_p_value=float(pearson.pvalue),
        spearman=float(spearman.statistic),
        spearman_p_value=float(spearman.pvalue),
        n=int(len(distances)),
        n_excluded=int((~kept).sum()),
        by_token=by_token,
    )


def _check_correlatable(log_frequencies: np.ndarray, distances: np.ndarray) -> None:
    if len(distances) < 3:
        raise InvalidInputError(
            f"only {len(distances)} point(s) with a non-zero token count remain; a correlation needs at least 3."
        )
    if np.ptp(log_frequencies) == 0:
        raise InvalidInputError("every token has the same frequency: the correlation is undefined.")
    if np.ptp(distances) == 0:
        raise InvalidInputError("every point is at the same distance from the centroid: the correlation is undefined.")


# ---------------------------------------------------------------------------------------------- curvature
@dataclass(frozen=True)
class CurvatureVisibility:
    """Normal-to-tangent variance ratio of local neighbourhoods, per token-frequency stratum.

    Stratum 0 holds the rarest tokens, the last stratum the most frequent. Every array has one entry a stratum.

    Attributes:
        median_ratio: Median over anchors of normal variance / tangent variance (the curvature visibility).
        mean_ratio: Mean of the same ratios.
        median_radius: Median distance from an anchor to its `n_neighbors`-th neighbour (the neighbourhood size).
        mean_log_frequency: Mean log(count) of the stratum's rows.
        min_count: Smallest token count in the stratum.
        max_count: Largest token count in the stratum.
        n_points: Rows in the stratum.
        n_anchors: Anchors whose ratio was averaged (at most `max_anchors`, minus any with zero tangent variance).
        n_neighbors: Neighbours per neighbourhood (the anchor is added to them).
        tangent_dim: Dimension of the local tangent plane.
        n_excluded: Rows dropped because their token has count 0.

    Examples:
        >>> import math, torch
        >>> from interpreto_anisotropy import metrics
        >>> angles = torch.cat([0.2 * torch.rand(1000), 2 * math.pi * torch.rand(1000)])
        >>> circle = torch.stack([angles.cos(), angles.sin()], dim=1)
        >>> ids = torch.cat([torch.zeros(1000, dtype=torch.long), torch.ones(1000, dtype=torch.long)])
        >>> result = metrics.curvature_visibility(circle, ids, torch.tensor([1000, 10]), n_strata=2, tangent_dim=1)
        >>> result.n_points.tolist()  # stratum 0: the rare token; stratum 1: the frequent one
        [1000, 1000]
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (arrays become lists)."""
        return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in asdict(self).items()}


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
    """How visible the manifold's curvature is in local neighbourhoods, per token-frequency stratum.

    Rows are sorted by the count of their token (ties by token id, so a token's rows stay together) and cut into
    `n_strata` strata of equal size. Inside each stratum, for each anchor point, its `n_neighbors` nearest
    neighbours *within the stratum* form a neighbourhood; a local PCA of the centred neighbourhood (anchor
    included) splits its variance into the top `tangent_dim` eigenvalues (tangent) and the rest (normal, the
    residual). The stratum's curvature visibility is the median of normal / tangent over its anchors.

    On a curved manifold sampled with density rho, a k-NN neighbourhood has radius t ~ (k / rho)^(1 / m); its
    normal offset is O(t^2) and its tangent spread O(t), so the ratio shrinks as O(t^2): densely sampled (frequent)
    strata look flat. `median_radius` reports t. The ratio, strata and anchors are our operationalisation of the
    paper's claim (reconstructed, see PAPER_NOTES.md); `n_neighbors=20` and `tangent_dim=5` are our defaults.

    Args:
        activations: One row per token occurrence, shape (n, d).
        token_ids: The token id of each row, shape (n,).
        counts: Corpus count of every token id (1-D of size vocab, or a dict); rows with count 0 are dropped.
        n_strata: Number of equal-size frequency strata.
        n_neighbors: Neighbours of each anchor (each stratum needs more rows than this).
        tangent_dim: Local tangent dimension, 1 <= tangent_dim < min(n_neighbors, d).
        max_anchors: Anchors drawn at random (without replacement) per stratum, all rows if None.
        seed: Seed of the anchor draw.

    Returns:
        A `CurvatureVisibility` with one entry a stratum, rarest first.

    Raises:
        InvalidInputError: If the options are out of range, shapes disagree, a stratum has at most `n_neighbors`
            rows (reduce `n_strata` or `n_neighbors`), or every neighbourhood of a stratum is a single point.
        EmptyInputError: If `activations` is empty or every row's token has count 0.
        NonFiniteError: If `activations` hold NaN or infinity.

    Examples:
        >>> import math, torch
        >>> from interpreto_anisotropy import metrics
        >>> # a frequent token seen 1000 times on a short arc, a rare one 1000 times around the whole circle
        >>> angles = torch.cat([0.2 * torch.rand(1000), 2 * math.pi * torch.rand(1000)])
        >>> circle = torch.stack([angles.cos(), angles.sin()], dim=1)
        >>> ids = torch.cat([torch.zeros(1000, dtype=torch.long), torch.ones(1000, dtype=torch.long)])
        >>> result = metrics.curvature_visibility(
        ...     circle, ids, torch.tensor([1000, 10]), n_strata=2, n_neighbors=10, tangent_dim=1
        ... )
        >>> bool(result.median_ratio[1] < result.median_ratio[0])  # the frequent stratum looks flatter
        True
    """
    points = _as_points(activations, name="activations")
    _check_curvature_options(n_strata, n_neighbors, tangent_dim, max_anchors, points.shape[1])
    ids = _as_token_ids(token_ids, points.shape[0])
    frequencies = _counts_of(ids, counts)
    kept = np.flatnonzero(frequencies > 0)
    if kept.size == 0:
        raise EmptyInputError("every row's token has count 0: there is no frequency to stratify by.")
    order = kept[np.lexsort((ids[kept], frequencies[kept]))]
    strata = np.array_split(order, n_strata)
    rng = np.random.default_rng(seed)
    rows = [
        _stratum_row(number, points, members, frequencies[members], max_anchors, rng, n_neighbors, tangent_dim)
        for number, members in enumerate(strata)
    ]
    columns = dict(zip(_STRATUM_FIELDS, (np.array(column) for column in zip(*rows, strict=True)), strict=True))
    return CurvatureVisibility(
        **{name: column.astype(_STRATUM_FIELDS[name]) for name, column in columns.items()},
        n_neighbors=n_neighbors,
        tangent_dim=tangent_dim,
        n_excluded=int(len(ids) - kept.size),
    )


# The per-stratum fields of `CurvatureVisibility`, in the order `_stratum_row` gives them, with their dtypes.
_STRATUM_FIELDS = {
    "median_ratio": np.float64,
    "mean_ratio": np.float64,
    "median_radius": np.float64,
    "mean_log_frequency": np.float64,
    "min_count": np.float64,
    "max_count": np.float64,
    "n_points": np.int64,
    "n_anchors": np.int64,
}


def _stratum_row(
    number: int,
    points: torch.Tensor,
    members: np.ndarray,
    stratum_counts: np.ndarray,
    max_anchors: int | None,
    rng: np.random.Generator,
    n_neighbors: int,
    tangent_dim: int,
) -> tuple[Any, ...]:
    """One stratum's `_STRATUM_FIELDS`, from the local ratios of its anchors' neighbourhoods within it.

    Raises:
        InvalidInputError: The stratum has at most `n_neighbors` rows, or every neighbourhood is a single point.
    """
    if len(members) <= n_neighbors:
        raise InvalidInputError(
            f"frequency stratum {number} has {len(members)} rows but needs more than n_neighbors={n_neighbors}; "
            "pass fewer strata, fewer neighbours or more activations."
        )
    anchors = _draw_anchors(len(members), max_anchors, rng)
    ratios, radii = _local_ratios(
        points[torch.as_tensor(members, device=points.device)], anchors, n_neighbors, tangent_dim
    )
    if ratios.size == 0:
        raise InvalidInputError(f"every neighbourhood of frequency stratum {number} is a single repeated point.")
    return (
        np.median(ratios),
        ratios.mean(),
        np.median(radii),
        np.log(stratum_counts).mean(),
        stratum_counts.min(),
        stratum_counts.max(),
        len(members),
        ratios.size,
    )


def _check_curvature_options(
    n_strata: int, n_neighbors: int, tangent_dim: int, max_anchors: int | None, d: int
) -> None:
    def is_positive_int(value: Any) -> bool:
        return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1

    if not is_positive_int(n_strata):
        raise InvalidInputError(f"n_strata must be a positive integer, got {n_strata!r}.")
    if not is_positive_int(n_neighbors) or n_neighbors < 2:
        raise InvalidInputError(f"n_neighbors must be an integer >= 2, got {n_neighbors!r}.")
    if not is_positive_int(tangent_dim) or tangent_dim >= min(n_neighbors, d):
        raise InvalidInputError(
            f"tangent_dim must be an integer with 1 <= tangent_dim < min(n_neighbors, d) = {min(n_neighbors, d)}, "
            f"got {tangent_dim!r}: the normal part needs at least one direction."
        )
    if max_anchors is not None and not is_positive_int(max_anchors):
        raise InvalidInputError(f"max_anchors must be a positive integer or None, got {max_anchors!r}.")


def _draw_anchors(m: int, max_anchors: int | None, rng: np.random.Generator) -> np.ndarray:
    if max_anchors is None or m <= max_anchors:
        return np.arange(m)
    return np.sort(rng.choice(m, size=max_anchors, replace=False))


def _local_ratios(
    points: Float[torch.Tensor, "m d"], anchors: np.ndarray, n_neighbors: int, tangent_dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Normal / tangent variance of each anchor's neighbourhood (anchors with no tangent variance dropped)."""
    distances, neighbours = _nearest_neighbours(points, n_neighbors, anchors)
    members = torch.as_tensor(np.concatenate([anchors[:, None], neighbours], axis=1), device=points.device)
    ratios = []
    for block in torch.split(members, 256):
        neighbourhoods = points[block]
        centred = neighbourhoods - neighbourhoods.mean(dim=1, keepdim=True)
        # The (k+1, k+1) Gram matrix has the same non-zero eigenvalues as the (d, d) local covariance.
        eigenvalues = torch.linalg.eigvalsh(centred @ centred.transpose(1, 2)).flip(-1).clamp(min=0)
        tangent = eigenvalues[:, :tangent_dim].sum(dim=1)
        normal = eigenvalues[:, tangent_dim:].sum(dim=1)
        valid = tangent > 0
        ratios.append((normal[valid] / tangent[valid]).cpu())
    return torch.cat(ratios).numpy(), distances[:, -1]


# ---------------------------------------------------------------------------------------------- counting
def count_token_frequencies(
    texts: str | Iterable[str],
    tokenizer: Any,
    *,
    vocab_size: int | None = None,
    add_special_tokens: bool = False,
    batch_size: int = 1000,
) -> Int[torch.Tensor, " vocab"]:
    """Count how often each token id occurs in a corpus, tokenized with the model's tokenizer.

    Texts are tokenized in batches with `tokenizer(batch, add_special_tokens=...)["input_ids"]` (any Hugging Face
    tokenizer, or a callable that answers the same way), without truncation or padding.

    Args:
        texts: A text or an iterable of texts.
        tokenizer: A Hugging Face tokenizer (or compatible callable). Its `len()` gives the default vocab size.
        vocab_size: Size of the returned vector; by default `len(tokenizer)`, grown if an id exceeds it.
        add_special_tokens: Count special tokens (BOS, CLS, ...) too. Off by default, so counts are corpus
            frequencies of real tokens; rows of special tokens then have count 0 and are dropped by
            `frequency_distance_correlation` and `curvature_visibility`.
        batch_size: Texts per tokenizer call.

    Returns:
        A 1-D int64 CPU tensor `counts` of size vocab, `counts[i]` the number of occurrences of token id i.

    Raises:
        EmptyInputError: If there is no text.
        InvalidInputError: If a text is not a string, `batch_size` < 1, or an id exceeds an explicit `vocab_size`.
        TokenizerError: If the tokenizer does not return `input_ids`.

    Examples:
        >>> from interpreto_anisotropy import metrics
        >>> class Words:  # a stand-in for a tokenizer: one id per vocabulary word
        ...     vocab = {"a": 0, "b": 1, "c": 2}
        ...     def __len__(self): return 3
        ...     def __call__(self, texts, add_special_tokens=False):
        ...         return {"input_ids": [[self.vocab[w] for w in t.split()] for t in texts]}
        >>> metrics.count_token_frequencies(["a b a", "c a"], Words()).tolist()
        [3, 1, 1]
    """
    batch = [texts] if isinstance(texts, str) else list(texts)
    if not batch:
        raise EmptyInputError("texts is empty: pass at least one text to count tokens in.")
    if not all(isinstance(text, str) for text in batch):
        raise InvalidInputError("texts must be strings.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a positive integer, got {batch_size!r}.")
    size = vocab_size if vocab_size is not None else _tokenizer_size(tokenizer)
    counts = torch.zeros(size, dtype=torch.int64)
    for start in range(0, len(batch), batch_size):
        ids = _token_ids_of(tokenizer, batch[start : start + batch_size], add_special_tokens)
        if ids.numel() == 0:
            continue
        if int(ids.max()) >= counts.shape[0]:
            if vocab_size is not None:
                raise InvalidInputError(f"token id {int(ids.max())} does not fit vocab_size={vocab_size}.")
            counts = torch.cat([counts, torch.zeros(int(ids.max()) + 1 - counts.shape[0], dtype=torch.int64)])
        counts += torch.bincount(ids, minlength=counts.shape[0])
    return counts


def _tokenizer_size(tokenizer: Any) -> int:
    try:
        return len(tokenizer)
    except TypeError:
        return 0


def _token_ids_of(tokenizer: Any, texts: list[str], add_special_tokens: bool) -> torch.Tensor:
    if not callable(tokenizer):
        raise InvalidInputError(f"tokenizer must be callable like a Hugging Face tokenizer, got {type(tokenizer)}.")
    try:  # counting is no model input: no "sequence length is longer than the maximum" warning
        encoded = tokenizer(texts, add_special_tokens=add_special_tokens, verbose=False)
    except TypeError:  # a plain callable without Hugging Face's `verbose`
        encoded = tokenizer(texts, add_special_tokens=add_special_tokens)
    try:
        sequences = encoded["input_ids"]
    except (KeyError, TypeError, IndexError) as error:
        raise TokenizerError("the tokenizer did not return 'input_ids' for a batch of texts.") from error
    return torch.from_numpy(np.fromiter(chain.from_iterable(sequences), dtype=np.int64))
