# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Figures (`plotting`) and HTML report (`report`) of a synthetic `SweepResult`.

The sweep is built by hand (5 steps x 2 tangent kinds x 2 split points, with some missing values), so these tests
need no model and check the figures' data against the rows they were drawn from.
"""

from __future__ import annotations

import base64
import csv
import html
import html.parser
import json
import math
import random
import re

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from interpreto_anisotropy import plotting
from interpreto_anisotropy.cli import main
from interpreto_anisotropy.errors import InvalidInputError, ResultsStoreError
from interpreto_anisotropy.results.schema import sort_rows
from interpreto_anisotropy.results.table import SweepResult
from interpreto_anisotropy.visualizations.report import write_report

STEPS = [0, 1, 2, 8, 20]
TANGENTS = ["early", "each"]
SPLITS = ["gpt_neox.layers.0", "gpt_neox.layers.1"]
D, K, R = 64, 8, 20
R_EXACT = 499  # R', the random subspaces behind p_value_exact: its floor 1/(R'+1) = 0.002
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_rows(*, steps=STEPS, splits=SPLITS, tangents=TANGENTS, seed: int = 0) -> list[dict]:
    """Plausible sweep rows, with holes: a missing E_T, a missing CI, no controls once, no drift for step 0."""
    rng = random.Random(seed)
    rows = []
    for s, split in enumerate(splits):
        for i, step in enumerate(steps):
            for tangent in tangents:
                energy = 0.5 - 0.05 * i + (0.03 if tangent == "each" else 0.0) - 0.02 * s
                controls = [rng.uniform(0.04, 0.09) for _ in range(R)]
                delta_controls = [rng.uniform(-0.01, 0.02) for _ in range(R)]
                control_mean = sum(controls) / R
                rows.append(
                    {
                        "step": step,
                        "checkpoint": f"step-{step}",
                        "split_point": split,
                        "tangent": tangent,
                        "method": "pca",
                        "energy_share": energy,
                        "chance": K / D,
                        "rank": K,
                        "dim": D,
                        "control_energy_shares": controls,
                        "control_mean": control_mean,
                        "analytic_null": (1 - energy) * K / (D - K),
                        "energy_ratio": energy / control_mean,
                        "p_value": 1 / (R + 1) if i < 4 else 0.19,
                        # exact p disagrees with the approximate one: above it at steps 0 and 1, below it at step 20
                        "p_value_exact": (0.3, 0.3, 0.004, 0.004, 1 / (R_EXACT + 1))[min(i, 4)],
                        "random_energy_shares": [0.06] * R_EXACT,
                        "ci_low": energy - 0.03,
                        "ci_high": energy + 0.02,
                        "oracle_energy_share": energy + 0.1,
                        "anisotropy_capture": 0.8 - 0.05 * i,
                        "isoscore_star": 0.12,
                        "delta_isoscore_star": 0.3 - 0.03 * i + 0.01 * s,
                        "delta_isoscore_star_controls": delta_controls,
                        "delta_isoscore_star_p_value": 1 / (R + 1),
                        "loss": 6.0 - 0.3 * i,
                        "n_tokens": 1200,
                        "activation_mean_cosine": 0.2 + 0.1 * i + 0.01 * s,
                        "activation_mean_cosine_centered": 0.01,
                        "activation_isoscore": 0.3 - 0.02 * i - 0.01 * s,
                        "activation_isoscore_star": 0.25 - 0.02 * i,
                        "activation_partition_isotropy": 0.4 - 0.01 * i,
                        "activation_partition_isotropy_uncentered": 0.1,
                        "activation_effective_rank": 30.0 - 2 * i,
                        "activation_rogue_top_share": 0.1 + 0.05 * i,
                        "activation_n_outlier_dimensions": 1.0,
                        "activation_n": 1200.0,
                        "activation_d": float(D),
                        "freq_distance_pearson": -0.4,
                        "freq_distance_spearman": -0.45,
                        "freq_distance_p_value": 1e-5,
                        "on_manifold_entropy": 3.2,
                        "drift_reference_mean_angle": 0.1 * i + 0.02 * s,
                        "drift_reference_max_angle": 0.2 * i + 0.1,
                        "drift_previous_mean_angle": None if i == 0 else 0.05 * i,
                        "drift_previous_max_angle": None if i == 0 else 0.1 * i,
                        "wall_seconds": 3.5,
                        "frequency_buckets": ["0-50 %", "50-75 %", "75-90 %", "90-100 %"],
                        "frequency_energy_share": [energy + 0.1, energy, energy - 0.1, None if i == 1 else 0.05],
                        "frequency_control_share": [0.06, 0.06, 0.07, 0.08],
                        "frequency_n_tokens": [600, 300, 200, 0 if i == 1 else 100],
                        "position_buckets": ["0", "1-3", "4-15"],
                        "position_energy_share": [0.2, energy, energy + 0.02],
                        "position_control_share": [0.05, 0.06, 0.06],
                        "position_n_tokens": [12, 36, 1152],
                    }
                )
    if len(rows) > 4:  # holes, as in a partial or imperfect sweep (NaN serialised as None)
        rows[1]["energy_share"] = None  # step 0, "each", first split
        rows[2]["ci_low"] = None  # step 1, "early"
        rows[3]["control_energy_shares"] = []  # step 1, "each"
        rows[4]["delta_isoscore_star"] = None  # step 2, "early"
    return sort_rows(rows)


@pytest.fixture(scope="module")
def result() -> SweepResult:
    config = {
        "model": "toy-gpt-neox <script>alert(1)</script>",
        "nb_concepts": K,
        "n_controls": R,
        "split_points": SPLITS,
        "method": "pca",
    }
    return SweepResult(make_rows(), config)


@pytest.fixture(scope="module")
def figures(result) -> dict[str, Figure]:
    return plotting.plot_sweep(result)


def rows_of(result: SweepResult, split: str, tangent: str) -> list[dict]:
    return result.select(split_point=split, tangent=tangent).rows


def finite(rows, key):
    """(steps, values) of the rows whose `key` is not None."""
    kept = [row for row in rows if row.get(key) is not None]
    return [row["step"] for row in kept], [row[key] for row in kept]


def by_gid(ax, gid):
    found = [artist for artist in ax.get_children() if artist.get_gid() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found[0]


def panel(figure: Figure, split: str):
    """The axis of a split point's panel (panels are titled with their split point)."""
    for ax in figure.axes:
        if ax.get_title().endswith(split):
            return ax
    raise AssertionError(f"no panel for {split}")


# ---------------------------------------------------------------------------------------------------- figures
def test_plot_sweep_returns_every_figure(result, figures):
    assert list(figures) == [
        "energy",
        "energy_ratio",
        "change",
        "delta_isoscore",
        "isotropy",
        "drift",
        "loss",
        "buckets",
    ]
    for name, figure in figures.items():
        assert isinstance(figure, Figure), name
        assert figure.get_suptitle(), name
        assert figure.legends or all(ax.get_legend() for ax in figure.axes), f"{name} has no legend"
        for ax in figure.axes:
            assert ax.get_xscale() == "symlog"
            assert ax.get_xlim()[0] < 0 <= ax.get_xlim()[1], "step 0 must be visible"
            assert ax.get_ylabel(), name
    # one panel per split point (and tangent kind for the energy), isotropy has six small multiples
    for name in ("energy_ratio", "delta_isoscore", "drift"):
        assert len(figures[name].axes) == len(SPLITS)
    assert len(figures["energy"].axes) == len(SPLITS) * len(TANGENTS)
    assert len(figures["isotropy"].axes) == 6
    assert len(figures["loss"].axes) == 1
    # the same functions are public
    assert isinstance(plotting.plot_sweep(result)["energy"], Figure)


def kind_panel(figure: Figure, split: str, tangent: str):
    """The energy figure's panel of one split point and tangent kind."""
    return next(ax for ax in figure.axes if ax.get_title() == f"{tangent} tangent, split point {split}")


def test_energy_figure_matches_rows(result, figures):
    figure = figures["energy"]
    for split in SPLITS:
        for tangent in TANGENTS:
            ax = kind_panel(figure, split, tangent)
            assert not any(
                artist.get_gid() == f"energy:{other}"
                for other in TANGENTS
                if other != tangent
                for artist in ax.get_children()
            ), "one tangent kind per panel"
            rows = rows_of(result, split, tangent)
            steps, energy = finite(rows, "energy_share")
            line = by_gid(ax, f"energy:{tangent}")
            np.testing.assert_array_equal(line.get_xdata(), steps)
            np.testing.assert_allclose(line.get_ydata(), energy)
            with_controls = [row for row in rows if row["control_energy_shares"]]
            low, high = by_gid(ax, f"control_min:{tangent}"), by_gid(ax, f"control_max:{tangent}")
            np.testing.assert_array_equal(low.get_xdata(), [row["step"] for row in with_controls])
            np.testing.assert_allclose(low.get_ydata(), [min(row["control_energy_shares"]) for row in with_controls])
            np.testing.assert_allclose(high.get_ydata(), [max(row["control_energy_shares"]) for row in with_controls])
            band = by_gid(ax, f"control_band:{tangent}")
            assert isinstance(band, PolyCollection)
            vertices = band.get_paths()[0].vertices
            assert vertices[:, 1].min() == pytest.approx(min(min(r["control_energy_shares"]) for r in with_controls))
            assert vertices[:, 1].max() == pytest.approx(max(max(r["control_energy_shares"]) for r in with_controls))
            np.testing.assert_allclose(
                by_gid(ax, f"control_mean:{tangent}").get_ydata(), finite(rows, "control_mean")[1]
            )
            np.testing.assert_allclose(
                by_gid(ax, f"analytic_null:{tangent}").get_ydata(), finite(rows, "analytic_null")[1]
            )
            # error bars only where both CI bounds are known
            with_ci = [r for r in rows if None not in (r["energy_share"], r["ci_low"], r["ci_high"])]
            bars = next(c for c in ax.collections if c.get_gid() == f"ci:{tangent}" and isinstance(c, LineCollection))
            segments = bars.get_segments()
            assert len(segments) == len(with_ci)
            for segment, row in zip(segments, with_ci, strict=True):
                assert segment[:, 1].min() == pytest.approx(row["ci_low"])
                assert segment[:, 1].max() == pytest.approx(row["ci_high"])
            chance = by_gid(ax, "chance")
            np.testing.assert_allclose(chance.get_ydata(), [K / D, K / D])
            assert "k/d" in chance.get_label()
    for ax in figure.axes:  # a legend per panel, in its own colours
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert len(labels) == len(set(labels)) <= 6, f"a legible legend: {labels}"
    assert "step" in figure.axes[0].get_xlabel()
    assert "energy" in figure.axes[0].get_ylabel()


def _markers(figure: Figure, split: str, tangent: str, gid: str) -> set[tuple[int, float]]:
    """(step, ratio) of the energy-ratio figure's markers with this gid, read back from the artists."""
    found = [c for c in panel(figure, split).collections if c.get_gid() == f"{gid}:{tangent}"]
    assert all(isinstance(collection, PathCollection) for collection in found)
    return {(int(x), round(float(y), 9)) for collection in found for x, y in collection.get_offsets()}


def _judged(rows, significant):
    return {(row["step"], round(row["energy_ratio"], 9)) for row, sig in zip(rows, significant, strict=True) if sig}


@pytest.mark.parametrize(
    "config", [{}, {"family": "all", "correction": "holm"}, {"family": "tangent", "correction": "bh", "level": 0.1}]
)
def test_the_energy_ratio_figure_fills_exactly_the_rows_the_verdict_calls_significant(result, config):
    """Filled markers are the rows whose exact p, adjusted within the declared family, is at or below the level (the
    verdict's count, curve by curve), hollow ones the others; the approximate p disagrees with it on these rows."""
    from interpreto_anisotropy.results.verdict import adjust, sweep_verdict

    table = SweepResult(result.rows, config)
    verdict = sweep_verdict(table.rows, table.config)
    adjusted = adjust(
        table.rows,
        column="p_value_exact",
        correction=config.get("correction", "holm"),
        family=config.get("family", "split_point_and_tangent"),
    )
    level = config.get("level", 0.05)
    significant = [p is not None and p <= level for p in adjusted]
    approximate = [row["p_value"] <= level for row in table.rows]
    assert significant != approximate, "the crafted rows must make the two p-values disagree"
    figure = plotting.plot_energy_ratio(table)
    for curve in verdict.curves:
        rows = [r for r in table.rows if (r["split_point"], r["tangent"]) == (curve.split_point, curve.tangent)]
        flags = [sig for r, sig in zip(table.rows, significant, strict=True) if r in rows]
        ratio_rows = [(r, sig) for r, sig in zip(rows, flags, strict=True) if r.get("energy_ratio") is not None]
        filled = _markers(figure, curve.split_point, curve.tangent, "significant")
        hollow = _markers(figure, curve.split_point, curve.tangent, "not_significant")
        assert filled == _judged([r for r, _ in ratio_rows], [sig for _, sig in ratio_rows])
        assert hollow == _judged([r for r, _ in ratio_rows], [not sig for _, sig in ratio_rows])
        assert len(filled) == curve.n_significant  # every row of these curves has a ratio
    # a selection keeps the sweep's families: the same markers as in the whole figure
    split, tangent = SPLITS[1], TANGENTS[0]
    selected = plotting.plot_energy_ratio(table, split_point=split, tangent=tangent)
    assert _markers(selected, split, tangent, "significant") == _markers(figure, split, tangent, "significant")
    labels = [text.get_text() for text in figure.legends[0].get_texts()]
    family = {"all": "over all rows", "tangent": "within each tangent kind"}.get(
        config.get("family"), "within each curve"
    )
    method = "Benjamini-Hochberg" if config.get("correction") == "bh" else "Holm"
    assert f"filled: significant: exact p, {method} {family}, level {level:g}" in labels
    assert "hollow: not significant" in labels
    assert "1/(R'+1) = 0.002 (R'=499)" in figure.get_suptitle()


def test_energy_ratio_figure_draws_the_ratio_of_every_row(result, figures):
    figure = figures["energy_ratio"]
    for split in SPLITS:
        ax = panel(figure, split)
        for tangent in TANGENTS:
            steps, ratios = finite(rows_of(result, split, tangent), "energy_ratio")
            line = by_gid(ax, f"ratio:{tangent}")
            np.testing.assert_array_equal(line.get_xdata(), steps)
            np.testing.assert_allclose(line.get_ydata(), ratios)


def test_every_energy_panel_has_its_ticks_labels_and_legend_in_its_own_colours(result):
    """The "each" panel of a shared-y row had no tick labels, and the figure's one legend the "early" colour."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = plotting.plot_energy(result)
    FigureCanvasAgg(figure).draw()  # as savefig draws it: the constrained layout runs then
    box = figure.bbox
    for ax in figure.axes:
        shown = [label.get_text() for label in ax.get_yticklabels() if label.get_visible() and label.get_text()]
        assert len(shown) >= 2, f"{ax.get_title()}: y tick labels {shown}"
        assert [label.get_text() for label in ax.get_xticklabels() if label.get_visible() and label.get_text()]
        for text in (ax.yaxis.label, ax.xaxis.label, ax.title):
            extent = text.get_window_extent()
            assert text.get_text() and box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, text.get_text()
        legend = ax.get_legend()
        assert legend is not None, ax.get_title()
        extent = legend.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0, ax.get_title()
        lines = {
            line.get_label(): line for line in [*ax.lines, *ax.collections] if not line.get_label().startswith("_")
        }
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            drawn = lines.get(text.get_text())
            if drawn is None:  # the error bars: a container, whose lines carry the kind's gid
                drawn = next(c for c in ax.collections if (c.get_gid() or "").startswith("ci:"))
            colour = _colour(handle)
            assert np.allclose(colour[:3], _colour(drawn)[:3]), (ax.get_title(), text.get_text(), colour)
    kinds = {ax.get_title().split(" ")[0] for ax in figure.axes}
    assert kinds == set(TANGENTS)


def _colour(artist):
    """The RGBA an artist is drawn in: a line's colour, a patch's or collection's face (or edge, without a face)."""
    from matplotlib.colors import to_rgba_array
    from matplotlib.lines import Line2D

    if isinstance(artist, Line2D):
        return tuple(to_rgba_array(artist.get_color())[0])
    faces = to_rgba_array(artist.get_facecolor())
    return tuple((faces if len(faces) else to_rgba_array(artist.get_edgecolor()))[0])


# ---------------------------------------------------------------------------------------------------- report
def headers_of(table: str) -> list[str]:
    """The column names of the rows table (a p-value column's label follows its name, after a line break)."""
    return re.findall(r"<th(?:\s[^>]*)?>([^<]*)", table)


def labels_of(table: str) -> dict[str, str]:
    """The label under each labelled column's name."""
    return dict(re.findall(r'<th(?:\s[^>]*)?>([^<]*)<br><span class="label">([^<]*)</span></th>', table))


def rows_table(page: str) -> str:
    start = page.index('<table class="rows">')
    return page[start : page.index("</table>", start)]


@pytest.fixture(scope="module")
def report(result, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("report") / "nested" / "report"
    path = write_report(result, out_dir, title="Toy sweep <b>report</b>", dpi=40)
    return path, path.read_text()


def test_report_files(result, report):
    path, _ = report
    out_dir = path.parent
    assert path == out_dir / "index.html" and path.exists()
    for name in plotting.FIGURES:
        assert (out_dir / "figures" / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
    with (out_dir / "rows.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == len(result.rows)
    assert [int(row["step"]) for row in table] == result.steps
    assert not list(out_dir.rglob("*.tmp")), "temporary files left behind"


def test_report_page(result, report):
    _, page = report
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # self-contained: every figure embedded, nothing fetched
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(plotting.FIGURES)
    for encoded in images:
        assert base64.b64decode(encoded).startswith(PNG_SIGNATURE)
    assert not re.search(r'(src|href)="(?!data:|#)', page), "external resource referenced"
    assert "<link" not in page and "<script" not in page
    # title escaped, explanation present
    assert "<title>Toy sweep &lt;b&gt;report&lt;/b&gt;</title>" in page
    for phrase in ("What this shows", "matched-rank normal", "Chance", "analytic null", "(R + 1)", "descriptive"):
        assert phrase in page, phrase
    assert "0.002 with R' = 499" in html.unescape(page)
    # table: one row per result row, every step, key columns first, 4 significant digits
    table = rows_table(page)
    assert table.count("<tr>") == len(result.rows) + 1
    headers = headers_of(table)
    assert headers[:5] == ["step", "split_point", "tangent", "energy_share", "ci"]
    assert "delta_isoscore_star_controls_mean" in headers and "activation_isoscore" in headers
    assert "control_energy_shares" not in headers  # per-control lists are summarised, not dumped
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    for step in STEPS:
        assert str(step) in cells
    first = result.rows[0]
    assert f"{first['energy_ratio']:.4g}" in cells
    assert f"[{first['ci_low']:.4g}, {first['ci_high']:.4g}]" in cells
    # settings, with HTML escaped
    settings = page[page.index('<table class="settings">') :]
    assert "nb_concepts" in settings and "gpt_neox.layers.1" in settings
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in settings
    assert "The versions that computed the rows are not recorded" in page[page.index("<h2>Software</h2>") :]


def test_report_partial_overwrite_and_empty(tmp_path):
    out_dir = tmp_path / "partial"
    out_dir.mkdir()
    (out_dir / "index.html").write_text("an older report")
    partial = SweepResult(make_rows(steps=[0, 1], splits=SPLITS[:1], tangents=["early"]), {"n_controls": R})
    path = write_report(partial, out_dir, dpi=30)
    page = path.read_text()
    assert page.count("data:image/png;base64,") == len(plotting.FIGURES)
    assert "2 rows from 2 checkpoints" in page
    assert "Checkpoint sweep report" in page  # default title
    assert not [entry.name for entry in out_dir.iterdir() if entry.name.startswith(".")], "temporary files left"

    with pytest.raises(InvalidInputError, match="checkpoint"):
        write_report(SweepResult([], {"n_controls": R}), tmp_path / "empty")
    assert not (tmp_path / "empty" / "index.html").exists()


# ---------------------------------------------------------------------------------------------------- user mistakes
def _results_dir(folder, rows: list[dict]):
    """A results folder as a sweep writes it: config.json and rows.jsonl (with each row's `layer`)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"nb_concepts": K, "n_controls": R}))
    lines = [json.dumps({**row, "layer": row["split_point"], "control_energy_shares": None}) for row in rows]
    (folder / "rows.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_a_report_into_a_file_is_our_error_naming_it(result, tmp_path, capsys):
    (tmp_path / "report.html").write_text("not a folder")
    with pytest.raises(InvalidInputError, match=rf"{re.escape(str(tmp_path / 'report.html'))}.*out_dir"):
        write_report(result, tmp_path / "report.html")
    with pytest.raises(
        InvalidInputError,
        match=rf"{re.escape(str(tmp_path / 'report.html' / 'nested'))}.*{re.escape(str(tmp_path / 'report.html'))}\b",
    ):
        write_report(result, tmp_path / "report.html" / "nested")
    assert (tmp_path / "report.html").read_text() == "not a folder"
    sweep = _results_dir(tmp_path / "sweep", make_rows(steps=[0, 1], splits=SPLITS[:1]))
    assert main(["report", str(sweep), "--out", str(tmp_path / "report.html")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("interpreto-anisotropy report: error: The report folder ") and "--out" in error
    assert error.count("\n") == 1 and "report.html" in error


def test_split_points_and_tangents_with_dollars_slashes_and_spaces(tmp_path):
    splits = ["layers.$1", "^{}_$$", "a/b c"]  # "^{}_$$" is a bad formula: matplotlib's mathtext failed on it
    crafted = SweepResult(
        make_rows(steps=[0, 1, 2], splits=splits, tangents=["early", "$x$"]), {"split_points": splits}
    )
    path = write_report(crafted, tmp_path / "report", dpi=30)
    assert sorted(file.name for file in (tmp_path / "report" / "figures").iterdir()) == sorted(
        f"{name}.png" for name in plotting.FIGURES
    )
    for figure in plotting.plot_sweep(crafted).values():
        shown = [text.get_text() for text in figure.findobj(Text)]
        assert all(text.count("$") == text.count(r"\$") for text in shown), "an unescaped $ starts mathtext"
        assert any(r"split point layers.\$1" in text for text in shown)
    page = path.read_text()
    assert all(html.escape(split) in page for split in splits)
    with (tmp_path / "report" / "rows.csv").open() as handle:
        assert {row["split_point"] for row in csv.DictReader(handle)} == set(splits)


def test_loading_crafted_rows_with_a_null_step_names_the_file_and_line(tmp_path):
    rows = make_rows(steps=[0, 1], splits=SPLITS[:1], tangents=["early"])
    sweep = _results_dir(tmp_path / "sweep", [rows[0], {**rows[1], "step": None}])
    with pytest.raises(ResultsStoreError, match=r"Line 2 of .*rows\.jsonl"):
        SweepResult.load(sweep)
    sweep = _results_dir(tmp_path / "other", [rows[0], {**rows[1], "split_point": "layers.$1"}])
    assert SweepResult.load(sweep).split_points == ["gpt_neox.layers.0", "layers.$1"]


def test_the_report_s_first_p_column_is_the_exact_p_adjusted_within_the_family(result, report):
    """The p-value columns: the verdict's (exact, Holm within each curve) first, labelled; the approximate p after
    the exact ones, labelled as such, and never adjusted; the counts are those of the adjusted exact p."""
    from interpreto_anisotropy.results.verdict import holm

    _, page = report
    table = rows_table(page)
    headers = headers_of(table)
    p_columns = [name for name in headers if "p_value" in name]
    assert p_columns[:3] == ["p_value_exact_holm", "p_value_exact_bh", "p_value_exact"]
    assert p_columns.index("p_value") > p_columns.index("p_value_exact")  # secondary, after the exact ones
    assert "p_value_holm" not in headers and "p_value_bh" not in headers  # no Holm or BH of the approximate p
    labels = labels_of(table)
    assert labels["p_value_exact_holm"].startswith("the p-value: exact, Holm within each curve")
    assert labels["p_value"] == "approximate p (normal controls; anti-conservative)"
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in table.split("<tr>")[2:]]
    survivors, adjusted = 0, {}
    for split_point in result.split_points:
        for tangent in result.tangents:
            curve = [row for row in result.rows if (row["split_point"], row["tangent"]) == (split_point, tangent)]
            values = holm([row["p_value_exact"] for row in curve])
            adjusted.update({id(row): value for row, value in zip(curve, values, strict=True)})
            survivors += int(sum(values <= 0.05))
    shown = [float(row[headers.index("p_value_exact_holm")]) for row in cells]
    np.testing.assert_allclose(shown, [adjusted[id(row)] for row in result.rows], rtol=1e-3)
    section = page[page.index("<h2>Multiple testing</h2>") :]
    raw = sum(row["p_value_exact"] <= 0.05 for row in result.rows)
    assert (
        f"Of {len(result.rows)} rows, {raw} have p_value_exact &le; 0.05, {survivors} stay there after Holm" in section
    )
    explainer = page[page.index("<h2>What this shows</h2>") : page.index("<h2>Model</h2>")]
    assert (
        "<b>The p-value</b> of this report" in explainer
        and "<b>exact</b> one, <code>p_value_exact</code>" in explainer
    )
    assert "0.31 (d = 32, k = 15), 0.23 (d = 48, k = 20) and 0.11 (d = 96, k = 24)" in explainer


def test_the_multiple_testing_paragraph_and_the_finding_count_over_the_declared_family(tmp_path):
    from interpreto_anisotropy.results.verdict import benjamini_hochberg, holm

    rows = [{**row, "p_value_exact": (i % 9) / 40} for i, row in enumerate(make_rows())]  # some pass, some do not
    config = {"family": "all", "correction": "bh", "level": 0.1}
    page = write_report(SweepResult(rows, config), tmp_path / "report", dpi=20).read_text()
    p = [row["p_value_exact"] for row in rows]  # one family: every row
    survivors = {
        name: int(sum(adjusted <= 0.1)) for name, adjusted in (("holm", holm(p)), ("bh", benjamini_hochberg(p)))
    }
    assert survivors["holm"] < survivors["bh"] < sum(value <= 0.1 for value in p)  # the three counts differ
    section = page[page.index("<h2>Multiple testing</h2>") : page.index("<h2>Settings</h2>")]
    assert "fall below 0.1 by chance alone. Over every row of the sweep, <code>p_value_exact</code> is adjusted" in (
        section
    )
    raw = sum(value <= 0.1 for value in p)
    assert (
        f"Of {len(rows)} rows, {raw} have p_value_exact &le; 0.1, {survivors['holm']} stay there after Holm and "
        f"{survivors['bh']} after Benjamini-Hochberg." in section
    )
    finding = page[page.index('<section id="finding"') : page.index("</section>")]
    significant = [int(count) for count in re.findall(r"(\d+) of \d+ checkpoints significant", finding)]
    assert sum(significant) == survivors["bh"], "the finding counts the declared correction over the same family"
    table = rows_table(page)  # the table's adjusted columns are over the same family, the declared correction first
    headers = headers_of(table)
    assert [name for name in headers if "p_value" in name][:2] == ["p_value_exact_bh", "p_value_exact_holm"]
    assert labels_of(table)["p_value_exact_bh"] == "the p-value: exact, Benjamini-Hochberg over every row of the sweep"
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in table.split("<tr>")[2:]]
    shown = [float(row[headers.index("p_value_exact_bh")]) for row in cells]
    np.testing.assert_allclose(shown, benjamini_hochberg(p), rtol=1e-3)


def test_the_report_lists_skipped_checkpoints_and_why(tmp_path):
    skipped = [{"step": 7, "split_point": "1", "tangent": "early", "skipped": "CheckpointError: <NaN> weights"}]
    table = SweepResult(make_rows(), {}, None, skipped)
    page = write_report(table, tmp_path / "report", dpi=30).read_text()
    section = page[page.index("<h2>Skipped checkpoints</h2>") :]
    assert "step 7, split point 1, early: CheckpointError: &lt;NaN&gt; weights" in section
    assert "Skipped checkpoints" not in write_report(SweepResult(make_rows()), tmp_path / "plain", dpi=30).read_text()


def test_buckets_figure_matches_rows(result, figures):
    figure = figures["buckets"]
    assert len(figure.axes) == 2 * len(SPLITS)  # frequency and position, per split point
    early = [row for row in result.rows if row["tangent"] == "early" and row["split_point"] == SPLITS[0]]
    lines = {line.get_gid(): line for line in figure.axes[0].lines}
    for bucket in range(4):
        expected = [(row["step"], row["frequency_energy_share"][bucket]) for row in early]
        expected = [(step, share) for step, share in expected if share is not None]
        line = lines[f"frequency_energy_share:{bucket}"]
        assert list(line.get_xdata()) == [step for step, _ in expected]
        assert list(line.get_ydata()) == pytest.approx([share for _, share in expected])
    assert "early tangent" in figure.get_suptitle()


def test_the_report_says_when_the_p_value_floor_is_too_coarse_for_holm(tmp_path):
    rows = [{**row, "p_value_exact": 1 / (R + 1), "random_energy_shares": [0.06] * R} for row in make_rows()]
    page = write_report(SweepResult(rows), tmp_path / "report", dpi=30).read_text()
    curve = len([row for row in rows if (row["split_point"], row["tangent"]) == (SPLITS[0], TANGENTS[0])])
    assert curve / (R + 1) > 0.05
    assert f"ask for n_random={math.ceil(curve / 0.05) - 1} or more" in page


# ---------------------------------------------------------------------------------------------------- live rows
def test_live_figure_draws_the_live_rows_next_to_the_sweep_and_the_report_shows_it(result, tmp_path, capsys):
    from interpreto_anisotropy.visualizations.plotting import plot_live_vs_sweep

    live_rows = [
        {**row, "source": "live", "checkpoint": f"live-{row['step']}"}
        for row in make_rows(steps=[0, 3, 6, 9, 12, 15, 18, 21], splits=[SPLITS[1]], tangents=["early"], seed=1)
    ]
    live = SweepResult(live_rows, {"live": True})
    figure = plot_live_vs_sweep(live, result)
    [ax] = figure.axes
    assert ax.get_title().endswith(SPLITS[1])
    steps, energy = finite(live_rows, "energy_share")
    line = by_gid(ax, "live_energy:early")
    np.testing.assert_array_equal(line.get_xdata(), steps)
    np.testing.assert_allclose(line.get_ydata(), energy)
    band = by_gid(ax, "live_band:early").get_paths()[0].vertices
    with_controls = [row["control_energy_shares"] for row in live_rows if row["control_energy_shares"]]
    assert band[:, 1].min() == pytest.approx(min(map(min, with_controls)))
    assert band[:, 1].max() == pytest.approx(max(map(max, with_controls)))
    sweep_rows = rows_of(result, SPLITS[1], "early")
    points = by_gid(ax, "sweep_energy:early")
    np.testing.assert_array_equal(points.get_xdata(), finite(sweep_rows, "energy_share")[0])
    np.testing.assert_allclose(np.asarray(points.get_ydata(), float), finite(sweep_rows, "energy_share")[1])
    np.testing.assert_allclose(
        by_gid(ax, "sweep_control_mean:early").get_ydata(), finite(sweep_rows, "control_mean")[1]
    )
    with pytest.raises(InvalidInputError, match=r"'elsewhere'.*'gpt_neox\.layers\.0'"):
        plot_live_vs_sweep(SweepResult([{**row, "split_point": "elsewhere"} for row in live_rows], {}), result)
    # The report (and the CLI's `report --live`) adds the figure after the energy figure.
    sweep_dir = _results_dir(tmp_path / "sweep", result.rows)
    live_dir = _results_dir(tmp_path / "live", live_rows)
    assert main(["report", str(sweep_dir), "--live", str(live_dir), "--out", str(tmp_path / "report")]) == 0
    assert "report:" in capsys.readouterr().out
    assert (tmp_path / "report" / "figures" / "live.png").read_bytes().startswith(PNG_SIGNATURE)
    page = (tmp_path / "report" / "index.html").read_text()
    figure_ids = re.findall(r'<figure id="figure-([a-z_]+)"', page)
    assert figure_ids[:2] == ["energy", "live"] and len(figure_ids) == len(plotting.FIGURES) + 1
    assert "live probe" in page


#: Crafted values: one closes a double-quoted attribute and opens a script, one opens an attribute in a single-quoted one.
CRAFTED = ('"><script>alert(1)</script>', "' onmouseover='x")
#: Pieces of the crafted values that must never show up outside a whole crafted value (a breakout leaves them).
FRAGMENTS = ("<script", "alert(1)", "onmouseover")
#: The only attributes the page's own markup writes: any other one broke out of a value.
ATTRIBUTES = {"lang", "charset", "name", "content", "id", "class", "title", "src", "alt", "href", "open"}


class _Page(html.parser.HTMLParser):
    """The page parsed: its tags, its attributes (name, value) and its text nodes, entities decoded."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.texts: list[tuple[str, str]] = []  # (enclosing tag, text)
        self._open: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [(name, value or "") for name, value in attrs]
        if tag not in ("meta", "img"):  # the page's void elements
            self._open.append(tag)

    def handle_endtag(self, tag):
        while self._open and self._open.pop() != tag:
            pass

    def handle_data(self, data):
        self.texts.append((self._open[-1] if self._open else "", data))


def _crafted_folder(folder, crafted: str) -> SweepResult:
    """A results folder whose every string the report shows is `crafted`: rows (names, paths, an extra column),
    settings (model id, a key and its value, checkpoint sources and revisions), top tokens, provenance, skipped
    checkpoints; the folder's own path ends with it."""
    from interpreto_anisotropy.results.store import SweepStore
    from interpreto_anisotropy.tangents.top_tokens import DirectionTokens, TokenInContext

    folder.mkdir(parents=True)
    rows = make_rows(steps=[0, 1], splits=[crafted], tangents=["early", crafted])
    for row in rows:
        row.update({key: crafted for key in ("layer", "checkpoint", "method", "source", "revision", "objective")})
        row.update(note=crafted, **{crafted: crafted})
    token = TokenInContext(crafted, crafted, crafted, 0.2074, 3, 1)
    directions = {kind: [DirectionTokens(0, 0.5, [token], [token])] for kind in ("early", crafted)}
    SweepStore(folder).save_top_tokens(crafted, 1, split_point=crafted, n_rows=1, directions=directions)
    keys = [[row["step"], crafted, row["tangent"]] for row in rows]
    provenance = [
        {"versions": {"torch": crafted}, "rows": keys[:2]},
        {"versions": {crafted: crafted}, "rows": keys[2:]},
    ]
    (folder / "provenance.jsonl").write_text("".join(json.dumps(line) + "\n" for line in provenance))
    config = {
        "model": crafted,
        crafted: crafted,
        "method": crafted,
        "nb_concepts": K,
        "checkpoints": [{"step": 0, "source": crafted, "revision": crafted}, {"step": 1, "source": crafted}],
    }
    skipped = [{"step": 9, "split_point": crafted, "tangent": crafted, "skipped": crafted}]
    return SweepResult(rows, config, folder, skipped)


@pytest.mark.parametrize("crafted", CRAFTED, ids=["script", "attribute"])
def test_every_string_the_report_shows_reaches_it_as_text_never_as_markup(tmp_path, crafted):
    folder = tmp_path.joinpath(*crafted.split("/"))  # the folder's path ends with the crafted value
    assert str(folder).endswith(crafted)
    path = write_report(_crafted_folder(folder, crafted), tmp_path / "report", dpi=20)  # title: the model's id
    page = _Page(path.read_text())
    assert "script" not in page.tags, "a crafted value opened a script"
    assert {name for name, _ in page.attributes} <= ATTRIBUTES, "a crafted value broke out of an attribute"
    values = [value for _, value in page.attributes] + [text for _, text in page.texts]
    broken = [value for value in values if any(piece in value.replace(crafted, "") for piece in FRAGMENTS)]
    assert not broken, f"a crafted value reached the page cut, or as markup: {broken[:3]}"
    # ... and it is shown, whole, wherever its field is shown
    texts = [text for _, text in page.texts]
    exact = {tag for tag, text in page.texts if text == crafted}
    assert {"td", "th", "mark", "span", "code"} <= exact, exact  # cells, headers, the token in its context
    assert [text for tag, text in page.texts if tag in ("title", "h1")] == [f"Checkpoint sweep report: {crafted}"] * 2
    for shown in (
        f"split points: {crafted}; tangents: early, {crafted} (defined below)",  # the line under the title
        f"from {folder}.",  # the results folder
        f"Split point {crafted}, {crafted} tangent (2 checkpoints):",  # the finding
        f"Split point {crafted}, checkpoint at step 1",  # the top tokens
        f"{crafted} tangent: 1 directions",
        f"from {crafted} at revisions {crafted} to {crafted}",  # the checkpoints setting
        f"step 9, split point {crafted}, {crafted}: {crafted}",  # a skipped checkpoint
        f"2 rows: torch {crafted}",  # the provenance of the rows
        f"2 rows: {crafted} {crafted}",
        f"{crafted}, rank k = {K}",  # the model card
    ):
        assert any(shown in text for text in texts), shown
    assert "score 0.2074, text 3, token 1" in {value for name, value in page.attributes if name == "title"}
    header = [value for name, value in page.attributes if name == "title" and value.startswith(f"{crafted}:")]
    assert header and "no description yet" in header[0]  # the crafted column's tooltip


@pytest.mark.parametrize("crafted", CRAFTED, ids=["script", "attribute"])
def test_a_token_tooltip_holds_a_crafted_text_literally(crafted):
    from interpreto_anisotropy.tangents.top_tokens import DirectionTokens, TokenInContext
    from interpreto_anisotropy.visualizations.report import render

    token = TokenInContext("a\nb", "c", "d", 0.2074, crafted, crafted)  # fields no file can hold
    table = {"split_point": crafted, "step": "1", "n_rows": "1", "tangents": {crafted: []}}
    table["tangents"][crafted].append(DirectionTokens(0, 0.5, [token], [token]))
    page = _Page(render("top_tokens.html.j2", top_tokens=[table]))
    assert "script" not in page.tags and {name for name, _ in page.attributes} <= ATTRIBUTES
    titles = [value for name, value in page.attributes if name == "title"]
    assert titles[4:] == [f"score 0.2074, text {crafted}, token {crafted}"] * 2  # after the 4 headers' meanings
    assert [text for tag, text in page.texts if tag == "mark"][1:] == ["a\u21b5b"] * 2  # after the explanation's
