# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`SweepResult`: the table a checkpoint sweep produces, one row per (checkpoint, split point, tangent).

Row schema (every row is a flat JSON object; lists only for the per-control arrays):

- identity: ``step`` (int), ``checkpoint`` (name, e.g. "step-20"), ``source``, ``revision``,
  ``split_point`` (module path), ``tangent`` ("early": the reference fitted on early checkpoints;
  "each": refitted on this checkpoint; "given": a user subspace);
- every `ProbeResult` field by name (``energy_share``, ``control_energy_shares``, ``p_value``, ...);
- ``activation_*``: `ia.metrics.summary` of the checkpoint's activations on the fit texts;
- ``freq_distance_pearson``, ``freq_distance_spearman``, ``freq_distance_p_value``, ``freq_distance_n``:
  correlation between log token frequency and distance to the activation centroid;
- ``on_manifold_entropy``: Kozachenko-Leonenko entropy of the activations' coordinates in the tangent;
- ``drift_reference_mean_angle`` / ``_max_angle`` and ``drift_previous_mean_angle`` / ``_max_angle``: principal
  angles (radians) between this checkpoint's own tangent and the reference / the previous checkpoint's
  (None for the first checkpoint);
- ``wall_seconds``: time spent on the checkpoint;
- ``fingerprint``: the checkpoint's content fingerprint (`sweeps.fingerprints`), which a resume checks.

A checkpoint skipped by a sweep with ``skip_bad_checkpoints=True`` has rows with its identity and ``skipped`` (why)
only; `SweepResult` keeps them apart, in ``skipped``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..commons.json_files import load_json, parse_json, read_text, read_whole_lines
from ..errors import CheckpointError, EmptyInputError, InvalidInputError, ResultsStoreError
from .multiple_testing import Correction, adjust
from .token_files import read_top_tokens, saved_steps

__all__ = ["SweepResult", "ROWS_FILE", "CONFIG_FILE", "is_skipped"]

#: The rows of a sweep, one JSON object a line, in its results directory.
ROWS_FILE = "rows.jsonl"
#: The settings of a sweep (what a resume must match), in its results directory.
CONFIG_FILE = "config.json"


@dataclass
class SweepResult:
    """The rows of a checkpoint sweep and the settings that produced them.

    Attributes:
        rows: One dict per (checkpoint, split point, tangent), sorted by step (schema in the module docstring).
        config: The sweep's settings (as in ``config.json``).
        results_dir: Where the sweep wrote its files, if anywhere.
        skipped: The rows of checkpoints the sweep skipped (identity and ``skipped``: why), sorted by step.

    Examples:
        >>> table = ia.SweepResult.load("runs/toy/sweep")
        >>> table.column("energy_ratio")
    """

    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    results_dir: Path | None = None
    skipped: list[dict[str, Any]] = field(default_factory=list)

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.rows)

    def select(self, *, tangent: str | None = None, split_point: int | str | None = None) -> SweepResult:
        """The rows of one tangent kind and/or one split point, as a new `SweepResult`.

        A split point is named by its module path (the rows' `split_point`, e.g. "gpt_neox.layers.1") or by the
        label the sweep was given (the rows' `layer`, e.g. 1): both name the same rows.
        """
        rows = [
            row
            for row in self.rows
            if (tangent is None or row.get("tangent") == tangent)
            and (split_point is None or str(split_point) in (str(row.get("split_point")), str(row.get("layer"))))
        ]
        return SweepResult(rows, self.config, self.results_dir, self.skipped)

    def adjusted(
        self, correction: str = "holm", *, family: str = "split_point_and_tangent", column: str | None = None
    ) -> SweepResult:
        """A copy whose rows carry p-values adjusted for multiple testing, in ``{column}_{correction}``.

        Args:
            correction: "holm" (family-wise error rate) or "bh" (Benjamini-Hochberg, false discovery rate); see
                `interpreto_anisotropy.sweeps.multiple_testing`.
            family: Which rows are adjusted together: "split_point_and_tangent" (one curve over training),
                "split_point", "tangent" or "all".
            column: The p-value field; by default "p_value_exact" when the rows have it, else "p_value".

        Returns:
            A `SweepResult` with the same rows plus the adjusted field (None where a row has no p-value).

        Examples:
            >>> table.adjusted("bh", family="all").column("p_value_bh")  # doctest: +SKIP
        """
        if column is None:
            column = "p_value_exact" if any("p_value_exact" in row for row in self.rows) else "p_value"
        values = adjust(self.rows, column=column, correction=correction, family=family)
        name = f"{column}_{Correction(correction).value}"
        rows = [{**row, name: value} for row, value in zip(self.rows, values, strict=True)]
        return SweepResult(rows, self.config, self.results_dir, self.skipped)

    def column(self, name: str) -> list[Any]:
        """The values of one field, row by row (None where a row lacks it)."""
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

    # ------------------------------------------------------------------ export
    def scalar_columns(self) -> list[str]:
        """Fields whose values are scalars in every row (the CSV columns), in first-seen order."""
        names: dict[str, None] = {}
        for row in self.rows:
            for key, value in row.items():
                if not isinstance(value, (list, dict)):
                    names.setdefault(key, None)
        return list(names)

    def to_csv(self, path: str | Path) -> Path:
        """Write the scalar columns to a CSV file, atomically (per-control arrays are left to `to_json`).

        Returns:
            The path written.
        """
        columns = self.scalar_columns()
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
        return write_atomically(path, text.getvalue())

    def to_json(self, path: str | Path | None = None) -> str:
        """The rows and config as JSON; also written to `path` when given."""
        text = json.dumps(
            {"config": self.config, "rows": self.rows, "skipped": self.skipped}, indent=1, default=_json_default
        )
        if path is not None:
            write_atomically(path, text)
        return text

    def to_frame(self):
        """The rows as a pandas DataFrame (needs the `pandas` extra)."""
        try:
            import pandas as pd
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("to_frame needs pandas: pip install 'interpreto-anisotropy[pandas]'.") from error
        return pd.DataFrame(self.rows)

    # ------------------------------------------------------------------ figures and report
    def plot(self, **kwargs: Any):
        """Matplotlib figures of the sweep (see `interpreto_anisotropy.visualizations.plotting.plot_sweep`)."""
        from ..visualizations.plotting import plot_sweep

        return plot_sweep(self, **kwargs)

    def report(self, out_dir: str | Path, **kwargs: Any) -> Path:
        """Write a self-contained HTML report (figures, table, settings); returns the HTML file's path."""
        from ..visualizations.report import write_report

        return write_report(self, out_dir, **kwargs)

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(cls, results_dir: str | Path) -> SweepResult:
        """Read a finished or partial sweep from its results directory.

        Raises:
            InvalidInputError: `results_dir` is not a path.
            CheckpointError: The folder holds no config.json.
            ResultsStoreError: A damaged config.json or rows.jsonl, naming the file (and the line).
        """
        if not isinstance(results_dir, (str, os.PathLike)):
            raise InvalidInputError(f"results_dir must be a folder path, got {type(results_dir).__name__}.")
        results_dir = Path(results_dir)
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

        For each direction of the early (or given) tangent and of the checkpoint's own tangent: the distinct tokens
        of the checkpoint's fit texts that lie furthest along it, at both ends (a direction's sign is arbitrary),
        with some context (`interpreto_anisotropy.tangents.top_tokens`).

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
        saved = set(saved_steps(self.results_dir, layer))
        steps = [step] if step is not None else sorted({row["step"] for row in rows} & saved, reverse=True)
        for chosen in steps:
            found = read_top_tokens(self.results_dir, layer, chosen)
            if found is not None:
                return found
        return None

    def summary_table(self) -> str:
        """A short plain-text table: step, split point, tangent, E_T, controls mean, ratio, both p-values, the
        tangent's and the controls' Delta IsoScore* and the anisotropy share; then the skipped checkpoints."""
        if not self.rows:
            raise EmptyInputError("The sweep has no finished checkpoint yet.")
        header = (
            f"{'step':>8}  {'split point':<22} {'tangent':<7} {'E_T':>7} {'E_N':>7} {'ratio':>7} {'p':>6} "
            f"{'p_exact':>7}  {'dIso*_T':>8} {'dIso*_N':>8} {'aniso':>7}"
        )
        lines = [header, "-" * len(header)]
        for row in self.rows:
            controls = row.get("delta_isoscore_star_controls") or []
            delta_controls = sum(controls) / len(controls) if controls else math.nan
            lines.append(
                f"{row['step']:>8}  {str(row.get('split_point'))[-22:]:<22} {row.get('tangent', ''):<7} "
                f"{_f(row.get('energy_share'))} {_f(row.get('control_mean'))} {_f(row.get('energy_ratio'), 2)} "
                f"{_f(row.get('p_value'), 3, 6)} {_f(row.get('p_value_exact'), 3, 7)}  "
                f"{_f(row.get('delta_isoscore_star'), 4, 8)} {_f(delta_controls, 4, 8)} "
                f"{_f(row.get('anisotropy_share'), 4, 7)}"
            )
        for row in self.skipped:
            lines.append(
                f"{row['step']:>8}  {str(row.get('split_point'))[-22:]:<22} {row.get('tangent', ''):<7} skipped: {row['skipped'][:200]}"
            )
        return "\n".join(lines)

    def summary(self, *, correction: str | None = None, family: str | None = None, level: float | None = None) -> str:
        """What the sweep found, in words and numbers: the verdict of `interpreto_anisotropy.sweeps.verdict`.

        Per split point and tangent kind: the peak and last energy ratio with their steps, how many checkpoints are
        significant once the exact p-values are adjusted (what the p-value floor forbids, and the draws it needs),
        the last anisotropy share with its p-value and its sign's meaning; then the correction and family used
        and what alignment does not show. The same text ends the CLI's output and opens the HTML report.

        Args:
            correction: "holm" or "bh"; default: the config's, else "holm".
            family: The rows adjusted together (`multiple_testing.Family` value); default: the config's, else
                each curve.
            level: The significance level; default: the config's, else 0.05.

        Raises:
            EmptyInputError: The sweep has no finished checkpoint yet.

        Examples:
            >>> print(table.summary())  # doctest: +SKIP
        """
        from .verdict import sweep_verdict, verdict_text

        if not self.rows:
            raise EmptyInputError("The sweep has no finished checkpoint yet.")
        return verdict_text(sweep_verdict(self.rows, self.config, correction=correction, family=family, level=level))

    def __repr__(self) -> str:
        return f"SweepResult({len(self.rows)} rows, steps {sorted(set(self.steps))}, tangents {self.tangents})"


def _f(value: Any, digits: int = 4, width: int = 7) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f"{'-':>{width}}"
    return f"{value:>{width}.{digits}f}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def read_rows(path: Path, *, appended: bool = False) -> list[dict[str, Any]]:
    """Rows of a ``rows.jsonl`` file (empty when it does not exist), each checked (`row_problem`).

    Args:
        path: The file.
        appended: The file grows by appends while it is read (a live probe's): an unterminated last line is a row
            still being written, or one its writer was killed writing (the next live run cuts it). It is left out,
            with a warning, instead of refused.

    Raises:
        ResultsStoreError: A file too large or not UTF-8, or a line that is not a sweep row (not JSON, nested too
            deep, a `step` that is not an integer in [0, 10**15), a `layer` naming a path or holding markup,
            a number field holding something else), naming the file and the line.
    """
    if not path.exists():
        return []
    text = _whole_lines(path) if appended else read_text(path)
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn = number == len(lines) and not text.endswith("\n")
        cut = " (an interrupted or edited last line)" if torn else ""
        fix = "delete that line (a resume recomputes its checkpoint), or rerun with overwrite=True."
        try:
            row = parse_json(line, path, line=number)
        except ResultsStoreError:
            raise ResultsStoreError(f"Line {number} of {path} is not a sweep row{cut}: {fix}") from None
        problem = row_problem(row)
        if problem is not None:
            raise ResultsStoreError(f"Line {number} of {path} is not a sweep row{cut}: {fix} Found: {problem}.")
        rows.append(row)
    return rows


def _whole_lines(path: Path) -> str:
    """The file's text up to its last newline; warns when an unterminated tail was left out."""
    whole, cut = read_whole_lines(path)
    if cut:
        warnings.warn(
            f"The last line of {path} is unterminated: a live probe is appending it, or was stopped while writing "
            "it (the next live run into this folder removes it). The rows before it are read; it is left out.",
            stacklevel=4,
        )
    return whole


#: Steps are below this (a crafted step of 10**30 is refused, not carried into file names and tensors).
MAX_STEP = 10**15
#: The fields of a row that hold a number (or null), and those that hold a list of numbers (or nulls).
NUMBER_FIELDS = (
    "energy_share", "control_mean", "energy_ratio", "p_value", "p_value_exact", "ci_low", "ci_high", "chance",
    "analytic_null", "oracle_energy_share", "anisotropy_capture", "anisotropy_share", "delta_isoscore_star",
    "rank", "dim", "wall_seconds", "drift_reference_mean_angle", "drift_reference_max_angle",
    "drift_previous_mean_angle", "drift_previous_max_angle",
)  # fmt: skip
NUMBER_LIST_FIELDS = ("control_energy_shares", "random_energy_shares", "delta_isoscore_star_controls")
_NAME_FIELDS = ("split_point", "tangent", "checkpoint")
_MARKUP = set("<>") | {chr(code) for code in range(32)}
_LAYER = _MARKUP | set("\"'&`/\\")  # a layer also names files and folders


def row_problem(row: Any) -> str | None:
    """What makes `row` no sweep row, None when it is one.

    A row is a JSON object with a `step` (an integer in [0, `MAX_STEP`)), a `layer` (an integer, or a name that
    is no path and holds no markup: it names files), names (`split_point`, `tangent`, `checkpoint`) that are
    strings without markup, numbers (or nulls) in `NUMBER_FIELDS`, lists of them in `NUMBER_LIST_FIELDS`.
    """
    if not isinstance(row, dict):
        return "not a JSON object"
    if not _is_step(row.get("step")):
        return f"step {_shown(row.get('step'))} is not an integer in [0, 10**15)"
    if "layer" not in row:
        return "no layer"
    problem = _name_problem(row["layer"], allow_int=True, forbidden=_LAYER)
    if problem:
        return f"layer {_shown(row['layer'])} {problem}"
    for name in _NAME_FIELDS:
        problem = _name_problem(row.get(name), allow_int=False, forbidden=_MARKUP) if name in row else None
        if problem and row[name] is not None:
            return f"{name} {_shown(row[name])} {problem}"
    for name in NUMBER_FIELDS:
        if not _is_number(row.get(name)):
            return f"{name} {_shown(row[name])} is not a number"
    for name in NUMBER_LIST_FIELDS:
        value = row.get(name)
        if value is not None and not (isinstance(value, list) and all(map(_is_number, value))):
            return f"{name} is not a list of numbers"
    return None


def _name_problem(value: Any, *, allow_int: bool, forbidden: set[str]) -> str | None:
    """Why `value` cannot name a split point, a tangent kind or a checkpoint (None when it can)."""
    if allow_int and isinstance(value, int) and not isinstance(value, bool):
        return None
    if not isinstance(value, str):
        return "is not a string" + (" or an integer" if allow_int else "")
    if not value.strip() or value in (".", "..") or forbidden & set(value):
        return "is empty, a path, or holds markup or control characters"
    return None


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_step(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_STEP


def is_skipped(row: dict[str, Any]) -> bool:
    """Whether a row records a checkpoint the sweep skipped (it holds why, not numbers)."""
    return bool(row.get("skipped"))


def row_key(row: dict[str, Any]) -> tuple[int, str, str]:
    """A row's identity in its sweep: (step, split point as given, tangent kind)."""
    return row["step"], str(row["layer"]), str(row.get("tangent", "early"))


def check_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Refuse rows that a sweep cannot have written together: one key twice, or different numbers of controls.

    Raises:
        ResultsStoreError: Naming the file and the rows.
    """
    seen: set[tuple[int, str, str]] = set()
    duplicates = sorted({row_key(row) for row in rows if row_key(row) in seen or seen.add(row_key(row))})
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


def read_config(path: Path) -> dict[str, Any]:
    """A sweep's ``config.json``.

    Raises:
        ResultsStoreError: An unreadable or malformed file, naming it.
    """
    advice = "Rerun the sweep with overwrite=True to start afresh."
    try:
        config = load_json(path, advice=advice)
    except ResultsStoreError as error:
        raise ResultsStoreError(f"{path} is not a readable sweep config: {error}") from None
    if not isinstance(config, dict):
        raise ResultsStoreError(f"{path} is not a sweep config. Rerun the sweep with overwrite=True to start afresh.")
    return config


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by step, then split point, then tangent kind."""
    order = {"early": 0, "given": 1, "each": 2}
    return sorted(rows, key=lambda row: (row["step"], str(row.get("split_point")), order.get(row.get("tangent"), 3)))
