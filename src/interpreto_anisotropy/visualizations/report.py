# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A self-contained HTML report of a sweep (Jinja2 templates of ``templates/``, autoescaped, through `render`), and
the ``rows.columns.csv`` that says what each column of ``rows.csv`` means (`write_column_notes`).

Examples:
    >>> table = ia.SweepResult.load("runs/toy/sweep")
    >>> write_report(table, "runs/toy/report")       # also ia.write_report
    PosixPath('runs/toy/report/index.html')
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from ..commons.files import write_atomically
from ..commons.options import check_folder, check_positive_int
from ..errors import InvalidInputError
from ..probing.result import number as _number
from ..results.records import PROVENANCE_FILE, software_versions, versions_of_rows
from ..results.schema import TANGENT_KINDS, describe
from ..results.verdict import (
    FAMILY_NAMES,
    Correction,
    Family,
    Verdict,
    curve_sentences,
    method_sentence,
    sweep_verdict,
)
from ..version import __version__
from .model_card import model_card, model_name

if TYPE_CHECKING:  # pragma: no cover
    from ..results.table import SweepResult

__all__ = [
    "write_report",
    "KEY_COLUMNS",
    "REPORT_FILE",
    "FIGURES_DIR",
    "CSV_FILE",
    "COLUMNS_CSV_FILE",
    "render",
    "top_tokens_section",
    "write_column_notes",
]

#: The report's HTML page, in the report folder.
REPORT_FILE = "index.html"
#: The folder of the report's PNG figures, in the report folder.
FIGURES_DIR = "figures"
#: The CSV file of the rows' scalar columns, in the report folder.
CSV_FILE = "rows.csv"

#: Table columns shown first, in this order, then the other scalar columns; the p-values (`_columns`) follow
#: "energy_ratio". "ci" ([ci_low, ci_high]) and "delta_isoscore_star_controls_mean" are derived (`_cell`).
KEY_COLUMNS: tuple[str, ...] = tuple(
    """step split_point tangent energy_share ci control_mean analytic_null chance energy_ratio z_score
    oracle_energy_share anisotropy_capture anisotropy_share anisotropy_p_value_exact delta_isoscore_star
    delta_isoscore_star_controls_mean p_value anisotropy_share_p_value delta_isoscore_star_p_value loss
    activation_isoscore activation_isoscore_star activation_mean_cosine activation_effective_rank""".split()
)

#: What the header of a p-value column says under its name (the approximate ones are secondary).
_P_LABELS = {
    **dict.fromkeys(
        ("p_value", "anisotropy_share_p_value", "delta_isoscore_star_p_value"),
        "approximate p (normal controls; anti-conservative)",
    ),
    "p_value_exact": "exact p, before adjustment",
    "anisotropy_p_value_exact": "exact p of the anisotropy share, before adjustment",
}


def write_report(
    result: SweepResult,
    out_dir: str | Path,
    *,
    title: str | None = None,
    dpi: int = 110,
    live: SweepResult | None = None,
) -> Path:
    """Write a self-contained HTML report of a sweep: figures, table of rows and settings (``index.html`` last).

    Args:
        result: The sweep (finished or partial: the report shows the rows finished so far).
        out_dir: Folder of the report.
        title: Page title (default: "Checkpoint sweep report" and the model's name: a hub id, or the folder that
            holds the local checkpoints).
        dpi: Resolution of the PNG figures.
        live: The rows of a live probe of the same training (`TrainingProbe`'s results directory): a figure draws
            its curve next to the sweep's (`visualizations.plotting.plot_live_vs_sweep`).

    Returns:
        The path of ``index.html``.

    Raises:
        InvalidInputError: If the sweep has no row yet (no finished checkpoint).
        InvalidInputError: If `out_dir` is not a path, or it or a folder above it is an existing file; a `title`
            that is not a string, or a `dpi` that is not a positive integer.
        ResultsStoreError: If a file of the report cannot be written (a read-only folder, a full disk).

    Examples:
        >>> table = ia.SweepResult.load("runs/toy/sweep")
        >>> path = write_report(table, "runs/toy/report", title="Toy GPT-NeoX, layer 1")
        >>> path.name
        'index.html'
    """
    if not result.rows:
        raise InvalidInputError("The sweep has no finished checkpoint yet: run (or resume) it, then write the report.")
    out_dir = check_folder("out_dir", out_dir)
    if title is not None and not isinstance(title, str):
        raise InvalidInputError(f"title must be a string or None, got {type(title).__name__}.")
    check_positive_int("dpi", dpi)
    blocking = next((folder for folder in (out_dir, *out_dir.parents) if folder.exists()), None)
    if blocking is not None and not blocking.is_dir():
        where = "is a file" if blocking == out_dir else f"lies in {blocking}, which is a file"
        raise InvalidInputError(
            f"The report folder {out_dir} {where}: give the report a folder (`out_dir`, or --out of "
            "`interpreto-anisotropy report`), new or existing, not a file."
        )
    verdict = sweep_verdict(result.rows, result.config)
    for correction in Correction:  # the tested p-value only: Holm or BH of the approximate one would mislead
        result = result.adjusted(correction.value, family=verdict.family, column=verdict.p_column)
    if title is None:  # the model's name, else the results folder's
        name = model_name(result.config, result.rows)
        if name is None and result.results_dir is not None:
            name = Path(result.results_dir).name
        title = "Checkpoint sweep report" + (f": {name}" if name else "")

    from .plotting import plot_live_vs_sweep, plot_sweep

    first, *rest = plot_sweep(result).items()  # the live curve, if any, next to the energy figure
    figures = []
    for name, figure in [first, *([] if live is None else [("live", plot_live_vs_sweep(live, result))]), *rest]:
        figure.savefig(buffer := io.BytesIO(), format="png", dpi=dpi)
        figure.clear()
        write_atomically(out_dir / FIGURES_DIR / f"{name}.png", data := buffer.getvalue())
        figures.append({"name": name, "data": base64.b64encode(data).decode("ascii")})

    result.to_csv(out_dir / CSV_FILE)
    write_column_notes(out_dir / COLUMNS_CSV_FILE, result.scalar_columns())
    page = render("report.html.j2", **_context(result, verdict, title=title, figures=figures))
    return write_atomically(out_dir / REPORT_FILE, page)


# ---------------------------------------------------------------------------------------------------- values
def _format(value: Any) -> str:
    """A cell's text: floats to 4 significant digits, None and NaN as an empty cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_format, value)) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cell(row: dict[str, Any], column: str) -> Any:
    if column == "ci":
        low, high = _number(row.get("ci_low")), _number(row.get("ci_high"))
        return None if low is None or high is None else [low, high]
    if column == "delta_isoscore_star_controls_mean":
        values = [value for value in map(_number, row.get("delta_isoscore_star_controls") or []) if value is not None]
        return sum(values) / len(values) if values else None
    return row.get(column)


def _columns(result: SweepResult, verdict: Verdict) -> list[str]:
    """Key columns (those present; the tested p-value, adjusted then raw, after "energy_ratio"), then the others."""
    present = set(result.scalar_columns())
    derived = {
        "ci": "ci_low" in present or "ci_high" in present,
        "delta_isoscore_star_controls_mean": any(row.get("delta_isoscore_star_controls") for row in result.rows),
    }
    corrections = sorted((c.value for c in Correction), key=lambda name: name != verdict.correction)
    p_columns = [*(f"{verdict.p_column}_{name}" for name in corrections), verdict.p_column]
    ratio = KEY_COLUMNS.index("energy_ratio") + 1
    ordered = [*KEY_COLUMNS[:ratio], *p_columns, *KEY_COLUMNS[ratio:]]
    columns = [column for column in dict.fromkeys(ordered) if derived.get(column, column in present)]
    shown = set(columns) | {"ci_low", "ci_high"}
    return columns + [column for column in result.scalar_columns() if column not in shown]


def _column_label(column: str, verdict: Verdict) -> str:
    """What a column's header says under its name: which p-value it is ("" for the other columns)."""
    family = FAMILY_NAMES.get(verdict.family, verdict.family)
    kind = "exact" if verdict.p_column == "p_value_exact" else "approximate (no exact p in these rows)"
    for correction, method in ((Correction.HOLM, "Holm"), (Correction.BENJAMINI_HOCHBERG, "Benjamini-Hochberg")):
        if column == f"{verdict.p_column}_{correction.value}":
            first = "the p-value: " if correction.value == verdict.correction else ""
            return f"{first}{kind}, {method} {family}"
    return _P_LABELS.get(column, "")


# ---------------------------------------------------------------------------------------------------- page
def _context(
    result: SweepResult, verdict: Verdict, *, title: str, figures: Sequence[dict[str, str]]
) -> dict[str, Any]:
    """What ``templates/report.html.j2`` shows, as plain strings, lists and dicts (the template escapes them all)."""
    columns = _columns(result, verdict)
    draws = sorted({len(row["random_energy_shares"]) for row in result.rows if row.get("random_energy_shares")})
    texts = {column for column in columns if any(isinstance(row.get(column), str) for row in result.rows)}
    sentences = [curve_sentences(curve, verdict) for curve in verdict.curves]  # the verdict: a heading per curve
    return {
        "title": title,
        "finding": {
            "curves": [{"heading": heading, "sentences": rest} for heading, *rest in sentences],
            "method": method_sentence(verdict),
            "caveat": verdict.caveat,
        },
        "meta": _meta(result),
        "tangent_kinds": [
            {"name": str(kind), "definition": TANGENT_KINDS.get(str(kind), "a tangent kind of this sweep")}
            for kind in result.tangents
        ],
        "floor": ", ".join(f"{1 / (r + 1):.3g} with R' = {r}" for r in draws) or "1/(R' + 1)",
        "card": _model_card(result),
        "figures": figures,
        **_top_tokens_context(result),
        "columns": [
            {"name": name, "label": _column_label(name, verdict), "tooltip": _tooltip(name), "text": name in texts}
            for name in columns
        ],
        "rows": [{column: _format(_cell(row, column)) for column in columns} for row in result.rows],
        "definitions": [_definition(column) for column in columns],
        "testing": _multiple_testing(result, verdict),
        "skipped": [
            {key: str(row.get(key)) for key in ("step", "split_point", "tangent")} | {"reason": str(row["skipped"])}
            for row in result.skipped
        ],
        "settings": _settings(result.config),
        "versions": _versions(result),
    }


def _meta(result: SweepResult) -> str:
    """The line under the title: rows, checkpoints, split points, tangent kinds, when and from what."""
    steps = sorted(set(result.steps))
    written = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{len(result.rows)} rows from {len(steps)} checkpoint{'s' if len(steps) != 1 else ''} "
        f"(steps {', '.join(map(str, steps))}); split points: {', '.join(map(str, result.split_points))}; "
        f"tangents: {', '.join(map(str, result.tangents))} (defined below). Written {written} by "
        f"interpreto-anisotropy {__version__}{'' if result.results_dir is None else f' from {result.results_dir}'}."
    )


def _multiple_testing(result: SweepResult, verdict: Verdict) -> dict[str, Any]:
    """How many rows stay below the level once their p-values are adjusted, and why none can: the verdict's."""
    family = FAMILY_NAMES.get(verdict.family, verdict.family)
    if verdict.family == Family.SPLIT_POINT_AND_TANGENT.value:
        family = "within each curve (the rows of one split point and tangent kind)"
    curves = verdict.curves
    surviving = {c.value: sum(curve.n_surviving[c.value] for curve in curves) for c in Correction}  # holm, bh
    return {
        "column": verdict.p_column,
        "level": f"{verdict.level:g}",
        "family": family[:1].upper() + family[1:],
        "tested": sum(curve.n_tested for curve in curves),
        "raw": sum(curve.n_raw for curve in curves),
        **surviving,
        "note": "".join(f" {note}" for note in dict.fromkeys(curve.resolution for curve in curves) if note),
    }


def _settings(config: dict[str, Any]) -> list[dict[str, str]]:
    """The sweep's settings, one line each: checkpoint and step lists summarised, other lists and dicts as JSON."""
    settings = []
    for key, value in config.items():
        if key == "checkpoints" and isinstance(value, list):
            text = _checkpoints_summary(value)
        elif key.endswith("steps") and isinstance(value, list) and all(isinstance(step, int) for step in value):
            text = _steps_summary(value)
        elif isinstance(value, (dict, list, tuple)):
            text = json.dumps(value, default=str, ensure_ascii=False)
        else:
            text = _format(value) if isinstance(value, float) else str(value)
        settings.append({"key": str(key), "value": text})
    return settings


def _steps_summary(steps: Sequence[int], noun: str = "step", shown: int = 4) -> str:
    """ "n steps, a to b: s1, s2, ..., s_n", listing the first and last few steps only."""
    if not steps:
        return f"no {noun}"
    listed = ", ".join(map(str, steps if len(steps) <= 2 * shown else [*steps[:shown], "...", *steps[-shown:]]))
    return f"{len(steps)} {noun}{'s' if len(steps) != 1 else ''}, steps {min(steps)} to {max(steps)}: {listed}"


def _checkpoints_summary(checkpoints: Sequence[Any]) -> str:
    """The checkpoint list in one line: how many, their steps, and where they come from (a pattern when shared)."""
    entries = [entry for entry in checkpoints if isinstance(entry, dict) and isinstance(entry.get("step"), int)]
    sources = [str(entry.get("source")) for entry in entries]
    revisions = [entry["revision"] for entry in entries if entry.get("revision")]
    patterns = {
        source[: -len(str(entry["step"]))] + "{step}" if source.endswith(str(entry["step"])) else source
        for source, entry in zip(sources, entries, strict=True)
    }
    if revisions:
        where = f"{sources[0]} at revisions {revisions[0]} to {revisions[-1]}"
    elif len(patterns) == 1:
        where = patterns.pop()
    else:
        where = ", ".join(sources[:2]) + (", ..." if len(sources) > 2 else "")
    summary = _steps_summary([entry["step"] for entry in entries], noun="checkpoint")
    return f"{summary}; from {where}" if entries else summary


def _tooltip(column: str) -> str:
    description = describe(column)
    if description is None:
        return f"{column}: no description yet (add it to COLUMNS in interpreto_anisotropy/results/schema.py)"
    return description.tooltip()


def _definition(column: str) -> dict[str, str]:
    """A column of the rows table defined: meaning, unit, formula."""
    known = describe(column)
    meaning, unit, formula = (known.meaning, known.unit.value, known.formula) if known else (_tooltip(column), "", "")
    return {"column": column, "meaning": meaning, "unit": unit, "formula": formula}


def _model_card(result: SweepResult) -> dict[str, str]:
    """The model card (architecture, d, layers, parameters) and what the sweep did with it."""
    card = model_card(result.config, result.rows)
    config = result.config
    card["objective"] = str(config.get("objective") or _first_value(result.rows, "objective") or "unknown")
    card["split points"] = ", ".join(map(str, result.split_points))
    method = config.get("method") or _first_value(result.rows, "method")
    rank = config.get("nb_concepts") or _first_value(result.rows, "rank")
    card["tangent"] = f"{method or 'unknown method'}, rank k = {rank if rank is not None else 'unknown'}"
    return {str(key): str(value) for key, value in card.items()}


def _first_value(rows: Sequence[dict[str, Any]], key: str) -> Any:
    return next((row[key] for row in rows if row.get(key) is not None), None)


def _versions(result: SweepResult) -> dict[str, Any]:
    """The versions that computed the rows (from provenance.jsonl: groups of rows), and the report's own."""
    groups = versions_of_rows(result.results_dir, result.rows)
    known = [{"count": count, "versions": _listed(versions)} for versions, count in groups if versions is not None]
    unknown = sum(count for versions, count in groups if versions is None)
    return {"known": known, "unknown": unknown, "report": _listed(software_versions())}


def _listed(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


@cache
def _environment() -> jinja2.Environment:
    loader = jinja2.PackageLoader("interpreto_anisotropy.visualizations", "templates")
    # autoescape: every template is HTML (".html.j2", which select_autoescape(["html"]) would not match)
    options = {"trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": True}
    environment = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined, **options)
    files = {"figures_dir": FIGURES_DIR, "csv_file": CSV_FILE, "columns_csv_file": COLUMNS_CSV_FILE}
    environment.globals.update(files, provenance_file=PROVENANCE_FILE)
    return environment


def render(template: str, **context: Any) -> str:
    """A template of ``visualizations/templates`` (``"report.html.j2"``) rendered with `context`, HTML-escaped."""
    return _environment().get_template(template).render(**context)


def top_tokens_section(result: SweepResult) -> str:
    """The HTML of the top tokens' section of a sweep loaded from its folder (ResultsStoreError: an unreadable file)."""
    return render("top_tokens.html.j2", **_top_tokens_context(result))


def _top_tokens_context(result: SweepResult) -> dict[str, Any]:
    """What ``top_tokens.html.j2`` shows: the saved top tokens (`SweepResult.top_tokens`) of each split point."""
    layers = dict.fromkeys(row.get("layer", row.get("split_point")) for row in result.rows)
    return {"top_tokens": [content for content in map(result.top_tokens, layers) if content is not None]}


#: The file of column notes written next to a report's ``rows.csv``.
COLUMNS_CSV_FILE = "rows.columns.csv"


def write_column_notes(path: str | Path, names: Iterable[str]) -> Path:
    """Write a CSV with one line per column of `names`: name, meaning, unit, formula, concept section.

    Args:
        path: The file to write (atomically).
        names: The columns, in the order of the CSV they describe.

    Returns:
        The path written.
    """
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["column", "meaning", "unit", "formula", "defined_in"])
    for name in names:
        if (column := describe(name)) is None:
            writer.writerow([name, "", "", "", ""])
            continue
        where = f"docs/concepts.md#{column.concept}" if column.concept else ""
        writer.writerow([name, column.meaning, column.unit.value, column.formula, where])
    return write_atomically(path, text.getvalue())
