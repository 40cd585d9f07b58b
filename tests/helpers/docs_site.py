# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A pytest plugin: the docs site built once per session, for every test that reads or opens its pages.

Test modules use it with ``pytest_plugins = ["helpers.docs_site"]`` (then the `built_site` fixture), rather than
building the site each (``mkdocs build --strict``: several seconds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.site import build_site


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The folder of the built site (``mkdocs build --strict``); skips when the docs extra is missing."""
    return build_site(tmp_path_factory.mktemp("docs") / "site")
