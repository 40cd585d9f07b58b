# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The README works as written: its Python snippets and its command lines run, offline, in the folder ``make demo``
leaves behind (``helpers.readme_run`` stands in for ``make demo`` with the session's toy run).

* Every command line of the README is accounted for: set-up (``make``, ``pip install``), a command run here, or a
  command that needs the Hub, which is parsed by the command line's own parser (its options exist as written).
* The Python blocks run in order in one interpreter, as the README says to run them, and print and write what
  they say they do: tests/test_docs_run.py runs them (``test_page_runs_as_written[README.md]``), with every page of
  the docs.
* The files a reader creates next to the README (a texts file) are ignored by git.
"""

from __future__ import annotations

import json
import shlex

import pytest
from helpers.readme import (
    CLI,
    README,
    ROOT,
    SET_UP_PREFIXES,
    command_lines,
    fenced_blocks,
    needs_the_hub,
)

from interpreto_anisotropy.cli import build_parser, sweep_config

pytest_plugins = ["helpers.readme_run"]


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_every_command_line_is_set_up_or_the_command_line_tool():
    lines = command_lines(_readme())
    assert any(line.startswith(f"{CLI} sweep") for line in lines)
    assert any(line.startswith(f"{CLI} report") for line in lines)
    strays = [line for line in lines if not line.startswith((f"{CLI} ", *SET_UP_PREFIXES))]
    assert not strays, f"README command lines this test neither runs nor knows as set-up: {strays}"


@pytest.mark.parametrize("line", [line for line in command_lines(README.read_text()) if needs_the_hub(line)])
def test_hub_command_lines_parse_as_written(line):
    args = build_parser().parse_args(shlex.split(line, comments=True)[1:])
    assert args.command == "sweep" and sweep_config(args).results_dir  # every option of the line is valid


def test_files_a_reader_creates_are_ignored_by_git():
    ignored = set((ROOT / ".gitignore").read_text().split())
    assert {"texts.jsonl", "texts.txt", "runs/"} <= ignored, "a texts file or runs/ would be committed by mistake"


@pytest.mark.slow
def test_readme_command_lines_run_as_written(readme_cli):
    assert readme_cli.commands, "the README has no offline interpreto-anisotropy command"
    for line, completed in readme_cli.commands.items():
        assert completed.returncode == 0, f"`{line}` failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    sweep_out = readme_cli.folder / "runs" / "demo" / "cli-sweep"
    rows = [json.loads(line) for line in (sweep_out / "rows.jsonl").read_text().splitlines() if line.strip()]
    checkpoints = sorted((readme_cli.folder / "runs" / "demo" / "toy").glob("checkpoint-*"))
    assert sorted({row["step"] for row in rows}) == sorted(int(path.name.split("-")[1]) for path in checkpoints)
    outputs = "".join(completed.stdout for completed in readme_cli.commands.values())
    assert "runs/demo/cli-sweep/report/index.html" in outputs
    assert (sweep_out / "report" / "index.html").is_file()


def test_the_snippets_and_commands_read_what_make_demo_writes():
    readme = _readme()
    makefile = (ROOT / "Makefile").read_text()
    assert "$(BIN)/interpreto-anisotropy demo --out runs/demo" in makefile
    assert "VENV := .venv" in makefile and "BIN := $(VENV)/bin" in makefile, f"make demo no longer installs {CLI}"
    assert "runs/demo/toy" in "".join(fenced_blocks(readme, "python"))
    assert any("--model runs/demo/toy" in line and not needs_the_hub(line) for line in command_lines(readme)), (
        "the README's offline CLI example should sweep the demo's checkpoints"
    )
