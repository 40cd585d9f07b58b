# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Builds the documentation site once per test session, for the tests that read or open its pages."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers", "jupytext")

#: A <script src> or <link href> to another host (http, https or protocol-relative).
REMOTE_ASSET = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=[\"']?(?:https?:)?//[^\"'\s>]+", re.I)
#: A stylesheet's url(...) or @import of another host.
REMOTE_CSS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"']?)(?:https?:)?//", re.I)


def build_site(site: Path) -> Path:
    """Build the docs into `site` with ``mkdocs build --strict`` (offline); skip when the docs extra is missing.

    Returns:
        `site`.
    """
    missing = [name for name in DOCS_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the docs extra is not installed (missing {missing}): pip install -e '.[docs]'")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NO_MKDOCS_2_WARNING="1", MPLBACKEND="Agg")
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-6000:]
    return site


def remote_references(site: Path) -> list[str]:
    """Every script, stylesheet or CSS import of the built site that points to another host, as 'file: text'."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix == ".html":
            found += [f"{path.relative_to(site)}: {hit}" for hit in REMOTE_ASSET.findall(path.read_text("utf-8"))]
        elif path.suffix == ".css":
            text = path.read_text("utf-8")
            found += [f"{path.relative_to(site)}: {hit.group(0)}" for hit in REMOTE_CSS.finditer(text)]
    return found
