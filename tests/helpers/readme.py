# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The README's code: its fenced blocks, its command lines, and the environment they run in (offline)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The README's command lines that are not run here: the set-up this plugin stands in for (``make``), and installs.
SET_UP_PREFIXES = ("make ", "pip install ")
#: The command as the README calls it: the script ``make demo`` installs in the clone's ``.venv``.
CLI = ".venv/bin/interpreto-anisotropy"
#: Options that make a command read the Hugging Face Hub: such lines are parsed, not run (the tests are offline).
HUB_OPTIONS = ("--pythia", "--smollm2", "--revisions")


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks of `text` in `language` (```python, ```bash), in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def command_lines(text: str) -> list[str]:
    """Every command line of the ```bash blocks of `text`, comments and blank lines left out."""
    lines = [line.strip() for block in fenced_blocks(text, "bash") for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def needs_the_hub(line: str) -> bool:
    """Whether a command line reads the Hugging Face Hub."""
    return any(option in shlex.split(line, comments=True) for option in HUB_OPTIONS)


def offline_env() -> dict[str, str]:
    """The environment of the commands: offline, this checkout's sources first, the PATH as it is (a reader's PATH
    does not hold ``.venv/bin``)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    # Torch's threads, as in the test process (conftest.py): tiny models run fastest on one thread of a busy machine.
    env.setdefault("OMP_NUM_THREADS", os.environ.get("INTERPRETO_ANISOTROPY_TEST_THREADS", "1"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env
