# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Offline demo material: a toy corpus of standard-library docstrings, tiny models, and toy training runs.

Names are imported lazily, so ``load_corpus`` does not pay for importing torch and transformers.

Examples:
    >>> from interpreto_anisotropy.demo import load_corpus, train_toy
    >>> texts = load_corpus("fit", max_texts=8, progress=False)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .corpus import load_corpus
    from .toy_models import build_model, train_tokenizer
    from .train import ToyRun, train_toy

__all__ = ["load_corpus", "train_toy", "ToyRun", "train_tokenizer", "build_model"]

_SOURCES = {"load_corpus": ".corpus", "train_toy": ".train", "ToyRun": ".train"}
_SOURCES.update(train_tokenizer=".toy_models", build_model=".toy_models")


def __getattr__(name: str) -> Any:
    if name in _SOURCES:
        return getattr(importlib.import_module(_SOURCES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
