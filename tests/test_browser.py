# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The built docs and a sweep's report, opened in headless Chromium as a reader opens them (offline).

The site is served from 127.0.0.1 (``helpers.docs_site`` builds it once per session); the report, the one the
README's own commands write in the folder ``make demo`` leaves (``helpers.readme_run``), is opened from disk
(file://), as a reader opens it. In the browser:

* formulas are typeset: every ``.arithmatex`` element of a page holds KaTeX output, none is a KaTeX error, and no
  raw ``\\(`` or ``\\[`` is left in the text a reader sees (code blocks aside);
* every column of the report's tables has a description that is more than its name (a tooltip and an entry of
  the column definitions, from the one column table);
* no page logs a console error, throws, or fails to load a script, stylesheet, font, image or its search index;
* each tutorial page links its notebook, and the link downloads a notebook.

Chromium is Debian's ``chromium`` package, which ``.ci/run`` installs; without it these tests skip, except when
``CI`` is true, where they fail (CI must run them). Set ``ANISOTROPY_SCREENSHOTS=DIR`` to keep a screenshot of each
page visited.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers.browser import Browser, chromium_or_skip, serve

pytest_plugins = ["helpers.docs_site", "helpers.readme_run"]
pytest.importorskip("websocket", reason="websocket-client comes with the test extra: pip install -e '.[test]'")

TUTORIALS = sorted(path.stem for path in (Path(__file__).resolve().parents[1] / "docs" / "tutorials").glob("*.py"))
#: Pages opened in any case (site paths); every page whose HTML holds a formula is opened too.
DOCS_PAGES = (
    "",
    "getting-started/",
    "concepts/",
    "statistics/",
    "columns/",
    "how-to/reading-the-report/",
    "tutorials/",
    *(f"tutorials/{name}/" for name in TUTORIALS),
)
#: The first screen of the report: the browser's window is 1280 x 900 (`helpers.browser`).
FOLD_PX = 900
#: A column description says more than the name: at least this many characters.
MIN_DESCRIPTION_CHARS = 20

#: Text a reader sees, without code blocks and KaTeX output (whose MathML copy keeps the TeX source).
VISIBLE_TEXT_JS = r"""
const visibleText = (root) => {
  const copy = root.cloneNode(true);
  copy.querySelectorAll("pre, code, script, style, .katex").forEach((node) => node.remove());
  return copy.textContent;
};
const rawDelimiters = (text) =>
  [...text.matchAll(/\\[(\[]/g)].map((match) => text.slice(Math.max(0, match.index - 30), match.index + 30));
"""

DOCS_PROBE = (
    "(async () => {"
    + VISIBLE_TEXT_JS
    + r"""
  const article = document.querySelector("article") || document.body;
  const formulas = () => [...article.querySelectorAll(".arithmatex")];
  const typeset = () => formulas().filter((node) => node.querySelector(".katex")).length;
  for (let waited = 0; typeset() < formulas().length && waited < 5000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const notebooks = [];
  for (const link of article.querySelectorAll("a[href$='.ipynb']")) {
    const response = await fetch(link.href);
    const notebook = response.ok ? await response.json() : null;
    notebooks.push({
      text: link.textContent.trim(),
      status: response.status,
      nbformat: notebook && notebook.nbformat,
      cells: notebook ? notebook.cells.length : 0,
    });
  }
  return {
    title: document.title,
    formulas: formulas().length,
    typeset: typeset(),
    katexElements: article.querySelectorAll(".katex").length,
    katexErrors: article.querySelectorAll(".katex-error").length,
    raw: rawDelimiters(visibleText(article)),
    notebooks,
  };
})()
"""
)

REPORT_PROBE = (
    "(() => {"
    + VISIBLE_TEXT_JS
    + r"""
  const definitions = {};
  for (const row of document.querySelectorAll("table.definitions tbody tr")) {
    const cells = row.querySelectorAll("td");
    definitions[cells[0].textContent.trim()] = cells[1].textContent.trim();
  }
  const columns = [];
  for (const table of document.querySelectorAll("table:not(.definitions)")) {
    for (const header of table.querySelectorAll("thead th")) {
      const name = header.firstChild.textContent.trim();  // the column's name, without its label below
      columns.push({table: table.className, name, tooltip: header.title, definition: definitions[name] || ""});
    }
  }
  return {
    title: document.title,
    headings: [...document.querySelectorAll("h2")].map((heading) => heading.textContent.trim()),
    columns,
    definitions: Object.keys(definitions).length,
    images: [...document.images].map((image) => ({loaded: image.complete && image.naturalWidth > 0,
                                                  width: image.naturalWidth})),
    finding: (() => {
      const section = document.querySelector("section#finding");
      if (!section) return null;
      const box = section.getBoundingClientRect();
      return {top: box.top + window.scrollY, bottom: box.bottom + window.scrollY, text: section.innerText};
    })(),
    viewport: {width: window.innerWidth, height: window.innerHeight},
    raw: rawDelimiters(visibleText(document.body)),
  };
})()
"""
)


def _screenshot(name: str) -> Path | None:
    folder = os.environ.get("ANISOTROPY_SCREENSHOTS")
    return Path(folder) / f"{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_') or 'index'}.png" if folder else None


@pytest.fixture(scope="module")
def browser():
    with Browser(chromium_or_skip()) as session:
        yield session


@pytest.fixture(scope="module")
def docs_visits(browser, built_site) -> dict:
    """{site path: PageVisit} for `DOCS_PAGES` and every page with a formula."""
    folders = [
        page.parent.relative_to(built_site).as_posix()
        for page in built_site.rglob("index.html")
        if 'class="arithmatex"' in page.read_text("utf-8")
    ]
    pages = sorted(set(DOCS_PAGES) | {"" if folder == "." else f"{folder}/" for folder in folders})
    with serve(built_site) as base:
        return {page: browser.visit(base + page, DOCS_PROBE, screenshot=_screenshot(f"docs {page}")) for page in pages}


@pytest.fixture(scope="module")
def report_visit(browser, readme_cli):
    report = readme_cli.folder / "runs" / "demo" / "cli-sweep" / "report"
    assert (report / "index.html").is_file(), "the README's commands wrote no report (see test_readme.py)"
    # Opened from disk, as a reader opens it (the report is one self-contained file next to its CSVs).
    return browser.visit((report / "index.html").as_uri(), REPORT_PROBE, screenshot=_screenshot("report"))


@pytest.mark.slow
def test_docs_pages_log_no_error(docs_visits):
    problems = {page: visit.problems for page, visit in docs_visits.items() if visit.problems}
    assert not problems, f"console errors or failed loads: {problems}"
    assert all(visit.value["title"] for visit in docs_visits.values())


@pytest.mark.slow
def test_docs_formulas_are_typeset(docs_visits):
    with_math = {page: visit.value for page, visit in docs_visits.items() if visit.value["formulas"]}
    assert {"concepts/", "statistics/"} <= set(with_math), f"formulas expected on these pages: {sorted(with_math)}"
    for page, found in with_math.items():
        assert found["typeset"] == found["formulas"], f"{page}: {found['typeset']} of {found['formulas']} typeset"
        assert found["katexErrors"] == 0, f"{page}: {found['katexErrors']} formulas KaTeX could not parse"


@pytest.mark.slow
def test_docs_show_no_raw_tex(docs_visits):
    raw = {page: visit.value["raw"] for page, visit in docs_visits.items() if visit.value["raw"]}
    assert not raw, f"raw TeX delimiters in the visible text: {raw}"


@pytest.mark.slow
@pytest.mark.parametrize("tutorial", TUTORIALS)
def test_tutorial_page_links_a_notebook_that_downloads(docs_visits, tutorial):
    notebooks = docs_visits[f"tutorials/{tutorial}/"].value["notebooks"]
    assert [link["text"] for link in notebooks] == ["Download as notebook"]
    assert notebooks[0]["status"] == 200 and notebooks[0]["nbformat"] == 4 and notebooks[0]["cells"] > 1


@pytest.mark.slow
def test_report_logs_no_error_and_shows_its_figures(report_visit):
    assert not report_visit.problems, f"console errors or failed loads: {report_visit.problems}"
    images = report_visit.value["images"]
    assert images and all(image["loaded"] for image in images), images
    assert not report_visit.value["raw"], f"raw TeX in the report: {report_visit.value['raw']}"


@pytest.mark.slow
def test_the_reports_first_screen_states_the_finding(report_visit):
    found = report_visit.value
    assert found["headings"][0] == "Finding", found["headings"][:3]
    finding, viewport = found["finding"], found["viewport"]
    assert finding, "the report has no Finding section"
    assert finding["bottom"] <= FOLD_PX, f"the finding ends at {finding['bottom']} px, below the fold ({viewport})"
    for phrase in ("energy ratio", "checkpoints significant", "Anisotropy share", "Holm", "descriptive"):
        assert phrase in finding["text"], phrase


@pytest.mark.slow
def test_every_report_column_is_described(report_visit):
    found = report_visit.value
    columns = found["columns"]
    assert [column for column in columns if column["table"] == "rows"], "the report's rows table has no header"
    for column in columns:
        name, tooltip, definition = column["name"], column["tooltip"], column["definition"]
        plain = name.replace("_", " ").lower()
        for description in (tooltip, definition):
            assert len(description) >= MIN_DESCRIPTION_CHARS and description.lower().strip(" .") != plain, (
                f"column {name!r} of the {column['table']} table is not described: {description!r}"
            )
        assert tooltip.startswith(definition), f"{name}: the tooltip and the definition disagree"
    assert found["definitions"] >= len({column["name"] for column in columns})
    assert "Column definitions" in found["headings"]
