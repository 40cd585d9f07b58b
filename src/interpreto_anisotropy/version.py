# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package's version, read from its installed metadata (pyproject.toml is the one place it is written)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("interpreto-anisotropy")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
