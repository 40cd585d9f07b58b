# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The docs run as written: every ```python and ```bash block of the README, the getting-started page and each
how-to page, in order, offline.

* A page's Python blocks, concatenated in order, run in one fresh ``python`` process, as a reader pasting them into
  one session would; its shell blocks run with ``bash -e``: those above its first Python block before that process,
  the others after it (a predecessor's shell blocks all run first). The working directory is a fresh folder (the README's: the folder ``make demo`` leaves
  behind, ``helpers.readme_run``, whose fixture also runs the README's command lines: they are checked here, not
  run twice).
* A block that cannot run here is marked in the Markdown, just above it, with ``<!-- docs-run: skip (REASON) -->``;
  the reason says why (the Hub, a GPU, set-up that a test stands in for, or the test that runs it instead), and each
  marked block shows as a skipped test with its reason.
* A page that continues another says so in its first lines, in words with a link and in a marker,
  ``<!-- docs-run: continues PAGE -->``: its predecessor's blocks run first, in the same process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.readme import CLI, README, offline_env

pytest_plugins = ["helpers.readme_run"]

ROOT = Path(__file__).resolve().parents[1]
PAGES = [README, ROOT / "docs" / "getting-started.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]
LANGUAGES = {"python": "python", "bash": "bash", "shell": "bash"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"<!-- docs-run: skip \((?P<reason>[^)]*(?:\([^)]*\)[^)]*)*)\) -->\s*$")
CONTINUES = re.compile(r"<!-- docs-run: continues (?P<page>\S+) -->")
#: What a skip may give as its reason: the block needs what the tests lack, or another test runs it.
REASONS = re.compile(r"^(needs the Hub|needs a GPU|set-up|placeholder|run by tests/test_\w+\.py)\b")
#: Seconds a page's Python process may take (imports included; each takes 5 to 30 s on a busy 2-core machine).
PAGE_TIMEOUT_S = 300
#: Files some pages say they write, checked after their run (paths in the page's working directory).
WRITES = {
    "README.md": ["runs/demo/py-sweep/rows.jsonl", "runs/demo/py-report/index.html", "runs/live/rows.jsonl"],
    "getting-started.md": ["runs/first/sweep/rows.jsonl", "runs/first/report/index.html"],
    "share-tangents.md": ["tangents/pythia-70m-layer3/tangent.json"],
    "pythia.md": ["texts.jsonl"],
    "live-probe.md": ["runs/live/report/index.html", "runs/live-trainer/rows.jsonl"],
}
#: What some pages print, checked in their output.
PRINTS = {"README.md": ["energy share E_T", "p-value"], "getting-started.md": ["energy share E_T", "p-value"]}


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: its language (``python`` or ``bash``), its code, and why it is skipped."""

    page: Path
    index: int
    language: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{_name(self.page)}[{self.index}]"


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path) -> list[Block]:
    """The page's Python and shell blocks, in order, each with the reason of the skip marker just above it."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language = LANGUAGES.get(match.group(1))
        if language is None:
            continue
        above = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        marker = SKIP.search(above)
        found.append(Block(page, len(found), language, match.group(2), marker and marker.group("reason")))
    return found


def predecessor(page: Path) -> Path | None:
    """The page this one continues, from the marker in its first lines; None for a page that stands alone."""
    head = "\n".join(page.read_text(encoding="utf-8").splitlines()[:5])
    marker = CONTINUES.search(head)
    return (page.parent / marker.group("page")).resolve() if marker else None


def chain(page: Path) -> list[Path]:
    """The pages to run for `page`: its predecessors, first one first, then the page."""
    pages = [page]
    while (before := predecessor(pages[0])) is not None:
        assert before not in pages, f"{_name(page)}: its docs-run continuation markers loop"
        pages.insert(0, before)
    return pages


def _skipped_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.skip is not None]


# --------------------------------------------------------------------------------------------------- the markers
def test_the_parser_reads_markers():
    page = ROOT / "docs" / "how-to" / "hub-checkpoints.md"
    assert [block.skip for block in blocks(page)] == ["needs the Hub (lists and downloads Pythia revisions)"]
    assert chain(ROOT / "docs" / "how-to" / "reading-the-report.md")[0] == ROOT / "docs" / "getting-started.md"


def test_every_marker_is_above_a_block_and_says_why():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        marked = text.count("<!-- docs-run: skip")
        assert marked == sum(block.skip is not None for block in blocks(page)), (
            f"{_name(page)}: a docs-run skip marker is not on the line just above a ```python or ```bash block"
        )
        for block in blocks(page):
            assert block.skip is None or REASONS.match(block.skip), (
                f"{block.name}: skip reason {block.skip!r} should start with one of {REASONS.pattern}"
            )
            named = re.match(r"run by (tests/\S+\.py)", block.skip or "")
            assert not named or (ROOT / named.group(1)).is_file(), f"{block.name}: {named.group(1)} does not exist"


def test_a_continued_page_says_so_in_its_first_lines():
    continued = {page: predecessor(page) for page in PAGES if predecessor(page) is not None}
    assert continued, "no page continues another: reading-the-report.md continues getting-started.md"
    for page, before in continued.items():
        assert before.is_file(), f"{_name(page)} continues {before}, which does not exist"
        first_lines = "\n\n".join(page.read_text(encoding="utf-8").split("\n\n", 3)[:3])
        assert f"]({os.path.relpath(before, page.parent)})" in first_lines, (
            f"{_name(page)}: say in its first lines, with a link, that it continues {_name(before)}"
        )


@pytest.mark.parametrize("block", _skipped_blocks(), ids=lambda block: block.name)
def test_marked_block(block):
    pytest.skip(f"{block.name} ({block.language}): {block.skip}")


# --------------------------------------------------------------------------------------------------- the runs
def _env() -> dict[str, str]:
    env = offline_env()  # HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, MPLBACKEND=Agg, this checkout's sources first
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # python, the command
    return env


def _run_shell(block: Block, cwd: Path) -> None:
    completed = subprocess.run(
        ["bash", "-e", "-c", block.code], capture_output=True, text=True, timeout=PAGE_TIMEOUT_S, env=_env(), cwd=cwd
    )
    assert completed.returncode == 0, f"{block.name} failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"


def _check_readme_commands(shell: list[Block], readme_cli) -> None:
    """The README's command lines are run by `helpers.readme_run` in the same folder: check what they gave."""
    lines = [line.strip() for block in shell for line in block.code.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert lines and all(line.startswith(f"{CLI} ") for line in lines), f"README command lines not run here: {lines}"
    for line in lines:
        completed = readme_cli.commands.get(line)
        assert completed is not None, f"`{line}` was not run (an earlier README command failed?)"
        assert completed.returncode == 0, f"`{line}` failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_runs_as_written(page, tmp_path, request):
    pages = chain(page)
    runnable = [block for each in pages for block in blocks(each) if block.skip is None]
    if not [block for block in runnable if block.page == page]:
        pytest.skip(f"{_name(page)}: every block is marked skip")
    cwd = request.getfixturevalue("demo_folder") if page == README else tmp_path
    python = [block for block in runnable if block.language == "python"]
    own_python = [block.index for block in python if block.page == page]
    first_python = own_python[0] if own_python else len(blocks(page))
    shell = [block for block in runnable if block.language == "bash"]
    before = [block for block in shell if block.page != page or block.index < first_python]  # predecessors' first
    after = [block for block in shell if block not in before]
    start = time.perf_counter()
    for block in before:
        _run_shell(block, cwd)
    if python:
        script = cwd / f"{page.stem}_blocks.py"
        script.write_text("\n\n".join(f"# {block.name}\n{block.code}" for block in python), encoding="utf-8")
        completed = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=PAGE_TIMEOUT_S, env=_env(), cwd=cwd
        )
        assert completed.returncode == 0, f"{_name(page)}'s Python blocks failed:\n{completed.stderr[-5000:]}"
        for printed in PRINTS.get(page.name, []):
            assert printed in completed.stdout, f"{_name(page)} did not print {printed!r}:\n{completed.stdout[-3000:]}"
    if page == README:
        _check_readme_commands(after, request.getfixturevalue("readme_cli"))
    else:
        for block in after:
            _run_shell(block, cwd)
    for written in WRITES.get(page.name, []):
        assert (cwd / written).is_file(), f"{_name(page)} did not write {written}"
    print(f"{_name(page)}: {time.perf_counter() - start:.1f} s")
