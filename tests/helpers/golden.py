# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Golden comparisons that hold on any CPU and still catch a real change.

A golden value recorded on one machine is compared on another at a tolerance set by how the value is computed
(`RULES`, one rule per key), not bit for bit: a float32 product sums in another order on another CPU's kernels
(AVX2 or AVX-512, Intel's or AMD's path through MKL, one thread or two), and every number downstream of a model's
float32 forward and backward carries that rounding. Each rule says how far a value may move for that reason
alone, and `Check.ratio` gives how far it moved as a fraction of that allowance (<= 1 passes), so that
`benchmarks/golden_paths.py` can report the largest cross-path difference of every quantity in the same units.

Bit-identity, which a refactor on one machine must keep, is checked separately against a record made on this very
machine (`local_record`), never against the committed files.
"""

from __future__ import annotations

import hashlib
import math
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Relative rounding allowance of a value computed from float32 products (a model's activations or gradients, a
#: float32 PCA): float32's unit roundoff is 6e-8, and a value downstream of a forward, a backward and a fit through
#: a few hundred accumulations can move by a few hundred of them on another CPU's summation order. The largest
#: cross-path move measured over eight paths (benchmarks/golden_paths.py, docs/architecture.md) is 4.5e-6, a
#: position bucket's share of 12 tokens with batches of 3 (2.2e-6 for every other quantity); 2e-5 leaves a margin
#: of 4.4 there and 9 elsewhere, and still fails a real change of 1e-4 (the positive controls in test_golden.py).
FLOAT32_RTOL = 2e-5

#: Allowance of an angle between subspaces (radians), and of the largest principal angle between a recorded and a
#: recomputed float32 basis: 1e-4 rad = 0.0057 degrees. A fitted basis turns by about its float32 rounding over the
#: eigengap of its k-th direction on another summation order (up to 1.2e-5 rad measured, a sweep's drift angle), and
#: a 0.1 degree rotation (1.7e-3 rad) must still fail.
ANGLE = 1e-4

#: Rank swaps allowed in a Spearman correlation over n pairs: two values within rounding of each other (ties in
#: float32 distances) may be ordered the other way on another CPU, and one swap of adjacent ranks moves the
#: correlation by at most 12 / (n^2 - 1) (2 |s_i - s_j| <= 2 n in the sum of squared rank differences).
RANK_SWAPS = 4


@dataclass(frozen=True)
class Exact:
    """Equal to the letter: settings, names, counts, and floats that are a setting (k / d, a confidence level)."""

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        return 0.0 if actual == expected else math.inf


@dataclass(frozen=True)
class Close:
    """|actual - expected| <= max(rtol |expected|, atol), element by element (None only where None was recorded).

    Attributes:
        rtol: Relative allowance.
        atol: Absolute allowance: the rounding of a value that is a difference of larger ones (a cosine near 0, a
            change of IsoScore*, an anisotropy share) is set by its operands, not by the difference; and an angle's
            is a number of radians whatever the angle. 0 for values that cannot cancel (energies, shares, norms).
    """

    rtol: float = FLOAT32_RTOL
    atol: float = 0.0

    def allowance(self, expected: float) -> float:
        return max(self.rtol * abs(expected), self.atol)

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        pairs = _pairs(actual, expected)
        if pairs is None:
            return math.inf
        worst = 0.0
        for mine, theirs in pairs:
            if theirs is None or mine is None:
                worst = max(worst, 0.0 if mine is theirs else math.inf)
            elif math.isnan(theirs) or math.isnan(mine):
                worst = max(worst, 0.0 if math.isnan(theirs) and math.isnan(mine) else math.inf)
            elif mine != theirs:
                allowed = self.allowance(theirs)
                worst = max(worst, abs(mine - theirs) / allowed if allowed > 0 else math.inf)
        return worst


@dataclass(frozen=True)
class VectorClose:
    """||actual - expected|| <= rtol * ||expected||: a vector whose entries may cancel (a sum of gradient rows)."""

    rtol: float = FLOAT32_RTOL

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        mine, theirs = _arrays(actual, expected)
        if mine is None:
            return math.inf
        allowed = self.rtol * np.linalg.norm(theirs)
        gap = np.linalg.norm(mine - theirs)
        return 0.0 if gap == 0 else (gap / allowed if allowed > 0 else math.inf)


@dataclass(frozen=True)
class SameSubspace:
    """The span of a basis's columns, compared by its largest principal angle (sign- and rotation-invariant)."""

    max_angle: float = ANGLE

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        mine, theirs = _arrays(actual, expected)
        return math.inf if mine is None else largest_principal_angle(mine, theirs) / self.max_angle


@dataclass(frozen=True)
class RankPValue:
    """A rank p-value (1 + #{references >= statistic}) / (R + 1), on its 1 / (R + 1) grid.

    Equal to the letter unless a reference lies within the statistic's rounding allowance of it (a near-tie that
    another CPU may order the other way): each such reference allows one step of 1 / (R + 1).

    Attributes:
        statistic: The record's key of the tested value (e.g. "energy_share").
        references: The record's key of the values it is ranked among (e.g. "control_energy_shares").
        tolerance: The statistic's and the references' own rule.
    """

    statistic: str
    references: str
    tolerance: Close

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        if actual == expected:
            return 0.0
        value, references = record[self.statistic], record[self.references]
        near_ties = sum(
            abs(reference - value) <= self.tolerance.allowance(value) + self.tolerance.allowance(reference)
            for reference in references
        )
        step = 1 / (len(references) + 1)
        return abs(actual - expected) / (near_ties * step) if near_ties else math.inf


@dataclass(frozen=True)
class ZScore:
    """(E - k/d) / sigma_0: its allowance is E's and sigma_0's, |z| rtol + rtol E / sigma_0 (E - k/d may cancel)."""

    rtol: float = FLOAT32_RTOL

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        atol = self.rtol * abs(record["energy_share"]) / record["chance_std"]
        return Close(self.rtol, atol).ratio(actual, expected, record)


@dataclass(frozen=True)
class RankCorrelation:
    """A Spearman correlation, within `RANK_SWAPS` swaps of adjacent ranks (the record's `n_key` gives n)."""

    n_key: str
    swaps: int = RANK_SWAPS

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        n = record[self.n_key]
        return Close(0.0, self.swaps * 12 / (n * n - 1)).ratio(actual, expected, record)


@dataclass(frozen=True)
class Change:
    """A change X - X_0 from the curve's first checkpoint, or a bound of its interval (`results.change`).

    Its operands X and X_0 each move by rtol of themselves, so the change by rtol (|X| + |X_0|) whatever it is (it
    may cancel); a bound D +- m se moves with D and with se, whose rounding is rtol of the bound's distance m se
    from D.

    Attributes:
        of: The record's key of X (e.g. "energy_ratio"); X_0 = X - the record's "{of}_change".
    """

    of: str
    rtol: float = FLOAT32_RTOL

    def ratio(self, actual: Any, expected: Any, record: dict) -> float:
        value, change = record.get(self.of), record.get(f"{self.of}_change")
        if expected is None or value is None or change is None:
            return Exact().ratio(actual, expected, record)
        atol = self.rtol * (abs(value) + abs(value - change) + abs(expected - change))
        return Close(0.0, atol).ratio(actual, expected, record)


_SHARE = Close()
_UNIT = Close(atol=FLOAT32_RTOL)  # differences of values of order one: cosines, IsoScore* changes, correlations
_ANGLE = Close(rtol=0.0, atol=ANGLE)
_EXACT = Exact()

#: One rule for every key of a golden record (probe results, sweep rows, tangents, raw gradients). A key without a
#: rule fails the comparison, naming it: a new column needs a rule here.
RULES: dict[str, Any] = {
    **dict.fromkeys(
        """name method n_tokens n_sequences dim rank chance confidence objective reduction split_point seed
        n_skipped_batches n_skipped_sequences extra frequency_buckets frequency_n_tokens position_buckets
        position_n_tokens isoscore_convention isoscore_zeta isoscore_c0 checkpoint step revision layer tangent
        activation_d activation_n freq_distance_n drift_previous_step positions loss_count draw_seed n_random""".split(),
        _EXACT,
    ),
    **dict.fromkeys(
        """energy_share control_energy_shares random_energy_shares control_mean analytic_null energy_ratio ci_low
        ci_high oracle_energy_share chance_std frequency_energy_share frequency_control_share position_energy_share
        position_control_share loss loss_sum norms isoscore_star isoscore_star_without_tangent
        isoscore_star_without_controls activation_effective_rank activation_isoscore activation_isoscore_star
        activation_partition_isotropy activation_partition_isotropy_uncentered activation_rogue_top_share
        on_manifold_entropy""".split(),
        _SHARE,
    ),
    **dict.fromkeys(
        """anisotropy_capture delta_isoscore_star delta_isoscore_star_controls delta_isoscore_star_random anisotropy_share
        activation_mean_cosine activation_mean_cosine_centered freq_distance_pearson freq_distance_p_value""".split(),
        _UNIT,
    ),
    **dict.fromkeys(
        "drift_previous_max_angle drift_previous_mean_angle drift_reference_max_angle drift_reference_mean_angle".split(),
        _ANGLE,
    ),
    "freq_distance_spearman": RankCorrelation("freq_distance_n"),
    "p_value": RankPValue("energy_share", "control_energy_shares", _SHARE),
    "p_value_exact": RankPValue("energy_share", "random_energy_shares", _SHARE),
    "delta_isoscore_star_p_value": RankPValue("delta_isoscore_star", "delta_isoscore_star_controls", _UNIT),
    "anisotropy_share_p_value": RankPValue("delta_isoscore_star", "delta_isoscore_star_controls", _UNIT),
    "anisotropy_p_value_exact": RankPValue("delta_isoscore_star", "delta_isoscore_star_random", _UNIT),
    "z_score": ZScore(),
    **{
        f"{name}_change{suffix}": Change(name)
        for name in ("energy_share", "energy_ratio")
        for suffix in ("", "_low", "_high")
    },
    "anisotropy_share_change": Change("anisotropy_share"),
    # a count of resamples with |t*| >= |t|: it can flip only for a resample within rounding of |t|, none here so far
    "energy_share_change_p_value": _EXACT,
    "energy_ratio_change_p_value": _EXACT,
    "sequence_ids": _EXACT,
    "change_reference_step": _EXACT,
    "change_n_sequences": _EXACT,
    **dict.fromkeys(("sequence_energies", "sequence_control_energies", "sequence_totals"), _SHARE),
    # a count of dimensions above a threshold: it can flip only for a dimension at the threshold, none here so far
    "activation_n_outlier_dimensions": _EXACT,
    "basis": SameSubspace(),
    "mean": VectorClose(),
    "gradients": VectorClose(),
}


def mismatches(actual: Any, expected: Any, where: str) -> list[tuple[str, float]]:
    """Every leaf of `expected` whose rule `actual` breaks, as (path, ratio to its allowance), worst first.

    Records are dicts (or lists of dicts, a sweep's rows) whose keys name their rule in `RULES`; a value is
    compared as a whole (a list of shares, a basis) by its key's rule. Structure (keys, lengths) must match.
    """
    return sorted((item for item in ratios(actual, expected, where) if item[1] > 1), key=lambda item: -item[1])


def ratios(actual: Any, expected: Any, where: str) -> list[tuple[str, float]]:
    """(path, |difference| / allowance) for every ruled leaf: 0 where equal, inf where the structure differs."""
    if isinstance(expected, list) and expected and isinstance(expected[0], dict):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [(f"{where} (number of records)", math.inf)]
        return [
            item
            for index, pair in enumerate(zip(actual, expected, strict=True))
            for item in ratios(*pair, f"{where}[{index}]")
        ]
    if not isinstance(actual, dict) or actual.keys() != expected.keys():
        keys = set(actual) ^ set(expected) if isinstance(actual, dict) else "not a record"
        return [(f"{where} (keys differ: {keys})", math.inf)]
    out = []
    for key, theirs in expected.items():
        rule = RULES.get(key)
        if rule is None:
            out.append((f"{where}.{key} (no rule in tests/helpers/golden.py RULES)", math.inf))
        else:
            out.append((f"{where}.{key}", rule.ratio(actual[key], theirs, expected)))
    return out


def largest_principal_angle(first: np.ndarray, second: np.ndarray) -> float:
    """The largest principal angle (radians) between the spans of two (d, k) bases, orthonormalised first.

    Computed from the sines (the complement's projection), which keep their accuracy for small angles where
    arccos of the cosines would not.
    """
    q1, _ = np.linalg.qr(first)
    q2, _ = np.linalg.qr(second)
    residual = q2 - q1 @ (q1.T @ q2)
    sines = np.linalg.svd(residual, compute_uv=False)
    return float(np.arcsin(min(1.0, float(sines.max(initial=0.0)))))


def _arrays(actual: Any, expected: Any) -> tuple[np.ndarray | None, np.ndarray]:
    """Both values as float64 arrays; (None, expected) when their shapes differ."""
    mine, theirs = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    return (mine if mine.shape == theirs.shape else None), theirs


def run_golden_tests(env: dict[str, str], *, timeout: float = 900) -> subprocess.CompletedProcess:
    """`tests/test_golden.py` (but its slow tests) in a fresh process, with `env` over this one's environment (less
    its INTERPRETO_ANISOTROPY_* settings): ATen and MKL choose their kernels when they load."""
    full = {key: value for key, value in os.environ.items() if not key.startswith("INTERPRETO_ANISOTROPY_")}
    full.update(env, HF_HUB_OFFLINE="1")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_golden.py",
        "-m",
        "not slow",
    ]
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(command, cwd=root, env=full, capture_output=True, text=True, timeout=timeout)


def _pairs(actual: Any, expected: Any) -> list[tuple[Any, Any]] | None:
    """Aligned scalar pairs of two values of the same shape (scalars, or lists of scalars), or None."""
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return None
        return [(_number(mine), _number(theirs)) for mine, theirs in zip(actual, expected, strict=True)]
    return [(_number(actual), _number(expected))]


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def machine_key() -> str:
    """What decides float rounding here: CPU model, kernels (ATen's and MKL's), threads, torch; a short hash."""
    import torch

    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")), cpu)
    parts = [
        cpu,
        platform.machine(),
        torch.__version__,
        torch.backends.cpu.get_cpu_capability(),
        str(torch.get_num_threads()),
        os.environ.get("MKL_ENABLE_INSTRUCTIONS", ""),
        os.environ.get("MKL_CBWR", ""),
        os.environ.get("INTERPRETO_ANISOTROPY_GOLDEN_BATCH", ""),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
