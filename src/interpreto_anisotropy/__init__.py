# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""interpreto-anisotropy: the geometry of language-model learning dynamics, as an Interpreto plugin."""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# What is information (estimates, checkpoints loaded, downloads, evictions) goes to this logger's children; an
# application chooses where it goes (`logging.basicConfig(level=logging.INFO)`), as with any library.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# In a REPL or a piped program (`plain_interpreter`), nnsight is imported now, without a console of its own.
from .reading.sourceless import import_as_a_script  # noqa: E402 (after the logger's handler)

import_as_a_script()

from ._moved import install as _install_moved_modules  # noqa: E402

_install_moved_modules()  # former module names (0.1) still import, with a FutureWarning

# Where each public name lives (`__all__` lists the same names; tests/test_layout.py keeps them equal). They are imported when
# first used (PEP 562), so that `interpreto-anisotropy --help` and `--version` answer without importing torch,
# Interpreto or matplotlib. Enums, option types and helpers stay in their modules (`ia.objectives.MaskedLM`,
# `ia.controls.normal_controls`, `interpreto_anisotropy.sweeps.config.ReferenceKind`, ...).
_SUBMODULES = {
    "checkpoints": ".sweeps.checkpoints",
    "controls": ".tangents.controls",
    "demo": ".demo",
    "errors": ".errors",
    "metrics": ".metrics",
    "objectives": ".probing.objectives",
    "plotting": ".visualizations.plotting",
    "suites": ".sweeps.suites",
}
_NAMES = {
    ".errors": ["AnisotropyError"],
    ".live.callback": ["AnisotropyCallback"],
    ".live.options": ["LiveConfig"],
    ".live.probe": ["TrainingProbe"],
    ".probing.probe": ["GradientProbe"],
    ".probing.result": ["ProbeResult"],
    ".reading.activations": ["token_activations"],
    ".sweeps.config": ["SweepConfig"],
    ".results.table": ["SweepResult"],
    ".sweeps.runner": ["CheckpointSweep"],
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
    ".visualizations.report": ["write_report"],
}
_LOCATION = {name: module for module, names in _NAMES.items() for name in names}

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
    if name in _SUBMODULES:
        value = importlib.import_module(_SUBMODULES[name], __name__)
    elif name in _LOCATION:
        value = getattr(importlib.import_module(_LOCATION[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names as static tools see them (tests/test_layout.py keeps the two equal)
    from . import demo, errors, metrics, plotting
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
    from .visualizations.report import write_report
