# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A self-contained HTML report of a checkpoint sweep.

`write_report` writes, in one folder:

- ``index.html``: title, a short explanation of the measurements, every figure of
  `interpreto_anisotropy.visualizations.plotting.plot_sweep` embedded as a base64 PNG, the table of rows and the sweep's
  settings. No external CSS, JavaScript or image: the page can be mailed or archived as one file.
- ``figures/<name>.png``: the same figures as files.
- ``rows.csv``: the scalar columns of the rows (`SweepResult.to_csv`), and ``rows.columns.csv``: what each of
  those columns means (meaning, unit, formula, section of the docs), from the one table of column descriptions,
  `interpreto_anisotropy.commons.columns.COLUMNS`, which also gives the page's header tooltips and its
  column definitions.

Every file is written to a temporary file in the same folder and then renamed over the old one, so a crash
leaves either the previous report or the new one, never half a page. The report works on a partial sweep (the
rows finished so far) and can be rewritten as more checkpoints finish.

Examples:
    >>> table = ia.SweepResult.load("runs/toy/sweep")
    >>> write_report(table, "runs/toy/report")       # also ia.write_report
    PosixPath('runs/toy/report/index.html')
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..commons.columns import TANGENT_KINDS, describe
from ..commons.files import write_atomically
from ..errors import EmptyInputError, InvalidInputError
from ..sweeps.provenance import PROVENANCE_FILE, software_versions, versions_of_rows
from ..sweeps.verdict import curve_sentences, method_sentence, resolution_note, sweep_verdict
from ..version import __version__
from .columns import COLUMNS_CSV_FILE, write_column_notes
from .markup import escape
from .model_card import model_card, model_name
from .top_tokens import TOP_TOKENS_STYLE, top_tokens_section

if TYPE_CHECKING:  # pragma: no cover
    from ..sweeps.result import SweepResult

__all__ = ["write_report", "KEY_COLUMNS", "REPORT_FILE", "FIGURES_DIR", "CSV_FILE", "COLUMNS_CSV_FILE"]

#: The report's HTML page, in the report folder.
REPORT_FILE = "index.html"
#: The folder of the report's PNG figures, in the report folder.
FIGURES_DIR = "figures"
#: The CSV file of the rows' scalar columns, in the report folder.
CSV_FILE = "rows.csv"

#: Table columns shown first, in this order (then every other scalar column, in first-seen order).
#: "ci" and "delta_isoscore_star_controls_mean" are derived: [ci_low, ci_high] and the mean of the per-control deltas.
KEY_COLUMNS: tuple[str, ...] = (
    "step",
    "split_point",
    "tangent",
    "energy_share",
    "ci",
    "control_mean",
    "analytic_null",
    "chance",
    "energy_ratio",
    "p_value",
    "p_value_holm",
    "p_value_bh",
    "p_value_exact",
    "p_value_exact_holm",
    "p_value_exact_bh",
    "z_score",
    "oracle_energy_share",
    "anisotropy_capture",
    "anisotropy_share",
    "anisotropy_share_p_value",
    "anisotropy_p_value_exact",
    "delta_isoscore_star",
    "delta_isoscore_star_controls_mean",
    "delta_isoscore_star_p_value",
    "loss",
    "activation_isoscore",
    "activation_isoscore_star",
    "activation_mean_cosine",
    "activation_effective_rank",
)

_FIGURE_CAPTIONS = {
    "energy": (
        "Share of the gradient energy held by the tangent (solid, with bootstrap intervals), by its matched-rank "
        "normal controls (shaded min-max band, dashed mean), the analytic null of a random control (dotted) and "
        "chance k/d (grey dashed); one panel per split point and tangent kind."
    ),
    "live": (
        "The live probe's energy share at every window of training (line: the training batches, with the weights "
        "of that step; band: its controls' min-max), next to the sweep's at each saved checkpoint (markers with "
        "bootstrap intervals: the probe texts; dashed: its controls' mean). The two tell the same story without "
        "being equal: other texts, and a live tangent fitted on the training steps' activations."
    ),
    "energy_ratio": (
        "Tangent energy over the controls' mean energy. Filled markers: p-value at or below 0.05; the smallest "
        "attainable p-value is 1/(R+1)."
    ),
    "delta_isoscore": (
        "How much more isotropic (IsoScore*) the gradient cloud becomes when the tangent is projected out (solid), "
        "against projecting out each control (band and dashed mean)."
    ),
    "isotropy": "Isotropy of the activations at the split point, checkpoint by checkpoint.",
    "buckets": (
        "Energy share of the tangent within token frequency buckets (types ranked by count in the sweep's fit and "
        "probe texts, cut at 50, 75 and 90 % of all occurrences; a bucket includes the type that crosses its upper "
        "edge) and position buckets; dashed: its controls' mean. The paper's frequency argument, as we read it, "
        "predicts tangent-dominated gradients for frequent tokens."
    ),
    "drift": (
        "Principal angles between each checkpoint's own tangent and the reference tangent, and the previous "
        "checkpoint's tangent (mean solid, largest dashed), in radians as in the drift_* columns (degrees on the "
        "right axis)."
    ),
    "loss": "Training loss of each checkpoint on the probe texts (the loss column), as training goes.",
}

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.meta { color: #666; font-size: 0.9em; }
.explain { max-width: 60em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; max-width: 60em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.82em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; position: sticky; top: 0; }
table.rows th[title] { cursor: help; text-decoration: underline dotted; }
table.definitions td, table.definitions th, table.card td, table.card th { white-space: normal; text-align: left; }
table.definitions td:first-child { white-space: nowrap; }
td.text, th.text { text-align: left; }
tbody tr:nth-child(even) { background: #fafafa; }
pre { margin: 0; font-size: 0.95em; white-space: pre-wrap; }
p.warning { background: #fff4e5; border-left: 4px solid #f0a030; padding: 0.4em 0.8em; }
code { background: #f4f4f4; padding: 0 0.2em; }
section.finding { background: #f3f7fc; border-left: 4px solid #3a6ea5; padding: 0.1em 1em 0.3em; margin: 1em 0; }
section.finding h2 { margin-top: 0.6em; }
section.finding li { margin: 0.3em 0; }
"""


def write_report(
    result: SweepResult,
    out_dir: str | Path,
    *,
    title: str | None = None,
    dpi: int = 110,
    live: SweepResult | None = None,
) -> Path:
    """Write a self-contained HTML report of a sweep: figures, table of rows and settings.

    Writes ``out_dir/index.html`` (figures embedded as base64 PNG, no external CSS or JavaScript),
    ``out_dir/figures/<name>.png`` and ``out_dir/rows.csv``, each atomically (a temporary file renamed over the
    target), creating `out_dir` if needed. The HTML file is written last. All text from the rows and the settings
    is HTML-escaped.

    Args:
        result: The sweep (finished or partial: the report shows the rows finished so far).
        out_dir: Folder of the report.
        title: Page title (default: "Checkpoint sweep report" and the model's name: a hub id, or the folder that
            holds the local checkpoints).
        dpi: Resolution of the PNG figures.
        live: The rows of a live probe of the same training (`TrainingProbe`'s results directory): a figure draws
            its curve next to the sweep's (`visualizations.live.plot_live_vs_sweep`).

    Returns:
        The path of ``index.html``.

    Raises:
        EmptyInputError: If the sweep has no row yet (no finished checkpoint).
        InvalidInputError: If `out_dir`, or a folder above it, is an existing file.
        ResultsStoreError: If a file of the report cannot be written (a read-only folder, a full disk).

    Examples:
        >>> table = ia.SweepResult.load("runs/toy/sweep")
        >>> path = write_report(table, "runs/toy/report", title="Toy GPT-NeoX, layer 1")
        >>> path.name
        'index.html'
    """
    if not result.rows:
        raise EmptyInputError(
            "The sweep has no finished checkpoint yet: there is nothing to report. Run (or resume) the sweep, "
            "then write the report again."
        )
    out_dir = _report_folder(Path(out_dir))
    for column in ("p_value", "p_value_exact"):
        if any(column in row for row in result.rows):
            result = result.adjusted("holm", column=column).adjusted("bh", column=column)
    if title is None:
        title = _default_title(result)

    figures: list[tuple[str, bytes]] = []
    for name, figure in _figures(result, live).items():
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        figure.clear()
        data = buffer.getvalue()
        write_atomically(out_dir / FIGURES_DIR / f"{name}.png", data)
        figures.append((name, data))

    result.to_csv(out_dir / CSV_FILE)
    write_column_notes(out_dir / COLUMNS_CSV_FILE, result.scalar_columns())
    page = _page(result, title=title, figures=figures)
    path = out_dir / REPORT_FILE
    write_atomically(path, page.encode("utf-8"))
    return path


def _figures(result: SweepResult, live: SweepResult | None) -> dict[str, Any]:
    """The sweep's figures, and the live curve next to its energy figure when live rows are given."""
    from .live import plot_live_vs_sweep
    from .plotting import plot_sweep

    figures = plot_sweep(result)
    if live is None:
        return figures
    first, *rest = figures.items()
    return dict([first, ("live", plot_live_vs_sweep(live, result)), *rest])


def _default_title(result: SweepResult) -> str:
    """ "Checkpoint sweep report" and the model's name, else the results folder's name."""
    name = model_name(result.config, result.rows)
    if name is None and result.results_dir is not None:
        name = Path(result.results_dir).name
    return "Checkpoint sweep report" + (f": {name}" if name else "")


def _report_folder(out_dir: Path) -> Path:
    """`out_dir`, once checked to be a folder or to be creatable as one (no file at it or above it).

    Raises:
        InvalidInputError: Naming the file in the way.
    """
    blocking = next((folder for folder in (out_dir, *out_dir.parents) if folder.exists()), None)
    if blocking is not None and not blocking.is_dir():
        where = "is a file" if blocking == out_dir else f"lies in {blocking}, which is a file"
        raise InvalidInputError(
            f"The report folder {out_dir} {where}: give the report a folder (`out_dir`, or --out of "
            "`interpreto-anisotropy report`), new or existing, not a file."
        )
    return out_dir


# ---------------------------------------------------------------------------------------------------- values
def _format(value: Any) -> str:
    """A cell's text: floats to 4 significant digits, None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format(item) for item in value) + "]"
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _cell(row: dict[str, Any], column: str) -> Any:
    if column == "ci":
        low, high = _number(row.get("ci_low")), _number(row.get("ci_high"))
        return None if low is None or high is None else [low, high]
    if column == "delta_isoscore_star_controls_mean":
        values = [value for value in map(_number, row.get("delta_isoscore_star_controls") or []) if value is not None]
        return sum(values) / len(values) if values else None
    return row.get(column)


def _columns(result: SweepResult) -> list[str]:
    """Key columns first (those present), then the other scalar columns in first-seen order."""
    present = set(result.scalar_columns())
    derived = {
        "ci": "ci_low" in present or "ci_high" in present,
        "delta_isoscore_star_controls_mean": any(row.get("delta_isoscore_star_controls") for row in result.rows),
    }
    columns = [column for column in KEY_COLUMNS if derived.get(column, column in present)]
    shown = set(columns) | {"ci_low", "ci_high"}
    return columns + [column for column in result.scalar_columns() if column not in shown]


def _is_text(column: str, rows: Sequence[dict[str, Any]]) -> bool:
    return any(isinstance(row.get(column), str) for row in rows)


# ---------------------------------------------------------------------------------------------------- page
def _page(result: SweepResult, *, title: str, figures: Sequence[tuple[str, bytes]]) -> str:
    steps = sorted(set(result.steps))
    controls = sorted({len(row["control_energy_shares"]) for row in result.rows if row.get("control_energy_shares")})
    floor = ", ".join(f"{1 / (r + 1):.3f} with R = {r}" for r in controls) or "1/(R + 1)"
    written = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = (
        f"{len(result.rows)} rows from {len(steps)} checkpoint{'s' if len(steps) != 1 else ''} "
        f"(steps {', '.join(map(str, steps))}); split points: {', '.join(map(str, result.split_points))}; "
        f"tangents: {', '.join(map(str, result.tangents))} (defined below). Written {written} by "
        f"interpreto-anisotropy {__version__}"
    )
    if result.results_dir is not None:
        meta += f" from {result.results_dir}"
    meta += "."

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{_STYLE}{TOP_TOKENS_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
        _finding(result),
        f'<p class="meta">{escape(meta)}</p>',
        "<h2>What this shows</h2>",
        _tangent_kinds(result),
        _explanation(floor),
        "<h2>Model</h2>",
        _model_section(result),
        "<h2>Figures</h2>",
    ]
    for name, data in figures:
        encoded = base64.b64encode(data).decode("ascii")
        caption = _FIGURE_CAPTIONS.get(name, "")
        parts.append(
            f'<figure id="figure-{escape(name)}"><img src="data:image/png;base64,{encoded}" '
            f'alt="{escape(name)} figure"><figcaption>{escape(caption)} '
            f"(<code>{FIGURES_DIR}/{escape(name)}.png</code>)</figcaption></figure>"
        )
    parts += [
        '<h2 id="top-tokens">Tangent directions: top tokens</h2>',
        top_tokens_section(result),
        "<h2>Rows</h2>",
        f"<p>One row per (checkpoint, split point, tangent); floats to 4 significant digits, empty cells are "
        f"missing values. Every scalar column is also in <code>{CSV_FILE}</code>, with its meaning and unit in "
        f"<code>{COLUMNS_CSV_FILE}</code>; hover over a header for its meaning, or read the "
        '<a href="#column-definitions">column definitions</a> below the table.</p>',
        _rows_table(result),
        '<h2 id="column-definitions">Column definitions</h2>',
        _definitions(result),
        "<h2>Multiple testing</h2>",
        _multiple_testing(result),
        *_skipped(result),
        "<h2>Settings</h2>",
        _settings_table(result.config),
        "<h2>Software</h2>",
        _versions(result),
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def _finding(result: SweepResult) -> str:
    """The sweep's verdict (`interpreto_anisotropy.sweeps.verdict`), the page's first section: one item per curve."""
    verdict = sweep_verdict(result.rows, result.config)
    items = "".join(
        f"<li><b>{escape(heading)}</b> {' '.join(escape(sentence) for sentence in sentences)}</li>"
        for heading, *sentences in (curve_sentences(curve, verdict) for curve in verdict.curves)
    )
    return (
        f'<section id="finding" class="finding"><h2>Finding</h2><ul>{items}</ul>'
        f"<p>{escape(method_sentence(verdict))} {escape(verdict.caveat)}</p></section>"
    )


def _explanation(floor: str) -> str:
    paragraphs = [
        "At each training checkpoint, a low-rank <b>tangent proxy</b> Q<sub>T</sub> (k directions of the "
        "activation manifold at the split point, fitted with a concept method) is compared with the model's true "
        "training-loss gradients G (one row per token, dL/dh at the split point), and with <b>matched-rank normal "
        "controls</b>: R random k-dimensional subspaces of the orthogonal complement of Q<sub>T</sub>.",
        "The <b>energy share</b> E = ||G Q||<sub>F</sub><sup>2</sup> / ||G||<sub>F</sub><sup>2</sup> is the "
        "fraction of gradient energy a subspace holds. <b>Chance</b> k/d is the share of a uniformly random rank-k "
        "subspace; the <b>analytic null</b> (1 - E<sub>T</sub>) k / (d - k) is the exact expected share of a random "
        "control in the complement. The <b>energy ratio</b> is E<sub>T</sub> over the controls' mean, and the "
        "<b>p-value</b> is (1 + #{controls with E<sub>N</sub> &ge; E<sub>T</sub>}) / (R + 1), so its smallest "
        f"attainable value is 1/(R + 1) ({escape(floor)}). It is the paper's, and approximate: the controls are "
        "not exchangeable with a random tangent, so it is anti-conservative when k/d is not small. "
        "<code>p_value_exact</code> ranks E<sub>T</sub> among R' uniformly random k-subspaces of R<sup>d</sup> "
        "instead, and is exact under the null of a random tangent. The <b>oracle</b> share is what the top-k "
        "eigenvectors of G<sup>T</sup>G hold, the most any rank-k subspace can.",
        "<b>&Delta;IsoScore*</b> = IsoScore*(G without Q) - IsoScore*(G): how much more isotropic the gradient "
        "cloud becomes when a subspace is projected out. A tangent that holds the gradients' anisotropy gives a "
        "clearly larger &Delta;IsoScore* than the controls. The <b>anisotropy share</b> is &Delta;<sub>T</sub> "
        "minus the controls' mean &Delta;; its p-value <code>anisotropy_share_p_value</code>, against the controls, "
        "is the paper's approximate one; <code>anisotropy_p_value_exact</code> (ours) ranks &Delta;<sub>T</sub> "
        "among the &Delta; of the same random subspaces as <code>p_value_exact</code>, and is exact.",
        "<b>Caveat</b>: this alignment is descriptive. A high energy share says that the gradients point along the "
        "tangent proxy more than along random normal directions; it is not proof that training uses, needs or "
        "is driven by that subspace.",
    ]
    return '<div class="explain">' + "".join(f"<p>{text}</p>" for text in paragraphs) + "</div>"


def _multiple_testing(result: SweepResult, level: float = 0.05) -> str:
    """How many rows stay below `level` once their p-values are adjusted, curve by curve."""
    column = "p_value_exact" if any("p_value_exact" in row for row in result.rows) else "p_value"
    tested = [row for row in result.rows if _number(row.get(column)) is not None]
    raw = sum(row[column] <= level for row in tested)
    holm = sum((_number(row.get(f"{column}_holm")) or 1) <= level for row in tested)
    bh = sum((_number(row.get(f"{column}_bh")) or 1) <= level for row in tested)
    return (
        f"<p>Each row tests one hypothesis, so some of many rows fall below {level} by chance alone. Within each "
        f"curve (the rows of one split point and tangent kind), <code>{column}</code> is adjusted by Holm's method "
        f"(<code>{column}_holm</code>, family-wise error rate) and by Benjamini-Hochberg (<code>{column}_bh</code>, "
        f"false discovery rate). Of {len(tested)} rows, {raw} have {column} &le; {level}, {holm} stay there after "
        f"Holm and {bh} after Benjamini-Hochberg. Other families: <code>SweepResult.adjusted(family=...)</code>."
        f"{resolution_note(tested, column, level)}</p>"
    )


def _skipped(result: SweepResult) -> list[str]:
    """A section listing the checkpoints the sweep skipped, and why (none when it skipped nothing)."""
    if not result.skipped:
        return []
    items = "".join(
        f"<li>step {escape(str(row['step']))}, split point {escape(str(row.get('split_point')))}, "
        f"{escape(str(row.get('tangent')))}: {escape(str(row['skipped']))}</li>"
        for row in result.skipped
    )
    return [
        "<h2>Skipped checkpoints</h2>",
        f"<p>These checkpoints have no rows; a later run retries them.</p><ul>{items}</ul>",
    ]


def _rows_table(result: SweepResult) -> str:
    columns = _columns(result)
    text_columns = {column for column in columns if _is_text(column, result.rows)}

    def align(column: str) -> str:
        return ' class="text"' if column in text_columns else ""

    header = "".join(
        f'<th{align(column)} title="{escape(_tooltip(column))}">{escape(column)}</th>' for column in columns
    )
    body = []
    for row in result.rows:
        cells = "".join(f"<td{align(column)}>{escape(_format(_cell(row, column)))}</td>" for column in columns)
        body.append(f"<tr>{cells}</tr>")
    return (
        '<div class="scroll"><table class="rows">'
        f"<thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _settings_table(config: dict[str, Any]) -> str:
    if not config:
        return "<p>No settings recorded.</p>"
    body = []
    for key, value in config.items():
        if key == "checkpoints" and isinstance(value, list):
            text = _checkpoints_summary(value)
        elif key.endswith("steps") and isinstance(value, list) and all(isinstance(step, int) for step in value):
            text = _steps_summary(value)
        elif isinstance(value, (dict, list, tuple)):
            text = json.dumps(value, default=str, ensure_ascii=False)
        else:
            text = _format(value) if isinstance(value, float) else str(value)
        body.append(f'<tr><th class="text">{escape(str(key))}</th><td class="text">{escape(text)}</td></tr>')
    return f'<table class="settings"><tbody>{"".join(body)}</tbody></table>'


def _steps_summary(steps: Sequence[int], noun: str = "step", shown: int = 4) -> str:
    """ "n steps, a to b: s1, s2, ..., s_n", listing the first and last few steps only."""
    if not steps:
        return f"no {noun}"
    if len(steps) <= 2 * shown:
        listed = ", ".join(map(str, steps))
    else:
        listed = ", ".join(map(str, steps[:shown])) + ", ..., " + ", ".join(map(str, steps[-shown:]))
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
        return f"{column}: no description yet (add it to COLUMNS in interpreto_anisotropy/commons/columns.py)"
    return description.tooltip()


def _tangent_kinds(result: SweepResult) -> str:
    """The tangent kinds of the sweep, defined (they name the rows and the figures' panels)."""
    items = "".join(
        f"<li><b>{escape(str(kind))}</b>: {escape(TANGENT_KINDS.get(str(kind), 'a tangent kind of this sweep'))}</li>"
        for kind in result.tangents
    )
    return f'<div class="explain"><p>Tangent kinds in this report:</p><ul>{items}</ul></div>'


def _definitions(result: SweepResult) -> str:
    """A table defining every column of the rows table: meaning, unit, formula."""
    body = []
    for column in _columns(result):
        description = describe(column)
        meaning, unit, formula = (
            (description.meaning, description.unit.value, description.formula)
            if description
            else (_tooltip(column), "", "")
        )
        body.append(
            f"<tr><td><code>{escape(column)}</code></td><td>{escape(meaning)}</td><td>{escape(unit)}</td>"
            f"<td>{escape(formula)}</td></tr>"
        )
    return (
        '<div class="scroll"><table class="definitions"><thead><tr><th>column</th><th>meaning</th><th>unit</th>'
        f"<th>formula</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _model_section(result: SweepResult) -> str:
    """The model card (architecture, d, layers, parameters) and what the sweep did with it."""
    card = model_card(result.config, result.rows)
    config = result.config
    card["objective"] = str(config.get("objective") or _first_value(result.rows, "objective") or "unknown")
    card["split points"] = ", ".join(map(str, result.split_points))
    method = config.get("method") or _first_value(result.rows, "method")
    rank = config.get("nb_concepts") or _first_value(result.rows, "rank")
    card["tangent"] = f"{method or 'unknown method'}, rank k = {rank if rank is not None else 'unknown'}"
    body = "".join(
        f'<tr><th class="text">{escape(key)}</th><td class="text">{escape(value)}</td></tr>'
        for key, value in card.items()
    )
    return f'<table class="card"><tbody>{body}</tbody></table>'


def _first_value(rows: Sequence[dict[str, Any]], key: str) -> Any:
    return next((row[key] for row in rows if row.get(key) is not None), None)


def _versions(result: SweepResult) -> str:
    """The versions that computed the rows (from provenance.jsonl; flagged when several), then the report's own."""
    groups = versions_of_rows(result.results_dir, result.rows)
    known = [(versions, count) for versions, count in groups if versions is not None]
    unknown = sum(count for versions, count in groups if versions is None)
    parts = []
    if len(known) == 1 and not unknown:
        parts.append(f"<p>Rows computed with {escape(_listed(known[0][0]))}.</p>")
    elif known:
        items = "".join(f"<li>{count} rows: {escape(_listed(versions))}</li>" for versions, count in known)
        if unknown:
            items += f"<li>{unknown} rows: versions not recorded (written before they were)</li>"
        parts.append(
            f'<p class="warning"><b>The rows come from {len(known) + bool(unknown)} different software versions</b> '
            "(a sweep resumed or extended after an upgrade): compare numbers across them with care.</p>"
            f"<ul>{items}</ul>"
        )
    else:
        parts.append(
            "<p>The versions that computed the rows are not recorded (results written before "
            f"<code>{PROVENANCE_FILE}</code> existed, or rows not loaded from a results folder).</p>"
        )
    parts.append(
        f"<p>This report was written with {escape(_listed(software_versions()))} (installed where it was written).</p>"
    )
    return "".join(parts)


def _listed(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())
