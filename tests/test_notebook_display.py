# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How a `ProbeResult` and a `SweepResult` show in a notebook: a short `repr` of their headline numbers (the same
numbers as their fields, no arrays) and an HTML table that parses and escapes every string."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import interpreto_anisotropy as ia
from interpreto_anisotropy.results.verdict import adjusted_p_values

CRAFTED = "<script>alert('x')</script> & <b>bold</b>"
HEADLINE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|[^,;()\s]+)")


class _Page(HTMLParser):
    """The tags (checked balanced) and the text of an HTML fragment."""

    def __init__(self, html: str):
        super().__init__()
        self.tags, self.open, self.text, self.cells = [], [], [], []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.open.append(tag)
        if tag in ("td", "th"):
            self.cells.append("")

    def handle_endtag(self, tag):
        assert self.open.pop() == tag, f"</{tag}> closes another tag"

    def handle_data(self, data):
        self.text.append(data)
        if self.open and self.open[-1] in ("td", "th"):
            self.cells[-1] += data


def _page(html: str) -> _Page:
    page = _Page(html)
    assert page.open == [] and set(page.tags) <= {"div", "strong", "p", "table", "tr", "th", "td"}
    return page


def _probe_result(n_random: int = 20, **fields) -> ia.ProbeResult:
    rng = np.random.default_rng(0)
    fields = {"name": "tangent", "method": "pca", **fields}
    return ia.ProbeResult.build(
        energy_share=0.4,
        control_energy_shares=rng.uniform(0.05, 0.15, 20),
        oracle_energy_share=0.6,
        isoscore_star=0.2,
        isoscore_star_without_tangent=0.1,
        isoscore_star_without_controls=rng.uniform(0.3, 0.4, 20),
        random_energy_shares=rng.uniform(0.05, 0.45, n_random),
        isoscore_star_without_random=rng.uniform(0.0, 0.4, n_random),
        chance_std=0.02,
        dim=64,
        rank=8,
        n_tokens=1234,
        n_sequences=17,
        loss=3.0,
        analytic_null=0.6 * 8 / 56,
        ci_low=0.35,
        ci_high=0.45,
        confidence=0.95,
        p_value=1 / 21,
        split_point="gpt_neox.layers.1",
        **fields,
    )


def _headline(text: str) -> dict[str, str]:
    return dict(HEADLINE.findall(text))


def _same(shown: str, value) -> bool:
    """A repr's value is the field's: strings by their repr, integers exactly, floats to 4 significant digits."""
    if isinstance(value, str) or value is None:
        return shown == repr(value)
    if isinstance(value, (int, np.integer)):
        return shown == str(int(value))
    if math.isnan(value):
        return shown == "nan"
    return float(shown) == pytest.approx(value, rel=5e-4)


def test_a_probe_results_repr_is_its_headline_numbers_not_its_arrays():
    result = _probe_result()
    text = repr(result)
    assert len(text) < 450 and "array" not in text and "[" not in text
    assert text.startswith("ProbeResult(name='tangent', method='pca', split_point='gpt_neox.layers.1', ")
    shown = _headline(text)
    assert list(shown) == list(ia.ProbeResult._HEADLINE)
    for name in ("energy_share", "control_mean", "p_value_exact", "anisotropy_share", "rank", "n_tokens"):
        assert name in shown
    for name, value in shown.items():
        assert _same(value, getattr(result, name)), (name, value, getattr(result, name))
    assert len(repr(_probe_result(n_random=999))) < 450  # however many draws
    assert str(result).startswith("ProbeResult 'tangent' (pca")  # print keeps the whole table and the finding


def test_a_probe_results_html_parses_escapes_and_shows_its_table():
    result = _probe_result(name=CRAFTED, method="<i>pca</i>")
    html = result._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    page = _page(html)
    text = "".join(page.text)
    assert CRAFTED in text and "<i>pca</i>" in text  # shown as written, never as markup
    values = page.cells[1::2]
    assert [f"{label}" for label, _ in result._table_rows()] == page.cells[0::2]
    assert values == [value for _, value in result._table_rows()]
    assert f"{result.energy_share:.4f}  [{result.ci_low:.4f}, {result.ci_high:.4f}]" in values
    assert f"{result.p_value_exact:.3f}" in values and f"{result.energy_ratio:.2f}" in values
    assert "Finding:" in text  # the finding in words, under the caption


def _sweep_rows(steps=30, splits=("gpt_neox.layers.0", "gpt_neox.layers.1"), tangents=("early", "each")):
    rng = np.random.default_rng(1)
    return [
        {
            "step": step,
            "checkpoint": f"step-{step}",
            "split_point": split,
            "tangent": tangent,
            "rank": 8,
            "n_tokens": int(rng.integers(900, 1100)),
            "energy_share": float(rng.uniform(0.2, 0.5)),
            "control_mean": float(rng.uniform(0.05, 0.1)),
            "energy_ratio": float(rng.uniform(2, 8)),
            "p_value": 1 / 21,
            "p_value_exact": float(rng.choice([1 / 21, 0.5])),
            "anisotropy_share": float(rng.normal(0, 0.02)),
            "anisotropy_p_value_exact": None,  # as rows written without random subspaces' IsoScore* hold
            "control_energy_shares": rng.uniform(0.05, 0.1, 20).tolist(),
        }
        for split in splits
        for step in range(steps)
        for tangent in tangents
    ]


def test_a_sweep_results_repr_counts_its_rows_and_gives_each_curves_last_numbers():
    rows = _sweep_rows(splits=("gpt_neox.layers.0", "gpt_neox.layers.1"))
    table = ia.SweepResult(rows, {}, None, [{"step": 30, "checkpoint": "step-30", "skipped": "CheckpointError: x"}])
    text = repr(table)
    assert len(text) < 800 and "control_energy_shares" not in text and "[" not in text
    assert text.startswith("SweepResult(rows=120, checkpoints=30, steps='0..29', skipped=1, results_dir=None; ")
    assert text.endswith("; 1 more curves)")  # four curves: three named
    parts = text[len("SweepResult(") : -1].split("; ")[1:-1]
    assert len(parts) == 3
    for part in parts:
        curve = re.match(r"last of (\S+)/(\w+): ", part)
        [last] = [r for r in rows if (r["split_point"], r["tangent"]) == curve.groups() and r["step"] == 29]
        shown = _headline(part)
        assert shown.keys() == {"step", "energy_share", "control_mean", "p_value_exact", "anisotropy_share"}
        for name, value in shown.items():
            assert _same(value, last[name]), (name, value, last[name])


def test_a_sweep_results_html_is_a_bounded_table_that_escapes_its_strings(tmp_path):
    rows = _sweep_rows(steps=15)
    rows[0]["checkpoint"] = CRAFTED
    skipped = [{"step": 99, "checkpoint": "step-99", "skipped": "CheckpointError: <img src=x onerror=alert(1)>"}]
    table = ia.SweepResult(rows, {}, tmp_path / "a<b", skipped)
    html = table._repr_html_()
    assert "<script>" not in html and "<img" not in html
    page = _page(html)
    text = "".join(page.text)
    assert CRAFTED in page.cells and "<img src=x onerror=alert(1)>" in text and "a<b" in text
    header = page.cells[: len(page.cells) // (page.tags.count("tr"))]
    assert header[:4] == ["step", "checkpoint", "split_point", "tangent"] and "energy_share" in header
    assert page.tags.count("tr") == 1 + 40 + 1  # the header, the first and last 20 rows, and the gap between
    assert f"... {len(rows) - 40} rows ..." in page.cells
    width = len(header)
    body = [page.cells[i : i + width] for i in range(width, len(page.cells), width)]
    first, last = body[0], body[-1]
    adjusted = adjusted_p_values(rows, {})
    derived = {  # the verdict's p-value, and the approximate one under its label
        "p (exact, adjusted)": lambda index: adjusted[index],
        "approximate p (normal controls; anti-conservative)": lambda index: rows[index].get("p_value"),
    }
    for index in (0, -1):
        rows[index] = {**rows[index], **{name: value(index) for name, value in derived.items()}}
    for cells, row in ((first, rows[0]), (last, rows[-1])):
        for name, cell in zip(header, cells, strict=True):
            assert (
                cell == str(row[name])
                if name in ("step", "checkpoint", "split_point", "tangent")
                else _same(cell, row[name])
            ), (name, cell, row[name])
    assert isinstance(table.summary_table(), str)  # print(table.summary_table()) still works as before


def test_an_empty_sweep_result_still_shows():
    table = ia.SweepResult([], {})
    assert repr(table) == "SweepResult(rows=0, checkpoints=0, steps='none', skipped=0, results_dir=None)"
    assert _page(table._repr_html_()).cells[:1] == ["step"]
