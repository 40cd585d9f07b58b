# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`ProbeResult`: the probe's numbers for one tangent, and its finding in words (shared with `results.verdict`).

Examples:
    >>> sign_meaning(0.1).startswith("positive")
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..commons.progress import html_table, short_repr
from ..metrics.isotropy import DEFAULT_ZETA
from ..tangents.controls import p_value

__all__ = [
    "ANISOTROPY_P_EXACT_COLUMN",
    "ANISOTROPY_P_APPROXIMATE_COLUMN",
    "CAVEAT",
    "PER_SEQUENCE_FIELDS",
    "ProbeResult",
    "anisotropy_p_value",
    "change_sentence",
    "fmt",
    "number",
    "probe_lines",
    "sign_meaning",
]

#: The fields that list one value per probed sequence (what `probing.intervals.paired_change` pairs).
PER_SEQUENCE_FIELDS = ("sequence_ids", "sequence_energies", "sequence_control_energies", "sequence_totals")


@dataclass(repr=False)
class ProbeResult:
    """Gradient energy and anisotropy held by a tangent subspace, against matched-rank normal controls.

    Each field is a column of the row schema (`results.schema`, docs/columns.md): G (n, d) the probed gradients,
    Q_T (d, k) the tangent, R controls, R' random subspaces.

    Attributes:
        name: The tangent's name ("tangent" or the key given in a dict).
        energy_share: E_T = ||G Q_T||_F^2 / ||G||_F^2 (gradients not centred), with `ci_low`, `ci_high`.
        control_energy_shares: E_N for each control, (R,); `random_energy_shares`: E_U, (R',).
        p_value: The paper's approximate p-value against the controls; `p_value_exact` against random subspaces.
        isoscore_star: IsoScore* of G; `isoscore_star_without_controls`, `delta_isoscore_star_controls`: (R,);
            `delta_isoscore_star_random`: (R',).
        anisotropy_share: delta_isoscore_star - mean(delta_isoscore_star_controls), with its two p-values.
        frequency_buckets: The energy breakdown by token frequency (and `position_*` by position), lists.
        sequence_ids: Each probed sequence's index, with its energy in the tangent (`sequence_energies`), its mean
            energy in the controls (`sequence_control_energies`) and its squared gradient norm (`sequence_totals`).
        Others: the remaining columns (counts, chance, ratios, settings, skip counts), as docs/columns.md says.

    Examples:
        >>> result = ia.GradientProbe(mwsp, objective="causal_lm").run(texts, tangent, n_controls=20, seed=0)  # doctest: +SKIP
        >>> result.energy_share > result.control_mean, result.p_value  # beats all 20 controls: p = 1/21  # doctest: +SKIP
        (True, 0.047619047619047616)
        >>> result.p_value_exact  # and all 20 uniformly random subspaces  # doctest: +SKIP
        0.047619047619047616
        >>> ia.ProbeResult.from_dict(result.to_dict()).energy_share == result.energy_share  # doctest: +SKIP
        True
    """

    name: str
    method: str | None
    n_tokens: int
    n_sequences: int
    dim: int
    rank: int
    loss: float
    energy_share: float
    chance: float
    control_energy_shares: np.ndarray
    control_mean: float
    analytic_null: float
    energy_ratio: float
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float
    oracle_energy_share: float
    anisotropy_capture: float
    isoscore_star: float
    isoscore_star_without_tangent: float
    isoscore_star_without_controls: np.ndarray
    delta_isoscore_star: float
    delta_isoscore_star_controls: np.ndarray
    delta_isoscore_star_p_value: float
    random_energy_shares: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p_value_exact: float = math.nan
    chance_std: float = math.nan
    z_score: float = math.nan
    anisotropy_share: float = math.nan
    anisotropy_share_p_value: float = math.nan
    delta_isoscore_star_random: np.ndarray = field(default_factory=lambda: np.zeros(0))
    anisotropy_p_value_exact: float = math.nan
    frequency_buckets: list[str] = field(default_factory=list)
    frequency_energy_share: list[float | None] = field(default_factory=list)
    frequency_control_share: list[float | None] = field(default_factory=list)
    frequency_n_tokens: list[int] = field(default_factory=list)
    position_buckets: list[str] = field(default_factory=list)
    position_energy_share: list[float | None] = field(default_factory=list)
    position_control_share: list[float | None] = field(default_factory=list)
    position_n_tokens: list[int] = field(default_factory=list)
    isoscore_convention: str = "complement"
    isoscore_zeta: float = DEFAULT_ZETA
    isoscore_c0: str = "scaled_identity"
    objective: str = "causal_lm"
    reduction: str = "sum"
    split_point: str | None = None
    seed: int = 0
    n_skipped_batches: int = 0
    n_skipped_sequences: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    sequence_ids: list[int] = field(default_factory=list)
    sequence_energies: list[float] = field(default_factory=list)
    sequence_control_energies: list[float] = field(default_factory=list)
    sequence_totals: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, *, isoscore_star_without_random: np.ndarray | None = None, **measured: Any) -> ProbeResult:
        """The derived fields from the measured ones (`anisotropy_p_value_exact` is NaN without the random's)."""
        for key in ("control_energy_shares", "random_energy_shares", "isoscore_star_without_controls"):
            measured[key] = np.asarray(measured[key], dtype=np.float64)
        share, isoscore, chance_std = measured["energy_share"], measured["isoscore_star"], measured["chance_std"]
        without_random = np.asarray(() if isoscore_star_without_random is None else isoscore_star_without_random)
        control_mean = float(measured["control_energy_shares"].mean())
        chance = measured["rank"] / measured["dim"]
        excess = measured["oracle_energy_share"] - chance
        delta = measured["isoscore_star_without_tangent"] - isoscore
        delta_controls = measured["isoscore_star_without_controls"] - isoscore
        delta_random = without_random.astype(np.float64) - isoscore
        p_delta = p_value(delta, delta_controls)
        return cls(
            **measured,
            chance=chance,
            control_mean=control_mean,
            energy_ratio=share / control_mean if control_mean > 0 else math.inf,
            anisotropy_capture=(share - chance) / excess if excess > 0 else math.nan,
            delta_isoscore_star=delta,
            delta_isoscore_star_controls=delta_controls,
            delta_isoscore_star_p_value=p_delta,
            p_value_exact=p_value(share, measured["random_energy_shares"]),
            z_score=(share - chance) / chance_std if chance_std > 0 else math.nan,
            anisotropy_share=float(delta - delta_controls.mean()),
            anisotropy_share_p_value=p_delta,
            delta_isoscore_star_random=delta_random,
            anisotropy_p_value_exact=p_value(delta, delta_random) if delta_random.size else math.nan,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: arrays become lists, non-finite floats become None."""
        return {key: _jsonable(value) for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        """Inverse of `to_dict`."""
        values = dict(data)
        for option in fields(cls):
            if option.type == "np.ndarray" and option.name in values:  # older results lack the random subspaces'
                values[option.name] = np.asarray(values[option.name], dtype=np.float64)
            elif values.get(option.name, "absent") is None and option.name not in ("method", "split_point"):
                values[option.name] = math.nan
        return cls(**values)

    def to_json(self) -> str:
        """The result as a JSON string."""
        return json.dumps(self.to_dict())

    # What `repr` shows: who, how many, and the two tests with their p-values.
    _HEADLINE = (
        "name method split_point n_tokens n_sequences dim rank energy_share control_mean energy_ratio p_value "
        "p_value_exact anisotropy_share anisotropy_p_value_exact"
    ).split()

    def __repr__(self) -> str:
        return short_repr("ProbeResult", [(name, getattr(self, name)) for name in self._HEADLINE])

    def _repr_html_(self) -> str:
        return html_table(self._title(), None, self._table_rows(), notes=probe_lines(vars(self)))

    def __str__(self) -> str:
        rows = self._table_rows()
        width = max(len(label) for label, _ in rows)
        finding = [f"  {line}" for line in probe_lines(vars(self))]
        return "\n".join([self._title(), *finding, *(f"  {label:<{width}}  {value}" for label, value in rows)])

    def _title(self) -> str:
        return f"ProbeResult {self.name!r} ({self.method}, {self.objective}, split point {self.split_point})"

    def _table_rows(self) -> list[tuple[str, str]]:
        """(label, value) of every number `print` and the notebook show."""
        controls = self.control_energy_shares
        delta_controls = self.delta_isoscore_star_controls
        return [
            ("tokens / sequences", f"{self.n_tokens} / {self.n_sequences}"),
            ("d / k", f"{self.dim} / {self.rank}"),
            ("loss (mean per term)", f"{self.loss:.4f}"),
            ("energy share E_T", f"{self.energy_share:.4f}  [{self.ci_low:.4f}, {self.ci_high:.4f}]"),
            ("chance k/d", f"{self.chance:.4f}"),
            ("controls E_N mean [min, max]", f"{self.control_mean:.4f}  [{controls.min():.4f}, {controls.max():.4f}]"),
            ("analytic null (1-E_T)k/(d-k)", f"{self.analytic_null:.4f}"),
            ("energy ratio E_T / E_N", f"{self.energy_ratio:.2f}"),
            (f"p-value vs controls (R={controls.size}, approx.)", f"{self.p_value:.3f}"),
            (f"p-value exact (R'={self.random_energy_shares.size} random)", f"{self.p_value_exact:.3f}"),
            ("z-score (E_T - k/d) / sigma_0", f"{self.z_score:.2f}  (sigma_0={self.chance_std:.4f})"),
            ("oracle top-k share", f"{self.oracle_energy_share:.4f}"),
            ("anisotropy capture", f"{self.anisotropy_capture:.3f}"),
            (f"IsoScore* of G (zeta={self.isoscore_zeta:g}, C0={self.isoscore_c0})", f"{self.isoscore_star:.4f}"),
            (f"IsoScore* without tangent ({self.isoscore_convention})", f"{self.isoscore_star_without_tangent:.4f}"),
            ("IsoScore* without controls", f"{self.isoscore_star_without_controls.mean():.4f} (mean)"),
            ("Delta IsoScore* tangent / controls", f"{self.delta_isoscore_star:+.4f} / {delta_controls.mean():+.4f}"),
            (
                "anisotropy share Delta_T - mean Delta_N",
                f"{self.anisotropy_share:+.4f}  (p={self.anisotropy_share_p_value:.3f}, approx.)",
            ),
            (
                f"anisotropy p-value exact (R'={self.delta_isoscore_star_random.size} random)",
                f"{self.anisotropy_p_value_exact:.3f}",
            ),
        ]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


#: The rows' exact p-value of the anisotropy share, preferred when a row has one (older rows have none).
ANISOTROPY_P_EXACT_COLUMN = "anisotropy_p_value_exact"
#: The paper's normal-control rank p-value of the anisotropy share (approximate), the fallback.
ANISOTROPY_P_APPROXIMATE_COLUMN = "anisotropy_share_p_value"
#: What gradient alignment does not show (the verdict's last line).
CAVEAT = (
    "Alignment is descriptive: gradients that point along the tangent are not evidence that the tangent causes or "
    "drives learning, and energy shares measure no curvature of the activation manifold."
)


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def anisotropy_p_value(row: Mapping[str, Any]) -> tuple[float | None, bool]:
    """A row's p-value of the anisotropy share: the exact one when the row has it, else the approximate one.

    Returns:
        (p-value or None, whether it is exact).
    """
    value = number(row.get(ANISOTROPY_P_EXACT_COLUMN))
    return (value, True) if value is not None else (number(row.get(ANISOTROPY_P_APPROXIMATE_COLUMN)), False)


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def sign_meaning(share: float) -> str:
    if share > 0:
        return "positive: removing the tangent makes the gradients more isotropic than removing a normal control"
    if share < 0:
        return (
            "negative: removing the tangent makes the gradients LESS isotropic than removing a normal control, so "
            "the tangent holds less of the gradients' anisotropy than a random normal direction does, whatever "
            "energy it holds"
        )
    return "zero: removing the tangent or a normal control changes the gradients' isotropy alike"


def _level(fields: Mapping[str, Any]) -> str:
    confidence = number(fields.get("confidence"))
    return f"{100 * confidence:g} % " if confidence is not None else ""


def _interval(fields: Mapping[str, Any]) -> str:
    low, high = number(fields.get("ci_low")), number(fields.get("ci_high"))
    if low is None or high is None:
        return "no interval (a single sequence gives none)"
    return f"{_level(fields)}bootstrap interval [{low:.4f}, {high:.4f}]"


def _draws(fields: Mapping[str, Any], name: str) -> int:
    values = fields.get(name)
    return len(values) if values is not None else 0


def _changed(name: str, label: str, first: Mapping[str, Any], last: Mapping[str, Any], digits: int) -> str | None:
    """ "{label} {first} at step s0 -> {last} at step s1: {change} ({level} interval [a, b], p of no change)"."""
    before, after, change = number(first.get(name)), number(last.get(name)), number(last.get(f"{name}_change"))
    if before is None or after is None or change is None:
        return None
    low, high = number(last.get(f"{name}_change_low")), number(last.get(f"{name}_change_high"))
    p_change = number(last.get(f"{name}_change_p_value"))
    interval = (
        f"{_level(last)}paired bootstrap interval [{low:+.{digits}f}, {high:+.{digits}f}], p of no change {fmt(p_change, 3)}"
        if low is not None and high is not None
        else "no interval" + (": windows of different sequences" if last.get("source") == "live" else "")
    )
    return (
        f"{label} {before:.{digits}f} at step {first['step']} → {after:.{digits}f} at step {last['step']}: "
        f"{change:+.{digits}f} ({interval})"
    )


def change_sentence(first: Mapping[str, Any], last: Mapping[str, Any]) -> str | None:
    """What training added between a curve's first and last rows, in words (None when the rows have no change).

    Args:
        first: The curve's first row (the change's reference, `change_reference_step`).
        last: Its last row, with the change columns of `results.change`.

    Returns:
        E.g. "What training added: energy ratio 1.82 at step 0 → 16.30 at step 60: +14.48 (95 % paired bootstrap
        interval [+9.10, +20.20], p of no change 0.001); energy share ...; anisotropy share ... (no interval)."
    """
    parts = [
        _changed(name, name.replace("_", " "), first, last, digits)
        for name, digits in (("energy_ratio", 2), ("energy_share", 4), ("anisotropy_share", 3))
    ]
    found = [part for part in parts if part is not None]
    if not found or last["step"] == first["step"]:
        return None
    return f"What training added: {'; '.join(found)}."


def probe_lines(fields: Mapping[str, Any]) -> list[str]:
    """One probe's finding in words (what ``print(ProbeResult)`` opens with), from its fields.

    Args:
        fields: A `ProbeResult`'s fields by name (``vars(result)`` or ``result.to_dict()``), or a sweep row.

    Returns:
        Lines: the energy share against chance and the controls with its interval, the ratio, the exact and the
        approximate p-values, the anisotropy share with its p-value and its sign's meaning, and the caveat.
    """
    share, ratio = number(fields.get("energy_share")), number(fields.get("energy_ratio"))
    n_controls, n_random = _draws(fields, "control_energy_shares"), _draws(fields, "random_energy_shares")
    lines = [
        f"Finding: the tangent holds {fmt(share, 4)} of the gradient energy ({_interval(fields)}), against "
        f"{fmt(number(fields.get('chance')), 4)} by chance (k/d) and {fmt(number(fields.get('control_mean')), 4)} "
        f"for its {n_controls} normal controls on average: an energy ratio of {fmt(ratio)}.",
        f"p_value_exact = {fmt(number(fields.get('p_value_exact')), 3)} (rank among {n_random} uniformly random "
        f"subspaces, exact; at least 1/{n_random + 1}); p_value = {fmt(number(fields.get('p_value')), 3)} "
        f"(rank among the normal controls, approximate).",
    ]
    aniso = number(fields.get("anisotropy_share"))
    if aniso is not None:
        p_aniso, exact = anisotropy_p_value(fields)
        kind = "exact" if exact else "approximate: the paper's normal-control p"
        lines.append(f"Anisotropy share {aniso:+.3f} (p = {fmt(p_aniso, 3)}, {kind}) is {sign_meaning(aniso)}.")
    return [*lines, CAVEAT]
