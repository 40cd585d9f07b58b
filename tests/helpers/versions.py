# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Skipping what the installed transformers cannot build (EuroBERT is in transformers 5, not in 4.x), saying why."""

from __future__ import annotations

import pytest
import transformers


def skip_without(class_name: str) -> None:
    """Skips the running test when the installed transformers has no `class_name` (a 5.x-only architecture)."""
    if not hasattr(transformers, class_name):
        pytest.skip(
            f"transformers {transformers.__version__} has no {class_name} (that architecture needs transformers 5)"
        )


def versions_line() -> str:
    """The versions a test run uses: Python, torch, transformers, huggingface_hub, interpreto (`make test-compat`)."""
    import platform
    from importlib.metadata import version

    packages = ("torch", "transformers", "huggingface_hub", "interpreto", "interpreto-anisotropy")
    return ", ".join([f"python {platform.python_version()}", *(f"{name} {version(name)}" for name in packages)])


if __name__ == "__main__":
    print(versions_line())
