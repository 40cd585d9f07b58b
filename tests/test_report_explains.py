# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The report explains itself: every column defined from one table (`results.schema.COLUMNS`), tangent
kinds defined, a title from the model's name, a model card, compact settings and the software versions.
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import pytest
from test_plotting_report import make_rows, rows_table

from interpreto_anisotropy.results import schema as columns
from interpreto_anisotropy.results.table import SweepResult
from interpreto_anisotropy.visualizations import model_card
from interpreto_anisotropy.visualizations.report import COLUMNS_CSV_FILE, write_report

ROOT = Path(__file__).resolve().parents[1]
# Fields a real sweep writes (the demo's rows.jsonl), including the per-control lists and the bookkeeping.
SWEEP_FIELDS = (
    "step checkpoint source revision layer split_point tangent name method n_tokens n_sequences dim rank loss "
    "energy_share chance control_energy_shares control_mean analytic_null energy_ratio p_value ci_low ci_high "
    "confidence oracle_energy_share anisotropy_capture isoscore_star isoscore_star_without_tangent "
    "isoscore_star_without_controls delta_isoscore_star delta_isoscore_star_controls delta_isoscore_star_p_value "
    "objective reduction seed n_skipped_batches n_skipped_sequences extra activation_n activation_d "
    "activation_mean_cosine activation_mean_cosine_centered activation_isoscore activation_isoscore_star "
    "activation_partition_isotropy activation_partition_isotropy_uncentered activation_effective_rank "
    "activation_rogue_top_share activation_n_outlier_dimensions freq_distance_pearson freq_distance_spearman "
    "freq_distance_p_value freq_distance_n on_manifold_entropy drift_reference_mean_angle drift_reference_max_angle "
    "drift_previous_mean_angle drift_previous_max_angle drift_previous_step wall_seconds fingerprint skipped "
    "ci delta_isoscore_star_controls_mean p_value_holm p_value_bh p_value_exact p_value_exact_holm p_value_exact_bh"
).split()


@pytest.mark.parametrize("name", SWEEP_FIELDS)
def test_every_field_has_a_real_description(name):
    column = columns.describe(name)
    assert column is not None, f"add {name!r} to COLUMNS in results/schema.py"
    assert len(column.meaning) > 20 and column.meaning.lower() != name.replace("_", " ")
    assert isinstance(column.unit, columns.Unit)


def test_one_unit_per_quantity():
    assert columns.describe("on_manifold_entropy").unit is columns.Unit.NATS
    for name in SWEEP_FIELDS:
        if name.startswith("drift_") and name.endswith("_angle"):
            assert columns.describe(name).unit is columns.Unit.RADIANS, name
    assert columns.describe("wall_seconds").unit is columns.Unit.SECONDS


def test_column_names_are_unique():
    names = [column.name for column in columns.COLUMNS]
    assert len(names) == len(set(names))


def test_every_concept_link_names_a_heading_of_the_concepts_page():
    from markdown.extensions.toc import slugify  # the slugs mkdocs' toc extension gives the headings

    page = Path(__file__).resolve().parents[1] / "docs" / "concepts.md"
    headings = [
        line.lstrip("#").strip().replace("\\*", "*") for line in page.read_text().splitlines() if line.startswith("#")
    ]
    anchors = {slugify(heading, "-") for heading in headings}
    missing = {
        column.name: column.concept for column in columns.COLUMNS if column.concept and column.concept not in anchors
    }
    assert not missing, f"columns linking to anchors docs/concepts.md does not have: {missing}"


def test_docs_column_reference_is_generated_from_columns():
    page = (ROOT / "docs" / "columns.md").read_text()
    assert page == columns.reference_markdown(), (
        "docs/columns.md is out of date: python -m interpreto_anisotropy.results.schema > docs/columns.md"
    )
    assert "columns.md" in (ROOT / "mkdocs.yml").read_text()


@pytest.fixture(scope="module")
def toy_report(toy_checkpoints, tmp_path_factory):
    config = {
        "checkpoints": [
            {"step": step, "source": str(path), "revision": None}
            for step, path in zip(toy_checkpoints.checkpoint_steps, toy_checkpoints.checkpoints, strict=True)
        ],
        "objective": "causal_lm",
        "method": "pca",
        "nb_concepts": 8,
        "early_steps": list(range(0, 40, 2)),
        "method_kwargs": {"n_components": 8},
    }
    result = SweepResult(make_rows(), config)
    path = write_report(result, tmp_path_factory.mktemp("toy") / "report", dpi=30)
    return result, path, path.read_text()


def test_every_header_has_a_tooltip_and_a_definition(toy_report):
    result, _, page = toy_report
    headers = re.findall(r'<th[^>]*title="([^"]*)"[^>]*>([^<]*)</th>', rows_table(page))
    assert headers
    definitions = page[page.index('id="column-definitions"') :]
    for tooltip, name in headers:
        tooltip = html.unescape(tooltip)
        assert tooltip != name and len(tooltip) > 30 and "Unit:" in tooltip, (name, tooltip)
        assert f"<td><code>{name}</code></td>" in definitions, name
    assert "radians" in definitions and "nats" in definitions and "seconds" in definitions


def test_rows_columns_csv_describes_every_csv_column(toy_report):
    result, path, _ = toy_report
    with (path.parent / "rows.csv").open() as handle:
        header = next(csv.reader(handle))
    with (path.parent / COLUMNS_CSV_FILE).open() as handle:
        notes = list(csv.DictReader(handle))
    assert [note["column"] for note in notes] == header
    assert all(note["meaning"] and note["unit"] for note in notes)


def test_tangent_kinds_title_model_card_and_versions(toy_report, toy_checkpoints):
    _, _, page = toy_report
    first_use = page.index("tangents: early, each")
    assert page.index("<b>early</b>: the reference tangent") < page.index("<h2>Figures</h2>")
    assert first_use < page.index("<b>early</b>")
    folder = Path(toy_checkpoints.checkpoints[0]).parent.name
    assert f"<title>Checkpoint sweep report: {html.escape(folder)}</title>" in page
    card = page[page.index('<table class="card">') :]
    card = card[: card.index("</table>")]
    assert "GPTNeoX" in card and "layers" in card and "parameters" in card and "unknown" not in card
    assert "causal_lm" in card and "rank k = 8" in card
    assert "torch " in page and "transformers " in page and "interpreto " in page


def test_settings_are_compact(toy_report, toy_checkpoints):
    _, _, page = toy_report
    settings = page[page.index('<table class="settings">') :]
    assert "<pre>" not in settings
    n = len(toy_checkpoints.checkpoints)
    assert f"{n} checkpoints, steps 0 to {max(toy_checkpoints.checkpoint_steps)}" in settings
    assert "checkpoint-{step}" in settings
    assert "20 steps, steps 0 to 38: 0, 2, 4, 6, ..., 32, 34, 36, 38" in settings


def test_model_card_of_a_hub_model_says_unknown_and_downloads_nothing():
    config = {"checkpoints": [{"step": 0, "source": "EleutherAI/pythia-160m", "revision": "step0"}]}
    card = model_card.model_card(config, [{"dim": 768}])
    assert card["model"] == "EleutherAI/pythia-160m" and card["width d"] == "768"
    assert card["architecture"] == card["parameters"] == model_card.UNKNOWN
