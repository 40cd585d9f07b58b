# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""interpreto-anisotropy: the geometry of language-model learning dynamics, as an Interpreto plugin."""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# Information (estimates, checkpoints loaded, downloads) goes to this logger's children; an application routes it.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# In a REPL or a piped program, nnsight is imported now, without a console of its own.
from .reading.sourceless import import_as_a_script  # noqa: E402 (after the logger's handler)

import_as_a_script()

from . import _moved  # noqa: E402, F401 (former module names (0.1) still import, with a FutureWarning)

# `from <module> import <name>` of each public name, run when the name is first used (PEP 562) so that `--help` and
# `--version` import no torch; `__all__` and the type-checking imports below name the same (tests/test_layout.py).
_FROM = {
    ".": ["demo", "errors", "metrics"],
    ".errors": ["AnisotropyError"],
    ".live.callback": ["AnisotropyCallback"],
    ".live.options": ["LiveConfig"],
    ".live.probe": ["TrainingProbe"],
    ".probing": ["objectives"],
    ".probing.probe": ["GradientProbe"],
    ".probing.result": ["ProbeResult"],
    ".reading.activations": ["token_activations"],
    ".results.table": ["SweepResult"],
    ".sweeps": ["checkpoints", "suites"],
    ".sweeps.config": ["SweepConfig"],
    ".sweeps.runner": ["CheckpointSweep"],
    ".tangents": ["controls"],
    ".tangents.explainers": [
        "ICATangent",
        "NMFTangent",
        "PCATangent",
        "SemiNMFTangent",
        "SVDTangent",
        "TangentExplainer",
        "TopKSAETangent",
    ],
    ".tangents.subspace": ["Subspace"],
    ".version": ["__version__"],
    ".visualizations": ["plotting"],
    ".visualizations.report": ["write_report"],
}
_LOCATION = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "__version__",
    "AnisotropyCallback",
    "AnisotropyError",
    "checkpoints",
    "CheckpointSweep",
    "controls",
    "demo",
    "errors",
    "GradientProbe",
    "ICATangent",
    "LiveConfig",
    "metrics",
    "NMFTangent",
    "objectives",
    "PCATangent",
    "plotting",
    "ProbeResult",
    "SemiNMFTangent",
    "Subspace",
    "suites",
    "SVDTangent",
    "SweepConfig",
    "SweepResult",
    "TangentExplainer",
    "token_activations",
    "TopKSAETangent",
    "TrainingProbe",
    "write_report",
]


def __getattr__(name: str) -> Any:
    if name not in _LOCATION:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_LOCATION[name], __name__)
    value = vars(module)[name] if name in vars(module) else importlib.import_module(f"{module.__name__}.{name}")
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names as static tools see them (tests/test_layout.py keeps the two equal)
    from . import demo, errors, metrics
    from .errors import AnisotropyError
    from .live.callback import AnisotropyCallback
    from .live.options import LiveConfig
    from .live.probe import TrainingProbe
    from .probing import objectives
    from .probing.probe import GradientProbe
    from .probing.result import ProbeResult
    from .reading.activations import token_activations
    from .results.table import SweepResult
    from .sweeps import checkpoints, suites
    from .sweeps.config import SweepConfig
    from .sweeps.runner import CheckpointSweep
    from .tangents import controls
    from .tangents.explainers import (
        ICATangent,
        NMFTangent,
        PCATangent,
        SemiNMFTangent,
        SVDTangent,
        TangentExplainer,
        TopKSAETangent,
    )
    from .tangents.subspace import Subspace
    from .version import __version__
    from .visualizations import plotting
    from .visualizations.report import write_report
