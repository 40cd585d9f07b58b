# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The README's world after ``make demo``, and its commands run there as written (a pytest plugin).

``make demo`` trains a toy GPT-NeoX for 300 steps and writes its checkpoints to ``runs/demo/toy`` (about two minutes
with its sweep); the README's snippets and commands then read that folder. Here the session's `toy_checkpoints`
run (20 steps, d=32) stands in for it: its first and last checkpoint folders are copied to ``runs/demo/toy`` of a
fresh folder, with the same layout (``checkpoint-N`` folders and ``trainer_state.json``), beside a ``.venv`` that
links to the environment running the tests (whose ``bin/interpreto-anisotropy`` the README calls), and the README's
command lines run there, in the README's order, as a reader would type them.

Test modules use it with ``pytest_plugins = ["helpers.readme_run"]``; the fixtures are session-scoped, so the
README test and the browser test (which opens the report these commands write) share one run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.readme import CLI, README, command_lines, needs_the_hub, offline_env

#: Steps of the `toy_checkpoints` run copied as the demo's checkpoints: the first and the last (each one more
#: costs every sweep below a forward and backward pass over its texts, and its statistics).
DEMO_STEPS = (0, 20)
COMMAND_TIMEOUT_S = 600


@dataclass
class ReadmeRun:
    """The README's commands run in a folder holding the demo's ``runs/demo/toy``.

    Attributes:
        folder: The working directory of the commands.
        commands: Each command line run, with its completed process (stdout and stderr as text), in order.
    """

    folder: Path
    commands: dict[str, subprocess.CompletedProcess]


@pytest.fixture(scope="session")
def demo_folder(toy_checkpoints, tmp_path_factory) -> Path:
    """A clone's folder after ``make demo``: ``.venv`` (this environment) and ``runs/demo/toy``'s checkpoints."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    toy = folder / "runs" / "demo" / "toy"
    toy.mkdir(parents=True)
    for step, checkpoint in zip(toy_checkpoints.checkpoint_steps, toy_checkpoints.checkpoints, strict=True):
        if step in DEMO_STEPS:
            shutil.copytree(checkpoint, toy / f"checkpoint-{step}")
    shutil.copy2(Path(toy_checkpoints.out_dir) / "trainer_state.json", toy / "trainer_state.json")
    return folder


@pytest.fixture(scope="session")
def readme_cli(demo_folder) -> ReadmeRun:
    """Every offline ``interpreto-anisotropy`` command line of the README, run as written, in order."""
    readme = README.read_text(encoding="utf-8")
    runnable = [line for line in command_lines(readme) if line.startswith(f"{CLI} ") and not needs_the_hub(line)]
    commands = {}
    for line in runnable:
        commands[line] = subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            env=offline_env(),
            cwd=demo_folder,
        )
        if commands[line].returncode != 0:
            break  # the later commands read what this one should have written
    return ReadmeRun(demo_folder, commands)
