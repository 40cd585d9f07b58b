# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`SweepResult`: the rows of a sweep (or a live probe), one per (checkpoint, split point, tangent)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..commons.files import write_atomically
from ..commons.options import check_folder
from ..commons.progress import html_table, number, short_repr
from ..errors import CheckpointError, InvalidInputError
from .records import read_top_tokens, saved_steps
from .schema import CONFIG_FILE, ROWS_FILE, check_rows, describe, is_skipped, read_config, read_rows, sort_rows
from .verdict import Correction, adjust, adjusted_by, adjusted_p_values, p_value_column, sweep_verdict, verdict_text


@dataclass
class SweepResult:
    """The rows of a checkpoint sweep and the settings that produced them.

    Attributes:
        rows: One dict per (checkpoint, split point, tangent), sorted by step, as in ``rows.jsonl``.
        config: The sweep's settings (as in ``config.json``).
        results_dir: Where the sweep wrote its files, if anywhere.
        skipped: The rows of checkpoints the sweep skipped (identity and ``skipped``: why), sorted by step.

    Examples:
        >>> table = ia.SweepResult.load("runs/toy/sweep")
        >>> table.select(tangent="early", step=[0, 20]).to_frame()[["step", "energy_ratio"]]
        >>> table.adjusted("holm").column("p_value_exact_holm")
    """

    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    results_dir: Path | None = None
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame, a column per field (NaN where a row lacks it; per-control lists stay lists)."""
        return pd.DataFrame(self.rows, index=pd.RangeIndex(len(self.rows)))

    def select(self, **columns: Any) -> SweepResult:
        """The rows whose columns hold the values given, as a new `SweepResult`.

        Args:
            **columns: Column name to the value wanted, or to several (a list, tuple, set or range: any of them);
                None selects on nothing. A split point is named by its module path (the rows' `split_point`, e.g.
                "gpt_neox.layers.1") or by the label the sweep was given (the rows' `layer`, e.g. 1).

        Raises:
            InvalidInputError: A column that neither the rows nor the row schema have.

        Examples:
            >>> table.select(split_point=1, tangent="early", step=range(0, 100))  # doctest: +SKIP
        """
        frame, keep = self.to_frame(), pd.Series(True, index=pd.RangeIndex(len(self.rows)))
        for name, wanted in columns.items():
            if wanted is None:
                continue
            values = list(wanted) if isinstance(wanted, (list, tuple, set, range)) else [wanted]
            if name == "split_point":  # by path or by label, compared as text
                names = [column for column in ("split_point", "layer") if column in frame]
                keep &= frame[names].astype(str).isin([str(value) for value in values]).any(axis=1)
            elif name in frame:
                keep &= frame[name].isin(values)
            elif describe(name) is None and self.rows:
                raise InvalidInputError(
                    f"select({name}=...): the rows have no column {name!r}; they have {', '.join(frame.columns)}."
                )
            else:  # a declared column these rows lack
                keep &= False
        return replace(self, rows=[row for row, kept in zip(self.rows, keep, strict=True) if kept])

    def adjusted(
        self, correction: str = "holm", *, family: str = "split_point_and_tangent", column: str | None = None
    ) -> SweepResult:
        """A copy whose rows carry p-values adjusted for multiple testing, in ``{column}_{correction}``.

        Args:
            correction: "holm" (family-wise error rate) or "bh" (Benjamini-Hochberg, false discovery rate).
            family: The rows adjusted together: "split_point_and_tangent" (a curve), "split_point", "tangent", "all".
            column: The p-value field; by default "p_value_exact" when the rows have it, else "p_value".

        Returns:
            A `SweepResult` with the same rows plus the adjusted field (None where a row has no p-value).

        Examples:
            >>> table.adjusted("bh", family="all").column("p_value_bh")  # doctest: +SKIP
        """
        column = column or p_value_column(self.rows)
        values = adjust(self.to_frame(), column=column, correction=correction, family=family)
        name = f"{column}_{Correction(correction).value}"
        return replace(self, rows=[{**row, name: value} for row, value in zip(self.rows, values, strict=True)])

    def column(self, name: str) -> list[Any]:
        """The values of one field, row by row, as written (None where a row lacks it)."""
        return [row.get(name) for row in self.rows]

    @property
    def steps(self) -> list[int]:
        """Steps of the rows, in row order."""
        return [int(row["step"]) for row in self.rows]

    @property
    def tangents(self) -> list[str]:
        """The tangent kinds present ("early", "each", "given"), in order of appearance."""
        return list(dict.fromkeys(row.get("tangent", "early") for row in self.rows))

    @property
    def split_points(self) -> list[str]:
        """The split points present, in order of appearance."""
        return list(dict.fromkeys(row.get("split_point") for row in self.rows))

    def scalar_columns(self) -> list[str]:
        """Fields whose values are scalars in every row (the CSV columns), in first-seen order."""
        scalar = (key for row in self.rows for key, value in row.items() if not isinstance(value, (list, dict)))
        return list(dict.fromkeys(scalar))

    def to_csv(self, path: str | Path) -> Path:
        """Write the scalar columns to a CSV file, atomically (per-control arrays are left to `to_json`).

        Returns:
            The path written.
        """
        frame = pd.DataFrame(self.rows, columns=self.scalar_columns(), dtype=object)  # ints stay ints
        return write_atomically(path, frame.to_csv(index=False, lineterminator="\r\n"))

    def to_json(self, path: str | Path | None = None) -> str:
        """The rows and config as JSON; also written to `path` when given."""
        content = {"config": self.config, "rows": self.rows, "skipped": self.skipped}
        text = json.dumps(
            content, indent=1, default=lambda value: value.tolist() if hasattr(value, "tolist") else str(value)
        )
        if path is not None:
            write_atomically(path, text)
        return text

    @classmethod
    def load(cls, results_dir: str | Path) -> SweepResult:
        """Read a finished or partial sweep from its results directory.

        Raises:
            InvalidInputError: `results_dir` is not a path.
            CheckpointError: The folder holds no config.json.
            ResultsStoreError: A damaged config.json or rows.jsonl, naming the file (and the line).
        """
        results_dir = check_folder("results_dir", results_dir)
        if not (results_dir / CONFIG_FILE).exists():
            raise CheckpointError(
                f"{results_dir} holds no {CONFIG_FILE}: it is not a sweep's results directory "
                "(run `interpreto-anisotropy sweep ... --out DIR` first)."
            )
        config = read_config(results_dir / CONFIG_FILE)
        rows = read_rows(results_dir / ROWS_FILE, appended=bool(config.get("live")))
        check_rows(rows, results_dir / ROWS_FILE)
        computed = [row for row in rows if not is_skipped(row)]
        skipped = [row for row in rows if is_skipped(row)]
        return cls(sort_rows(computed), config, results_dir, sort_rows(skipped))

    def top_tokens(self, split_point: int | str | None = None, *, step: int | None = None) -> dict[str, Any] | None:
        """The top-activating tokens of every tangent direction at one checkpoint, as the sweep saved them.

        Args:
            split_point: The split point, as given to the sweep (e.g. 1) or as a module path; default: the first.
            step: The checkpoint's step; default: the last step of the rows whose top tokens are saved.

        Returns:
            {"step", "layer", "split_point", "n_rows", "tangents": {kind: [`DirectionTokens`, ...]}}, or None when
            none are saved (results written before top tokens were, or a table not loaded from a folder).

        Raises:
            ResultsStoreError: A top-tokens file that cannot be read.

        Examples:
            >>> found = table.top_tokens(1)  # doctest: +SKIP
            >>> [token.token for token in found["tangents"]["early"][0].high]  # doctest: +SKIP
        """
        rows = self.select(split_point=split_point).rows if split_point is not None else self.rows
        if self.results_dir is None or not rows:
            return None
        layer = rows[0].get("layer", split_point)
        saved = {row["step"] for row in rows} & set(saved_steps(self.results_dir, layer))
        chosen = step if step is not None else max(saved, default=None)
        return None if chosen is None else read_top_tokens(self.results_dir, layer, chosen)

    def summary_table(self) -> str:
        """A short plain-text table of the headline numbers (the verdict's p: ``p_adj``), then the skipped
        checkpoints and what the p columns are."""
        if not self.rows:
            raise InvalidInputError("The sweep has no finished checkpoint yet.")
        header = (
            f"{'step':>8}  {'split point':<22} {'tangent':<7} {'E_T':>7} {'E_N':>7} {'ratio':>7} {'p_adj':>7} "
            f"{'p_exact':>7}  {'dIso*_T':>8} {'dIso*_N':>8} {'aniso':>7} {'p_aniso':>7}  {'p_approx':>8}"
        )
        lines = [header, "-" * len(header)]
        for row, adjusted in zip(self.rows, adjusted_p_values(self.rows, self.config), strict=True):
            controls = row.get("delta_isoscore_star_controls") or []
            delta_controls = sum(controls) / len(controls) if controls else math.nan
            lines.append(
                f"{row['step']:>8}  {str(row.get('split_point'))[-22:]:<22} {row.get('tangent', ''):<7} "
                f"{_f(row.get('energy_share'))} {_f(row.get('control_mean'))} {_f(row.get('energy_ratio'), 2)} "
                f"{_f(adjusted, 4, 7)} {_f(row.get('p_value_exact'), 4, 7)}  "
                f"{_f(row.get('delta_isoscore_star'), 4, 8)} {_f(delta_controls, 4, 8)} "
                f"{_f(row.get('anisotropy_share'), 4, 7)} {_f(row.get('anisotropy_p_value_exact'), 4, 7)}  "
                f"{_f(row.get('p_value'), 4, 8)}"
            )
        lines += [
            f"{row['step']:>8}  {str(row.get('split_point'))[-22:]:<22} {row.get('tangent', ''):<7} skipped: {row['skipped'][:200]}"
            for row in self.skipped
        ]
        adjusted, level = adjusted_by(self.rows, self.config)
        lines.append(
            f"p_adj: {adjusted}, significant at <= {level:g}; p_aniso: anisotropy_p_value_exact; p_approx: "
            "approximate p (normal controls; anti-conservative)."
        )
        return "\n".join(lines)

    def summary(self, *, correction: str | None = None, family: str | None = None, level: float | None = None) -> str:
        """What the sweep found, in words and numbers (`results.verdict`), as the CLI and the report say it.

        Args:
            correction: "holm" or "bh"; default: the config's, else "holm".
            family: The rows adjusted together (`verdict.Family` value); default: the config's, else each curve.
            level: The significance level; default: the config's, else 0.05.

        Raises:
            InvalidInputError: The sweep has no finished checkpoint yet.

        Examples:
            >>> print(table.summary())  # doctest: +SKIP
        """
        if not self.rows:
            raise InvalidInputError("The sweep has no finished checkpoint yet.")
        return verdict_text(sweep_verdict(self.rows, self.config, correction=correction, family=family, level=level))

    def __repr__(self) -> str:
        """Counts, the steps' range, and each curve's last row: E_T against its controls and the exact p-values."""
        steps = sorted(set(self.steps))
        shown = [
            ("rows", len(self.rows)),
            ("checkpoints", len(steps)),
            ("steps", f"{steps[0]}..{steps[-1]}" if steps else "none"),
            ("skipped", len(self.skipped)),
            ("results_dir", None if self.results_dir is None else str(self.results_dir)),
        ]
        by_step = sorted(self.rows, key=lambda row: row["step"])
        last_rows = {(row.get("split_point"), row.get("tangent")): row for row in by_step}  # each curve's last row
        last = [
            f"last of {row.get('split_point')}/{row.get('tangent')}: step={row['step']}, "
            + ", ".join(f"{name}={number(row.get(name))}" for name in _CURVE_HEADLINE)
            for row in list(last_rows.values())[:_CURVES_SHOWN]
        ]
        more = len(last_rows) - _CURVES_SHOWN
        return short_repr("SweepResult", shown, tail=last + ([f"{more} more curves"] if more > 0 else []))

    def _repr_html_(self) -> str:
        """The rows' headline numbers as a table (the first and last `_HTML_ROWS` // 2 rows of a long sweep)."""
        steps = sorted(set(self.steps))
        title = (
            f"SweepResult: {len(self.rows)} rows, {len(steps)} checkpoints"
            + (f" (steps {steps[0]} to {steps[-1]})" if steps else "")
            + (f", in {self.results_dir}" if self.results_dir is not None else "")
        )
        cells = [
            {**row, _ADJUSTED: adjusted, _APPROXIMATE: row.get("p_value")}
            for row, adjusted in zip(self.rows, adjusted_p_values(self.rows, self.config), strict=True)
        ]
        rows = [
            [row.get(name) if name in _IDENTITY else number(row.get(name)) for name in _HTML_COLUMNS] for row in cells
        ]
        if len(rows) > _HTML_ROWS:
            half = _HTML_ROWS // 2
            gap = [f"... {len(rows) - 2 * half} rows ...", *[""] * (len(_HTML_COLUMNS) - 1)]
            rows = [*rows[:half], gap, *rows[-half:]]
        skipped = [
            f"step {row['step']} ({row.get('checkpoint')}) skipped: {row['skipped'][:200]}" for row in self.skipped
        ]
        adjusted, level = adjusted_by(self.rows, self.config)
        note = f"{_ADJUSTED}: {adjusted}; a row is significant at or below {level:g}."
        return html_table(title, _HTML_COLUMNS, rows, notes=[note, *skipped])


#: What the repr says of each curve's last row, how many curves it names, and the notebook table's columns and rows.
_CURVE_HEADLINE = ("energy_share", "control_mean", "p_value_exact", "anisotropy_share")
_CURVES_SHOWN = 3
_IDENTITY = ("step", "checkpoint", "split_point", "tangent")
#: The notebook table's headers of the verdict's p-value (exact, adjusted within its family) and of the approximate p.
_ADJUSTED = "p (exact, adjusted)"
_APPROXIMATE = "approximate p (normal controls; anti-conservative)"
_HTML_COLUMNS = (*_IDENTITY, "rank", "n_tokens", "energy_share", "control_mean", "energy_ratio", _ADJUSTED)
_HTML_COLUMNS += ("p_value_exact", "anisotropy_share", "anisotropy_p_value_exact", _APPROXIMATE)
_HTML_ROWS = 40


def _f(value: Any, digits: int = 4, width: int = 7) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f"{'-':>{width}}"
    return f"{value:>{width}.{digits}f}"
