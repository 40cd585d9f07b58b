# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The sweep's verdict (`results.verdict`): its numbers recomputed from the rows here, its words, and where it is shown
(the report's first section, `SweepResult.summary()`, the end of the CLI's output, ``print(ProbeResult)``).

Rows are built by hand, so these tests need no model.
"""

from __future__ import annotations

import html.parser
import json
import math
import random

import numpy as np
import pytest
from scipy.stats import false_discovery_control

import interpreto_anisotropy as ia
from interpreto_anisotropy.cli import main
from interpreto_anisotropy.probing.result import (
    ANISOTROPY_P_APPROXIMATE_COLUMN,
    ANISOTROPY_P_EXACT_COLUMN,
    CAVEAT,
    anisotropy_p_value,
)
from interpreto_anisotropy.results.table import SweepResult
from interpreto_anisotropy.results.verdict import sweep_verdict, verdict_text

SPLITS = ("gpt_neox.layers.1", "layer<b>&2</b>")
TANGENTS = ("early", "each")
STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
LEVEL = 0.05


def make_rows(*, n_random: int = 999, seed: int = 0) -> list[dict]:
    """Rows of two split points x two tangent kinds over ten steps, with p-values spread around the level."""
    rng = random.Random(seed)
    rows = []
    for split in SPLITS:
        for tangent in TANGENTS:
            for step in STEPS:
                rank = rng.randint(1, n_random + 1)
                rows.append(
                    {
                        "step": step,
                        "layer": split,
                        "split_point": split,
                        "tangent": tangent,
                        "energy_ratio": rng.uniform(0.5, 20.0),
                        "p_value": rng.choice([1 / 21, 0.1, 0.5]),
                        "p_value_exact": rank / (n_random + 1) if rng.random() < 0.5 else 1 / (n_random + 1),
                        "random_energy_shares": [0.1] * n_random,
                        "control_energy_shares": [0.1] * 20,
                        "anisotropy_share": rng.uniform(-0.4, 0.4),
                        "anisotropy_share_p_value": rng.choice([1 / 21, 0.5, 1.0]),
                    }
                )
    rows[3]["energy_ratio"] = math.nan  # a hole, as a NaN read back from JSON would be None
    rows[5]["p_value_exact"] = None
    return rows


def holm_rejections(p_values: list[float], level: float) -> int:
    """Holm's step-down procedure, written out: reject the i-th smallest while p_(i) <= level / (m - i)."""
    ordered = sorted(p_values)
    rejected = 0
    for i, value in enumerate(ordered):
        if value > level / (len(ordered) - i):
            break
        rejected += 1
    return rejected


def curves_of(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    curves: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        curves.setdefault((row["split_point"], row["tangent"]), []).append(row)
    return curves


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


# ---------------------------------------------------------------------------------------------------- numbers
def test_the_verdict_recomputed_curve_by_curve_with_holm():
    rows = make_rows()
    verdict = sweep_verdict(rows)
    assert (verdict.correction, verdict.family, verdict.level, verdict.p_column) == (
        "holm",
        "split_point_and_tangent",
        LEVEL,
        "p_value_exact",
    )
    curves = curves_of(rows)
    assert [(curve.split_point, curve.tangent) for curve in verdict.curves] == list(curves)
    for curve in verdict.curves:
        mine = curves[(curve.split_point, curve.tangent)]
        best_ratio, best_step = -math.inf, None
        for row in mine:
            if finite(row["energy_ratio"]) and row["energy_ratio"] > best_ratio:
                best_ratio, best_step = row["energy_ratio"], row["step"]
        last = mine[-1]
        for row in mine:
            if row["step"] > last["step"]:
                last = row
        tested = [row["p_value_exact"] for row in mine if finite(row["p_value_exact"])]
        assert (curve.peak_ratio, curve.peak_step) == (best_ratio, best_step)
        assert (curve.last_ratio, curve.last_step) == (last["energy_ratio"], last["step"])
        assert curve.n_rows == len(mine) and curve.n_tested == len(tested)
        assert curve.n_raw == sum(value <= LEVEL for value in tested)
        assert curve.n_significant == curve.n_surviving["holm"] == holm_rejections(tested, LEVEL)
        bh = false_discovery_control(tested, method="bh") if tested else []
        assert curve.n_surviving["bh"] == sum(value <= LEVEL for value in bh)  # the other correction, same family
        assert curve.anisotropy_share == last["anisotropy_share"]
        assert (curve.anisotropy_p, curve.anisotropy_p_exact) == (last["anisotropy_share_p_value"], False)
        assert curve.n_positive_anisotropy == sum(row["anisotropy_share"] > 0 for row in mine)
    assert sum(curve.n_significant for curve in verdict.curves) > 0, "the rows should let some checkpoints pass"


def test_the_verdict_with_benjamini_hochberg_over_every_row_matches_scipy():
    rows = make_rows(seed=3)
    verdict = sweep_verdict(rows, {"correction": "bh", "family": "all"})
    assert (verdict.correction, verdict.family) == ("bh", "all")
    tested = [row for row in rows if finite(row["p_value_exact"])]
    adjusted = false_discovery_control([row["p_value_exact"] for row in tested], method="bh")
    significant: dict[tuple[str, str], int] = {}
    for row, value in zip(tested, adjusted, strict=True):
        key = (row["split_point"], row["tangent"])
        significant[key] = significant.get(key, 0) + int(value <= LEVEL)
    assert {(curve.split_point, curve.tangent): curve.n_significant for curve in verdict.curves} == significant
    assert all(curve.n_surviving["bh"] == curve.n_significant for curve in verdict.curves)
    # Holm over the same family (every row), in the step-down procedure written out
    holm = holm_rejections([row["p_value_exact"] for row in tested], LEVEL)
    assert sum(curve.n_surviving["holm"] for curve in verdict.curves) == holm
    assert "Benjamini-Hochberg (false discovery rate) over every row of the sweep" in verdict_text(verdict)


def test_arguments_override_the_config_and_the_level_is_read_from_it():
    rows = make_rows()
    verdict = sweep_verdict(rows, {"correction": "bh", "level": 0.01}, correction="holm")
    assert (verdict.correction, verdict.level) == ("holm", 0.01)
    for curve in verdict.curves:
        mine = curves_of(rows)[(curve.split_point, curve.tangent)]
        tested = [row["p_value_exact"] for row in mine if finite(row["p_value_exact"])]
        assert curve.n_significant == holm_rejections(tested, 0.01)


def test_rows_without_an_exact_p_value_are_tested_on_the_approximate_one_and_say_so():
    rows = [{key: value for key, value in row.items() if key != "p_value_exact"} for row in make_rows()]
    verdict = sweep_verdict(rows)
    assert verdict.p_column == "p_value"
    for curve in verdict.curves:
        tested = [row["p_value"] for row in curves_of(rows)[(curve.split_point, curve.tangent)]]
        assert curve.n_significant == holm_rejections(tested, LEVEL)
    assert "p_value (the paper's rank among normal controls, approximate" in verdict_text(verdict)


# ---------------------------------------------------------------------------------------------------- floor
def test_the_p_value_floor_that_forbids_passing_is_said_with_the_draws_needed():
    rows = [{**row, "p_value_exact": 1 / 21} for row in make_rows(n_random=20)]  # every row at the floor
    verdict = sweep_verdict(rows)
    for curve in verdict.curves:
        m = curve.n_tested
        assert m / 21 > LEVEL and curve.n_significant == 0
        assert f"ask for n_random={math.ceil(m / LEVEL) - 1} or more" in curve.resolution
        assert "1/21 = 0.048" in curve.resolution
    assert f"ask for n_random={math.ceil(len(STEPS) / LEVEL) - 1} or more" in verdict_text(verdict)
    # Benjamini-Hochberg leaves a family of equal floors at the floor: 1/21 passes 0.05, so no note
    bh = sweep_verdict(rows, correction="bh")
    assert all(curve.resolution == "" and curve.n_significant == curve.n_tested for curve in bh.curves)
    # over every row, Holm's family is the whole sweep: the draws needed follow its size
    whole = sweep_verdict(rows, family="all")
    tested = sum(curve.n_tested for curve in whole.curves)
    assert all(f"n_random={math.ceil(tested / LEVEL) - 1} or more" in curve.resolution for curve in whole.curves)


def test_no_floor_note_when_the_draws_allow_passing():
    rows = [{**row, "p_value_exact": 0.5} for row in make_rows(n_random=999)]
    assert all(curve.resolution == "" for curve in sweep_verdict(rows).curves)


# ---------------------------------------------------------------------------------------------------- anisotropy
def test_an_exact_anisotropy_p_value_is_preferred_when_a_row_has_one():
    column = ANISOTROPY_P_EXACT_COLUMN
    row = {ANISOTROPY_P_APPROXIMATE_COLUMN: 1.0, column: 0.002}
    assert anisotropy_p_value(row) == (0.002, True)
    assert anisotropy_p_value({ANISOTROPY_P_APPROXIMATE_COLUMN: 1.0, column: None}) == (1.0, False)
    rows = [{**row, column: 0.002, "anisotropy_share": -0.28} for row in make_rows()]
    text = verdict_text(sweep_verdict(rows))
    assert "(p = 0.002, exact)" in text and "approximate: the paper's normal-control p" not in text


def test_a_negative_anisotropy_share_is_explained():
    rows = [{**row, "anisotropy_share": -0.28, "anisotropy_share_p_value": 1.0} for row in make_rows()]
    text = verdict_text(sweep_verdict(rows))
    assert "-0.280 (p = 1.000, approximate: the paper's normal-control p)" in text
    assert "LESS isotropic than removing a normal control" in text
    assert "positive at 0 of 10 checkpoints" in text
    assert text.splitlines()[0] == "Finding" and text.splitlines()[-1] == CAVEAT


# ---------------------------------------------------------------------------------------------------- where shown
def test_summary_is_the_verdict_and_summary_table_is_unchanged():
    table = SweepResult(make_rows(), {"correction": "holm"})
    assert table.summary() == verdict_text(sweep_verdict(table.rows, table.config))
    assert table.summary_table().splitlines()[0].split()[:3] == ["step", "split", "point"]
    with pytest.raises(ia.errors.InvalidInputError):
        SweepResult([]).summary()


def test_summary_table_and_notebook_table_show_the_verdict_s_p_value_first():
    """``p_adj`` (summary_table) and "p (exact, adjusted)" (the notebook table) are p_value_exact adjusted within the
    declared family by the declared correction, before every other p column; the approximate p comes last, labelled."""
    from interpreto_anisotropy.results.verdict import adjust

    config = {"family": "tangent", "correction": "bh", "level": 0.1}
    table = SweepResult(make_rows(), config)
    expected = adjust(table.rows, column="p_value_exact", correction="bh", family="tangent")
    lines = table.summary_table().splitlines()
    header = lines[0].split()
    p_columns = [name for name in header if name.startswith("p_")]
    assert p_columns == ["p_adj", "p_exact", "p_aniso", "p_approx"]
    column = header.index("p_adj") - 1  # "split point" is two words in the header, one cell in the rows
    for line, row, value in zip(lines[2:], table.rows, expected, strict=False):
        cell = line.split()[column]
        assert cell == "-" if value is None else float(cell) == pytest.approx(value, abs=5e-5), (row, cell)
    assert lines[-1].startswith("p_adj: p_value_exact adjusted by Benjamini-Hochberg within each tangent kind")
    assert "p_approx: approximate p (normal controls; anti-conservative)" in lines[-1]
    page = table._repr_html_()
    headers = [cell for cell in page.split("<th>")[1:]]
    names = [cell[: cell.index("</th>")] for cell in headers]
    approximate = "approximate p (normal controls; anti-conservative)"
    assert names.index("energy_ratio") + 1 == names.index("p (exact, adjusted)") < names.index("p_value_exact")
    assert names[-1] == approximate and "p_value" not in names
    assert "p (exact, adjusted): p_value_exact adjusted by Benjamini-Hochberg within each tangent kind" in page


class _Sections(html.parser.HTMLParser):
    """The page's h2 headings and its first table, in document order."""

    def __init__(self):
        super().__init__()
        self.order: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        self._in_h2 = tag == "h2"
        if tag in ("table", "figure"):
            self.order.append(f"<{tag}>")

    def handle_endtag(self, tag):
        self._in_h2 = self._in_h2 and tag != "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.order.append(data.strip())


def test_the_reports_first_section_is_the_finding(tmp_path):
    rows = make_rows()
    page = ia.write_report(SweepResult(rows, {"n_random": 999}), tmp_path / "report", dpi=20).read_text()
    parser = _Sections()
    parser.feed(page)
    assert parser.order[0] == "Finding", parser.order[:5]
    assert parser.order.index("Finding") < parser.order.index("What this shows") < parser.order.index("Model")
    assert parser.order.index("Finding") < parser.order.index("<table>")
    finding = page[page.index('<section id="finding"') : page.index("</section>")]
    verdict = sweep_verdict(rows)
    for curve in verdict.curves:
        assert f"{curve.n_significant} of {curve.n_tested} checkpoints significant" in finding
        assert f"peaks at {curve.peak_ratio:.2f} (step {curve.peak_step})" in finding
    # split point names are escaped: no tag comes from the rows
    assert "layer&lt;b&gt;&amp;2&lt;/b&gt;" in finding and "layer<b>&2</b>" not in page


def test_the_report_command_ends_with_the_summary(tmp_path, capsys):
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"nb_concepts": 4, "n_controls": 20}))
    # a results folder refuses names with markup (the report test above feeds such a name to the report directly)
    rows = [row for row in make_rows() if row["split_point"] == SPLITS[0]]
    # as the store writes them: a missing value is null (a NaN constant in a results file is refused)
    holes = [{key: None if value != value else value for key, value in row.items()} for row in rows]
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in holes))
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert printed.rstrip("\n").endswith(SweepResult.load(folder).summary())


def test_print_probe_result_says_what_it_found():
    rng = np.random.default_rng(0)
    controls, randoms = rng.uniform(0.05, 0.15, 20), rng.uniform(0.05, 0.45, 20)
    without_controls = rng.uniform(0.3, 0.4, 20)
    p_controls = (1 + sum(value >= 0.4 for value in controls)) / 21
    result = ia.ProbeResult.build(
        energy_share=0.4,
        control_energy_shares=controls,
        oracle_energy_share=0.6,
        isoscore_star=0.2,
        isoscore_star_without_tangent=0.1,
        isoscore_star_without_controls=without_controls,
        random_energy_shares=randoms,
        chance_std=0.02,
        dim=64,
        rank=8,
        name="tangent",
        method="pca",
        n_tokens=100,
        n_sequences=10,
        loss=3.0,
        analytic_null=0.6 * 8 / 56,
        ci_low=0.35,
        ci_high=0.45,
        confidence=0.95,
        p_value=p_controls,
    )
    text = str(result)
    ratio = 0.4 / controls.mean()
    exact = (1 + sum(value >= 0.4 for value in randoms)) / 21
    share = (0.1 - 0.2) - float(np.mean(without_controls - 0.2))
    assert share < 0 and 1 / 21 < exact < 1
    assert "holds 0.4000 of the gradient energy (95 % bootstrap interval [0.3500, 0.4500])" in text
    assert f"against 0.1250 by chance (k/d) and {controls.mean():.4f} for its 20 normal controls" in text
    assert f"energy ratio of {ratio:.2f}" in text
    assert f"p_value_exact = {exact:.3f} (rank among 20 uniformly random subspaces, exact; at least 1/21)" in text
    assert f"p_value = {p_controls:.3f} (rank among the normal controls, approximate)" in text
    assert f"Anisotropy share {share:+.3f} (p = 1.000, approximate" in text
    assert "LESS isotropic than removing a normal control" in text
    assert text.splitlines()[1].startswith("  Finding:") and "energy ratio E_T / E_N" in text  # the table follows
