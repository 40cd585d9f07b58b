# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The row schema: every column of a sweep's (and a live probe's) rows, declared once in `COLUMNS`; the rows file
``rows.jsonl`` and ``config.json`` of a results directory, read and checked line by line."""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..commons.files import checked_lines, load_json, read_text, read_whole_lines
from ..errors import ResultsFileWarning, ResultsStoreError


class Kind(str, Enum):
    """The JSON type of a column's values; every column may also hold null (a value that could not be computed)."""

    INTEGER = "integer"
    NUMBER = "number"
    TEXT = "text"
    LABEL = "integer or text"
    FLAG = "true or false"
    NUMBERS = "list of numbers"
    TEXTS = "list of texts"
    MAPPING = "mapping"
    REPORT = "computed by the report, not in rows.jsonl"

    def accepts(self, value: Any) -> bool:
        """Whether `value` (as `json.loads` gives it) is a value of this kind."""
        return self is not Kind.REPORT and (value is None or fits(value, _SHAPES[self]))


def fits(value: Any, shape: Any) -> bool:
    """Whether a JSON value has `shape`: a type or a tuple of types (an int is no bool), a frozenset of the texts
    allowed, ``[shape]`` (a list of such items), ``[shape, shape, ...]`` (a list of exactly those), ``{str: shape}``
    (an object of such values) or ``{"key": shape, "other?": shape}`` (an object with those keys, "?": optional)."""
    if isinstance(shape, frozenset):
        return isinstance(value, str) and value in shape
    if isinstance(shape, list):
        if not isinstance(value, list) or (len(shape) > 1 and len(value) != len(shape)):
            return False
        return all(map(fits, value, shape)) if len(shape) > 1 else all(fits(item, shape[0]) for item in value)
    if isinstance(shape, dict):
        if not isinstance(value, dict) or str in shape:
            return isinstance(value, dict) and all(fits(item, shape[str]) for item in value.values())
        return all(
            fits(value[key.rstrip("?")], each) if key.rstrip("?") in value else key.endswith("?")
            for key, each in shape.items()
        )
    types = shape if isinstance(shape, tuple) else (shape,)
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


_NUMBER = (int, float)
_SHAPES: dict[Kind, Any] = {
    Kind.INTEGER: int,
    Kind.NUMBER: _NUMBER,
    Kind.TEXT: str,
    Kind.LABEL: (int, str),
    Kind.FLAG: bool,
    Kind.NUMBERS: [(*_NUMBER, type(None))],
    Kind.TEXTS: [(str, type(None))],
    Kind.MAPPING: dict,
}


class Unit(str, Enum):
    """The unit of a column, as the report and the docs write it."""

    FRACTION = "fraction (0 to 1)"
    PROBABILITY = "probability (0 to 1)"
    RATIO = "ratio (times)"
    ISOSCORE = "IsoScore* (0 to 1, 1 = isotropic)"
    ISOSCORE_DELTA = "difference of IsoScore* (-1 to 1)"
    ISOTROPY = "isotropy score (0 to 1, 1 = isotropic)"
    COSINE = "cosine (-1 to 1)"
    CORRELATION = "correlation (-1 to 1)"
    RADIANS = "radians (0 to pi/2)"
    NATS = "nats"
    LOSS = "nats per loss term (cross-entropy of the LM objectives)"
    SECONDS = "seconds"
    COUNT = "count"
    DIMENSIONS = "dimensions"
    STEP = "training step"
    TEXT = "text"
    INTEGER = "integer"
    FLAG = "true or false"
    ENERGY = "squared gradient norm (units of (dL/dh)^2)"


@dataclass(frozen=True)
class Column:
    """One column of a sweep's rows.

    Attributes:
        name: The field's name in ``rows.jsonl`` and ``rows.csv``.
        kind: The JSON type of its values.
        meaning: What it is, in a sentence.
        unit: Its unit.
        formula: Its formula in plain text, if it has one.
        concept: The section of docs/concepts.md that defines it (an anchor, e.g. "energy-share"), if any.
    """

    name: str
    kind: Kind
    meaning: str
    unit: Unit
    formula: str = ""
    concept: str = ""

    def tooltip(self) -> str:
        """The one-line description shown on the report's table header: meaning, formula, unit."""
        formula = f" {self.formula}." if self.formula else ""
        return f"{self.meaning}.{formula} Unit: {self.unit.value}."


#: The tangent kinds of a sweep (and of a live probe), as the report defines them where they first appear.
TANGENT_KINDS: dict[str, str] = {
    "early": "the reference tangent, fitted once on the activations pooled over the early checkpoints (the first "
    "early_fraction of the steps) and probed at every checkpoint",
    "each": "a tangent refitted on each checkpoint's own activations, probed at that checkpoint",
    "given": "a subspace you supplied (given_reference), probed at every checkpoint",
    "refit": "a live probe's tangent, a streamed PCA refitted every refit_every training steps on the activations "
    "since its last fit",
}

_U, _K = Unit, Kind
_CHANGE = "what-training-added"  # the anchor of the section of docs/statistics.md (and docs/concepts.md)


def _change_columns(name: str, label: str, unit: Unit) -> tuple[Column, ...]:
    """The change of `name` from the curve's first checkpoint, its paired bootstrap interval and its p-value."""
    where = "(0 at the first checkpoint itself)"
    return (
        Column(f"{name}_change", Kind.NUMBER, f"Change of the {label} from the first checkpoint of the curve {where}",
               unit, f"{name} - {name} at change_reference_step, over the sequences probed at both (a live window: the "
               "difference from the curve's first window, of other sequences)", _CHANGE),
        Column(f"{name}_change_low", Kind.NUMBER, f"Lower bound of the paired bootstrap interval of {name}_change "
               "(level: confidence; [0, 0] at the first checkpoint; empty for a live window: nothing pairs two windows' "
               "sequences)", unit, concept=_CHANGE),
        Column(f"{name}_change_high", Kind.NUMBER, f"Upper bound of the paired bootstrap interval of {name}_change",
               unit, concept=_CHANGE),
        Column(f"{name}_change_p_value", Kind.NUMBER, f"p-value of no change of the {label} from the first checkpoint "
               "(ours, not the paper's): paired bootstrap-t over the same probe sequences; empty at the first "
               "checkpoint and for a live window", _U.PROBABILITY, "(1 + #{|t*_b| >= |change / se|}) / (B + 1)", _CHANGE),
    )  # fmt: skip


_ISOSCORE = "isoscore-and-the-anisotropy-share"  # the anchor of the IsoScore* section of docs/concepts.md
_OTHER = "other-measurements-of-a-sweep"  # the anchor of the section of docs/concepts.md on the other measurements
# fmt: off
COLUMNS: tuple[Column, ...] = (
    # identity
    Column("step", _K.INTEGER, "Training step of the checkpoint", _U.STEP),
    Column("checkpoint", _K.TEXT, "Name of the checkpoint (e.g. step-300)", _U.TEXT),
    Column("source", _K.TEXT, "Where the checkpoint was read: a local folder or a hub model id", _U.TEXT),
    Column("revision", _K.TEXT, "Hub revision of the checkpoint (empty for a local folder)", _U.TEXT),
    Column("layer", _K.LABEL, "Split point as the sweep was given it (a layer index or a module path)", _U.TEXT),
    Column("split_point", _K.TEXT, "Module whose output is the activation h (the split point)", _U.TEXT),
    Column("tangent", _K.TEXT, "Tangent kind: early (reference fitted on the early checkpoints), each (refitted on this "
           "checkpoint) or given (yours)", _U.TEXT, concept="the-early-window"),
    Column("name", _K.TEXT, "Name of the probed subspace (the tangent kind, or a given subspace's name)", _U.TEXT),
    Column("method", _K.TEXT, "Concept method that fitted the tangent (pca, svd, semi_nmf, ica, ...)", _U.TEXT,
           concept="the-tangent-proxy"),
    # sizes
    Column("n_tokens", _K.INTEGER, "Number of probed tokens n, the rows of G", _U.COUNT, concept="which-tokens-are-rows"),
    Column("n_sequences", _K.INTEGER, "Number of probe texts that gave tokens", _U.COUNT),
    Column("dim", _K.INTEGER, "Width d of the activations at the split point", _U.DIMENSIONS),
    Column("rank", _K.INTEGER, "Rank k of the tangent (and of each control)", _U.DIMENSIONS),
    Column("loss", _K.NUMBER, "Mean training loss of the checkpoint on the probe texts, per loss term", _U.LOSS,
           concept="the-loss"),
    # energy
    Column("energy_share", _K.NUMBER, "Share E_T of the gradient energy held by the tangent", _U.FRACTION,
           "E_T = ‖G Q_T‖_F² / ‖G‖_F²", "energy-share"),
    Column("ci", _K.REPORT, "Bootstrap confidence interval of E_T, resampling sequences", _U.FRACTION,
           "[ci_low, ci_high]", "energy-share"),
    Column("ci_low", _K.NUMBER, "Lower bound of the bootstrap confidence interval of E_T", _U.FRACTION, concept="energy-share"),
    Column("ci_high", _K.NUMBER, "Upper bound of the bootstrap confidence interval of E_T", _U.FRACTION, concept="energy-share"),
    Column("confidence", _K.NUMBER, "Level of the bootstrap confidence interval", _U.PROBABILITY),
    Column("chance", _K.NUMBER, "Share of a uniformly random rank-k subspace", _U.FRACTION, "k / d", "energy-share"),
    Column("control_mean", _K.NUMBER, "Mean energy share E_N of the R matched-rank normal controls", _U.FRACTION,
           "mean_r ‖G Q_N^(r)‖_F² / ‖G‖_F²", "matched-rank-normal-controls"),
    Column("control_energy_shares", _K.NUMBERS, "Energy share E_N of each normal control (a list, in rows.jsonl only)",
           _U.FRACTION, concept="matched-rank-normal-controls"),
    Column("analytic_null", _K.NUMBER, "Expected energy share of a random control in the tangent's orthogonal complement",
           _U.FRACTION, "(1 - E_T) k / (d - k)", "matched-rank-normal-controls"),
    Column("energy_ratio", _K.NUMBER, "Tangent energy over the controls' mean", _U.RATIO, "E_T / mean E_N",
           "matched-rank-normal-controls"),
    Column("p_value", _K.NUMBER, "p-value of E_T against the normal controls (the paper's comparison, as reconstructed here); "
           "approximate (anti-conservative, by how much depending on the gradients' anisotropy: the controls are not "
           "exchangeable with the "
           "tangent); its floor is 1/(R + 1)",
           _U.PROBABILITY, "(1 + #{controls with E_N >= E_T}) / (R + 1)", "p-values"),
    Column("p_value_exact", _K.NUMBER, "Exact p-value of E_T against R' uniformly random k-subspaces of R^d, exchangeable with "
           "a random tangent under the null", _U.PROBABILITY, "(1 + #{random subspaces with E_U >= E_T}) / (R' + 1)",
           "p-values"),
    Column("random_energy_shares", _K.NUMBERS, "Energy share E_U of each uniformly random k-subspace of R^d (a list, in "
           "rows.jsonl only)", _U.FRACTION, concept="p-values"),
    Column("chance_std", _K.NUMBER, "Standard deviation of a uniformly random k-subspace's energy share for these gradients",
           _U.FRACTION, "sqrt(2k(d-k) / (d(d-1)(d+2)) (tr S² / (tr S)² - 1/d))", "p-values"),
    Column("z_score", _K.NUMBER, "How many null standard deviations E_T sits above chance (a scale, not a test)", _U.RATIO,
           "(E_T - k/d) / chance_std", "p-values"),
    Column("oracle_energy_share", _K.NUMBER, "Energy share of the top-k eigenvectors of G^T G, the most any rank-k "
           "subspace holds", _U.FRACTION, "sum of the k largest eigenvalues of G^T G / ‖G‖_F²",
           "oracle-and-anisotropy-capture"),
    Column("anisotropy_capture", _K.NUMBER, "Where the tangent sits between chance (0) and the oracle (1)", _U.FRACTION,
           "(E_T - k/d) / (oracle - k/d)", "oracle-and-anisotropy-capture"),
    # isotropy of the gradients
    Column("isoscore_star", _K.NUMBER, "IsoScore* of the gradient cloud G", _U.ISOSCORE, concept=_ISOSCORE),
    Column("isoscore_star_without_tangent", _K.NUMBER, "IsoScore* of G with the tangent projected out, in its complement",
           _U.ISOSCORE, "IsoScore*(G (I - Q_T Q_T^T))", _ISOSCORE),
    Column("isoscore_star_without_controls", _K.NUMBERS, "IsoScore* of G with each control projected out (a list)",
           _U.ISOSCORE, concept=_ISOSCORE),
    Column("delta_isoscore_star", _K.NUMBER, "How much more isotropic G becomes when the tangent is projected out",
           _U.ISOSCORE_DELTA, "IsoScore*(G without Q_T) - IsoScore*(G)", _ISOSCORE),
    Column("delta_isoscore_star_controls", _K.NUMBERS, "The same difference for each control (a list, in rows.jsonl only)",
           _U.ISOSCORE_DELTA, concept=_ISOSCORE),
    Column("delta_isoscore_star_controls_mean", _K.REPORT, "Mean over the controls of IsoScore*(G without the control) - "
           "IsoScore*(G)", _U.ISOSCORE_DELTA, concept=_ISOSCORE),
    Column("anisotropy_share", _K.NUMBER, "How much more isotropic G becomes when the tangent, rather than a normal control, "
           "is projected out: the headline of the IsoScore* side", _U.ISOSCORE_DELTA,
           "Delta IsoScore*_T - mean Delta IsoScore*_N", _ISOSCORE),
    Column("anisotropy_share_p_value", _K.NUMBER, "The paper's approximate p-value of the anisotropy share: rank of the "
           "tangent's Delta IsoScore* among the normal controls' (anti-conservative, like "
           "p_value)", _U.PROBABILITY, "(1 + #{controls with Delta_N >= Delta_T}) / (R + 1)", _ISOSCORE),
    Column("delta_isoscore_star_random", _K.NUMBERS, "Delta IsoScore* of each uniformly random k-subspace of R^d of "
           "p_value_exact, in the same convention (a list, in rows.jsonl only)", _U.ISOSCORE_DELTA,
           "IsoScore*(G without Q_U) - IsoScore*(G)", _ISOSCORE),
    Column("anisotropy_p_value_exact", _K.NUMBER, "Exact p-value of the anisotropy share (ours, not the paper's): rank of the "
           "tangent's Delta IsoScore* among those of the R' uniformly random k-subspaces of R^d, exchangeable with "
           "a random tangent under the null", _U.PROBABILITY,
           "(1 + #{random subspaces with Delta_U >= Delta_T}) / (R' + 1)", _ISOSCORE),
    Column("isoscore_convention", _K.TEXT, "Where Delta IsoScore* is computed: complement (in the (d - k)-dimensional "
           "complement) or ambient (in R^d)", _U.TEXT, concept=_ISOSCORE),
    Column("isoscore_zeta", _K.NUMBER, "IsoScore* shrinkage zeta", _U.FRACTION, concept=_ISOSCORE),
    Column("isoscore_c0", _K.TEXT, "IsoScore* shrinkage target (scaled_identity, identity, pooled or given)", _U.TEXT,
           concept=_ISOSCORE),
    # energy by token bucket
    Column("frequency_buckets", _K.TEXTS, "Token frequency buckets: types ranked by count, cut at cumulated shares of all "
           "occurrences (a list, in rows.jsonl only)", _U.TEXT),
    Column("frequency_energy_share", _K.NUMBERS, "E_T within each frequency bucket (a list, in rows.jsonl only)", _U.FRACTION),
    Column("frequency_control_share", _K.NUMBERS, "The controls' mean share within each frequency bucket (a list)", _U.FRACTION),
    Column("frequency_n_tokens", _K.NUMBERS, "Probed tokens in each frequency bucket (a list)", _U.COUNT),
    Column("position_buckets", _K.TEXTS, "Position buckets of a token in its text: 0, 1-3, 4-15, 16-63, 64-255, 256+ (a list)",
           _U.TEXT),
    Column("position_energy_share", _K.NUMBERS, "E_T within each position bucket (a list, in rows.jsonl only)", _U.FRACTION),
    Column("position_control_share", _K.NUMBERS, "The controls' mean share within each position bucket (a list)", _U.FRACTION),
    Column("position_n_tokens", _K.NUMBERS, "Probed tokens in each position bucket (a list)", _U.COUNT),
    Column("delta_isoscore_star_p_value", _K.NUMBER, "The paper's approximate p-value of the tangent's Delta IsoScore* against "
           "the normal controls' (the same number as anisotropy_share_p_value)",
           _U.PROBABILITY, "(1 + #{controls with Delta_N >= Delta_T}) / (R + 1)", _ISOSCORE),
    # probe settings and bookkeeping
    Column("objective", _K.TEXT, "Training objective whose loss gives the gradients (causal_lm, masked_lm, ...)", _U.TEXT,
           concept="which-gradient"),
    Column("reduction", _K.TEXT, "How per-token losses were combined before the backward pass (sum: each token keeps its "
           "own scale)", _U.TEXT, concept="which-gradient"),
    Column("seed", _K.INTEGER, "Seed of the bootstrap and the masked-LM mask; in a sweep, also the root of every row's "
           "draw_seed", _U.INTEGER),
    Column("draw_seed", _K.INTEGER, "Seed of this row's normal controls and random subspaces, hashed from the sweep's seed and "
           "the row's step, split point and tangent kind: no two rows share a draw, and a resumed row "
           "draws what an uninterrupted run draws", _U.INTEGER, "first 4 bytes of SHA-256([seed, step, "
           "split point, tangent kind])", "p-values"),
    Column("n_random", _K.INTEGER, "R', the uniformly random k-subspaces behind p_value_exact; by default enough for Holm over "
           "the m rows of the sweep's declared family (a curve's checkpoints by default): the smallest R' >= R with "
           "1/(R' + 1) < level/m; a live row: the same over a split point's windows when total_steps is known (at most "
           "10,000), else R", _U.COUNT, concept="p-values"),
    Column("n_skipped_batches", _K.INTEGER, "Probe batches dropped for non-finite gradients", _U.COUNT),
    Column("n_skipped_sequences", _K.INTEGER, "Probe texts dropped: too short for the objective, or in a dropped batch", _U.COUNT),
    Column("extra", _K.MAPPING, "Extra fields of a custom objective (a mapping, in rows.jsonl only)", _U.TEXT),
    # isotropy of the activations (metrics.summary on the fit activations)
    Column("activation_n", _K.NUMBER, "Number of activation rows the activation metrics used (at most max_metric_tokens)",
           _U.COUNT, concept=_OTHER),
    Column("activation_d", _K.NUMBER, "Width d of those activations", _U.DIMENSIONS),
    Column("activation_mean_cosine", _K.NUMBER, "Mean cosine similarity between distinct activation rows (raw); near 1 is "
           "anisotropic", _U.COSINE, "mean over pairs i != j of cos(h_i, h_j)", _OTHER),
    Column("activation_mean_cosine_centered", _K.NUMBER, "Mean cosine similarity after subtracting the mean activation",
           _U.COSINE, "mean over pairs of cos(h_i - mean h, h_j - mean h)", _OTHER),
    Column("activation_isoscore", _K.NUMBER, "IsoScore of the activations (Rudman et al., 2022)", _U.ISOTROPY,
           concept=_OTHER),
    Column("activation_isoscore_star", _K.NUMBER, "IsoScore* of the activations (shrinkage IsoScore, Rudman & Eickhoff)",
           _U.ISOSCORE, concept=_OTHER),
    Column("activation_partition_isotropy", _K.NUMBER, "Partition isotropy I(W) of the centred activations (Mu et al., "
           "2018)", _U.ISOTROPY, "min_c Z(c) / max_c Z(c), Z(c) = sum_i exp(c^T h_i) over eigenvectors c", _OTHER),
    Column("activation_partition_isotropy_uncentered", _K.NUMBER, "Partition isotropy I(W) of the raw activations",
           _U.ISOTROPY, concept=_OTHER),
    Column("activation_effective_rank", _K.NUMBER, "Effective rank of the activations: exp of the entropy of the normalised "
           "singular values (1 to d)", _U.DIMENSIONS, "exp(-sum_i p_i log p_i), p_i = s_i / sum_j s_j", _OTHER),
    Column("activation_rogue_top_share", _K.NUMBER, "Share of the mean cosine similarity contributed by the 3 leading "
           "'rogue' dimensions (Timkey & van Schijndel, 2021)", _U.FRACTION, concept=_OTHER),
    Column("activation_n_outlier_dimensions", _K.NUMBER, "Dimensions whose mean absolute value exceeds the mean plus 3 "
           "standard deviations of all dimensions' (magnitude outliers)", _U.COUNT, concept=_OTHER),
    # manifold
    Column("freq_distance_pearson", _K.NUMBER, "Pearson correlation between a token's log corpus frequency and the distance "
           "of its activation to the activation centroid; negative: frequent tokens sit near the centre",
           _U.CORRELATION, "corr(log count(token), ‖h - mean h‖)", _OTHER),
    Column("freq_distance_spearman", _K.NUMBER, "Spearman rank correlation between token frequency and distance to the "
           "activation centroid", _U.CORRELATION, concept=_OTHER),
    Column("freq_distance_p_value", _K.NUMBER, "Two-sided p-value of freq_distance_pearson (no correlation as the null)",
           _U.PROBABILITY, concept=_OTHER),
    Column("freq_distance_n", _K.INTEGER, "Activation rows in the frequency-distance correlation (tokens of count 0 left out)",
           _U.COUNT),
    Column("on_manifold_entropy", _K.NUMBER, "Kozachenko-Leonenko (k-nearest-neighbour) differential entropy of the "
           "activations' k coordinates in the tangent; can be negative, compare it across checkpoints only",
           _U.NATS, "psi(n) - psi(k_nn) + log V_k + (k/n) sum_i log eps_i", _OTHER),
    # drift
    Column("drift_reference_mean_angle", _K.NUMBER, "Mean principal angle between this checkpoint's own tangent and the "
           "reference tangent; 0 = the same subspace", _U.RADIANS, "mean_i arccos(s_i), s = singular values of "
           "Q_own^T Q_ref", _OTHER),
    Column("drift_reference_max_angle", _K.NUMBER, "Largest principal angle between this checkpoint's own tangent and the "
           "reference tangent; pi/2 = some direction orthogonal", _U.RADIANS, "max_i arccos(s_i)", _OTHER),
    Column("drift_previous_mean_angle", _K.NUMBER, "Mean principal angle between this checkpoint's own tangent and the "
           "previous checkpoint's (empty at the first)", _U.RADIANS, concept=_OTHER),
    Column("drift_previous_max_angle", _K.NUMBER, "Largest principal angle between this checkpoint's own tangent and the "
           "previous checkpoint's (empty at the first)", _U.RADIANS, concept=_OTHER),
    Column("drift_previous_step", _K.INTEGER, "Step of the previous checkpoint that drift_previous_* compare with", _U.STEP),
    # what training added (results.change): the change from the curve's first checkpoint
    Column("sequence_ids", _K.NUMBERS, "Index in the probe texts of each probed sequence (a list, in rows.jsonl only; "
           "not in a live probe's rows)", _U.INTEGER, concept=_CHANGE),
    Column("sequence_energies", _K.NUMBERS, "Each probed sequence's gradient energy in the tangent (a list, in rows.jsonl "
           "only)", _U.ENERGY, "‖G_i Q_T‖_F² over the rows G_i of sequence i", _CHANGE),
    Column("sequence_control_energies", _K.NUMBERS, "Each probed sequence's mean gradient energy in the normal controls "
           "(a list, in rows.jsonl only)", _U.ENERGY, "mean_r ‖G_i Q_N^(r)‖_F²", _CHANGE),
    Column("sequence_totals", _K.NUMBERS, "Each probed sequence's squared gradient norm (a list, in rows.jsonl only)",
           _U.ENERGY, "‖G_i‖_F²", _CHANGE),
    Column("change_reference_step", _K.INTEGER, "Step of the first checkpoint (live: window) of the row's curve (same split point and "
           "tangent kind), which the *_change columns compare with", _U.STEP, concept=_CHANGE),
    Column("change_n_sequences", _K.INTEGER, "Probe sequences probed at both this checkpoint and the first, which the "
           "change's paired bootstrap resamples (empty for a live window)", _U.COUNT, concept=_CHANGE),
    *_change_columns("energy_share", "energy share E_T", _U.FRACTION),
    *_change_columns("energy_ratio", "energy ratio E_T / mean E_N", _U.RATIO),
    Column("anisotropy_share_change", _K.NUMBER, "Change of the anisotropy share from the first checkpoint of the curve "
           "(no interval: the probe keeps no per-sequence gradient covariance to resample)", _U.ISOSCORE_DELTA,
           "anisotropy_share - anisotropy_share at change_reference_step", _CHANGE),
    # a live probe's windows (live.rows)
    Column("window_first_step", _K.INTEGER, "Optimizer step of the weights of the window's first micro-batch", _U.STEP),
    Column("window_steps", _K.INTEGER, "Optimizer steps a live window pooled", _U.COUNT),
    Column("window_micro_batches", _K.INTEGER, "Micro-batches a live window pooled", _U.COUNT),
    Column("retrospective", _K.FLAG, "Whether a live window was scored after its tangent was fitted, from the "
           "gradient rows (or the moments) it kept", _U.FLAG),
    Column("tangent_fitted_at", _K.INTEGER, "Step count when a live probe fitted its tangent (empty for a given "
           "one)", _U.STEP),
    # bookkeeping
    Column("wall_seconds", _K.NUMBER, "Wall-clock time spent on this checkpoint and split point (loading excluded)",
           _U.SECONDS),
    Column("download_seconds", _K.NUMBER, "Wall-clock time huggingface_hub took to fetch this Hub checkpoint's files (in the "
           "background while earlier checkpoints were computed, with prefetch; near 0 when they were already cached); "
           "absent for local folders", _U.SECONDS),
    Column("fingerprint", _K.TEXT, "Content fingerprint of the checkpoint's files, which a resumed sweep checks "
           "(results.records.fingerprint)", _U.TEXT),
    Column("skipped", _K.TEXT, "Why the sweep skipped this checkpoint (skip_bad_checkpoints); such rows have no numbers",
           _U.TEXT),
)
# fmt: on
_BY_NAME = {column.name: column for column in COLUMNS}

#: Suffixes of the p-value columns adjusted for multiple testing, and how.
ADJUSTED_SUFFIXES: dict[str, str] = {
    "_holm": "adjusted by Holm's method within the sweep's declared family (family-wise error rate; by default the rows "
    "of its split point and tangent kind)",
    "_bh": "adjusted by Benjamini-Hochberg within the sweep's declared family (false discovery rate; by default the "
    "rows of its split point and tangent kind)",
}


def describe(name: str) -> Column | None:
    """The description of a column, or None if `COLUMNS` has no entry for it.

    Args:
        name: A row field, a derived report column ("ci", "delta_isoscore_star_controls_mean") or an adjusted
            p-value ("p_value_holm").

    Returns:
        Its `Column`, or None.

    Examples:
        >>> describe("p_value_holm").meaning.startswith("p_value adjusted by Holm")
        True
    """
    if name in _BY_NAME:
        return _BY_NAME[name]
    for suffix, how in ADJUSTED_SUFFIXES.items():
        base = _BY_NAME.get(name.removesuffix(suffix)) if name.endswith(suffix) else None
        if base is not None:
            return Column(name, Kind.NUMBER, f"{base.name} {how}", base.unit, concept="p-values")
    return None


def type_problem(row: Mapping[str, Any]) -> str | None:
    """Which declared field of `row` holds a value of another kind (None when all fit); undeclared ones are let be.

    Examples:
        >>> type_problem({"step": 3, "energy_share": "high"})
        "energy_share 'high' is not a number"
    """
    for name, value in row.items():
        column = _BY_NAME.get(name)
        if column is None or column.kind.accepts(value):
            continue
        if column.kind is Kind.REPORT:
            return f"{name} is computed by the report, not a row field"
        return f"{name} {_shown(value)} is not {'an' if column.kind.value[0] in 'aeiou' else 'a'} {column.kind.value}"
    return None


def row_line(row: Mapping[str, Any]) -> str:
    """The line of ``rows.jsonl`` that holds `row`, once every field is checked against `COLUMNS`.

    Raises:
        ResultsStoreError: A field `COLUMNS` does not declare, or a value of another kind.

    Examples:
        >>> row_line({"step": 0, "layer": 1, "energy_share": 0.25})
        '{"step": 0, "layer": 1, "energy_share": 0.25}\\n'
        >>> row_line({"step": 0, "layer": 1, "energy_share": float("nan")})
        '{"step": 0, "layer": 1, "energy_share": null}\\n'
    """
    undeclared = [name for name in row if name not in _BY_NAME]
    problem = f"undeclared fields {undeclared}" if undeclared else type_problem(row)
    if problem is not None:
        raise ResultsStoreError(
            f"A row of step {row.get('step')!r} cannot be written: {problem}. Declare each row field once, with its "
            "kind, in interpreto_anisotropy/results/schema.py (COLUMNS)."
        )
    return json.dumps({name: _finite_or_none(value) for name, value in row.items()}) + "\n"


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite_or_none(item) for item in value]
    return value


def reference_markdown() -> str:
    """docs/columns.md, generated from `COLUMNS`, each p-value column followed by its adjusted forms."""
    lines = [
        "# Columns of a sweep",
        "",
        "<!-- Generated from interpreto_anisotropy/results/schema.py: edit COLUMNS there, then run",
        "     python -m interpreto_anisotropy.results.schema > docs/columns.md -->",
        "",
        "Every row of `rows.jsonl`, `rows.csv` and the report's table is one (checkpoint, split point, tangent).",
        "The report's header tooltips, its definitions block and `rows.columns.csv` say the same as this page.",
        "Every column may also be empty (null in `rows.jsonl`) where its value could not be computed.",
        "Tangent kinds:",
        "",
        *[f"- `{kind}`: {text}." for kind, text in TANGENT_KINDS.items()],
        "",
        "| column | type | meaning | unit | formula |",
        "|---|---|---|---|---|",
    ]
    for base in COLUMNS:
        adjusted = ADJUSTED_SUFFIXES if base.name in ("p_value", "p_value_exact") else ()
        for column in (base, *(describe(base.name + suffix) for suffix in adjusted)):
            meaning = column.meaning.replace("|", "\\|") + (
                f" ([more](concepts.md#{column.concept}))" if column.concept else ""
            )
            formula = "`{}`".format(column.formula.replace("|", "\\|")) if column.formula else ""
            lines.append(f"| `{column.name}` | {column.kind.value} | {meaning} | {column.unit.value} | {formula} |")
    return "\n".join(lines) + "\n"


#: The rows of a sweep, one JSON object a line, in its results directory.
ROWS_FILE = "rows.jsonl"
#: The settings of a sweep (what a resume must match), in its results directory.
CONFIG_FILE = "config.json"


def read_rows(path: Path, *, appended: bool = False) -> list[dict[str, Any]]:
    """Rows of a ``rows.jsonl`` file (none when it does not exist), each checked (`row_problem`); an `appended`
    file (a live probe's) may end in a line still being written, which is left out with a warning."""
    if not path.exists():
        return []
    text, cut = read_whole_lines(path) if appended else (read_text(path), False)
    if cut:
        warnings.warn(
            f"The last line of {path} is unterminated: a live probe is appending it, or was stopped while writing "
            "it (the next live run into this folder removes it). The rows before it are read; it is left out.",
            ResultsFileWarning,
            stacklevel=3,
        )
    advice = "Delete that line (a resume recomputes its checkpoint), or rerun with overwrite=True."
    return checked_lines(text, path, row_problem, what="a sweep row", advice=advice)


#: Steps are below this (a crafted step of 10**30 is refused, not carried into file names and tensors).
MAX_STEP = 10**15
_MARKUP = set("<>") | {chr(code) for code in range(32)}
_LAYER = _MARKUP | set("\"'&`/\\")  # a layer also names files and folders


def row_problem(row: Any) -> str | None:
    """What makes `row` no sweep row, None when it is one."""
    if not isinstance(row, dict):
        return "not a JSON object"
    step = row.get("step")
    if not fits(step, int) or not 0 <= step < MAX_STEP:
        return f"step {_shown(step)} is not an integer in [0, 10**15)"
    if "layer" not in row:
        return "no layer"
    for name in ("layer", "split_point", "tangent", "checkpoint"):
        value = row.get(name)
        if fits(value, int) if name == "layer" else value is None:
            continue
        forbidden = _LAYER if name == "layer" else _MARKUP
        if not isinstance(value, str) or not value.strip() or value in (".", "..") or forbidden & set(value):
            return f"{name} {_shown(value)} is not a name: empty, a path, not a string, or holding markup"
    return type_problem(row)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def is_skipped(row: dict[str, Any]) -> bool:
    """Whether a row records a checkpoint the sweep skipped (it holds why, not numbers)."""
    return bool(row.get("skipped"))


def row_key(row: dict[str, Any]) -> tuple[int, str, str]:
    """A row's identity in its sweep: (step, split point as given, tangent kind)."""
    return row["step"], str(row["layer"]), str(row.get("tangent", "early"))


def check_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Refuse rows a sweep cannot have written together: one key twice, or different numbers of controls."""
    duplicates = sorted(key for key, count in Counter(map(row_key, rows)).items() if count > 1)
    if duplicates:
        raise ResultsStoreError(
            f"{path} holds rows twice for (step, split point, tangent) {duplicates[:5]}: two runs wrote it at once. "
            "Delete the duplicated lines, or rerun with overwrite=True."
        )
    controls = {
        len(row["control_energy_shares"]) for row in rows if isinstance(row.get("control_energy_shares"), list)
    }
    if len(controls) > 1:
        raise ResultsStoreError(
            f"{path} mixes rows with {sorted(controls)} normal controls: they come from sweeps with other settings. "
            "Rerun with overwrite=True."
        )


#: The shape (`fits`) of the config keys a resumed run reads to merge itself in (`extension.merge_configs`).
_CONFIG_SHAPES: dict[str, Any] = {
    "checkpoints": [{"step": int}],
    "split_points": [(int, str)],
    "reference": frozenset({"early", "each", "both", "given", "refit"}),  # refit: a live probe's
    "given_reference": (dict, type(None)),
    "early_steps": [int],
    "early_fraction": _NUMBER,
}


def read_config(path: Path) -> dict[str, Any]:
    """A sweep's ``config.json``, refused (`ResultsStoreError`) when unreadable or malformed."""
    advice = "Rerun the sweep with overwrite=True to start afresh."
    config = load_json(path, advice=advice)
    wrong = [key for key, shape in _CONFIG_SHAPES.items() if not fits(config, {f"{key}?": shape})]
    if wrong:
        raise ResultsStoreError(
            f"{path} is not a sweep config ({', '.join(wrong)} of a wrong type): it was not written by a sweep, or was "
            f"edited. {advice}"
        )
    return config


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by step, then split point, then tangent kind."""
    order = {"early": 0, "given": 1, "each": 2}
    return sorted(rows, key=lambda row: (row["step"], str(row.get("split_point")), order.get(row.get("tangent"), 3)))


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(reference_markdown())
