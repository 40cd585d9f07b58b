# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""interpreto-anisotropy: the geometry of language-model learning dynamics, as an Interpreto plugin.

Fit low-rank tangent subspaces of the activation manifold with Interpreto's concept methods, probe the
model's true training-loss gradients at the same split point, and compare the gradient energy and
anisotropy held by the tangent subspace with matched-rank normal controls, checkpoint after checkpoint.

Examples:
    >>> import interpreto_anisotropy as ia
    >>> tangent = ia.PCATangent(mwsp, nb_concepts=16).fit(fit_texts)
    >>> result = ia.GradientProbe(mwsp).run(texts, tangent, n_controls=20)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. They are imported when first used (PEP 562), so that `interpreto-anisotropy --help`
# and `--version` answer without importing torch, Interpreto or matplotlib.
_SUBMODULES = {
    "demo": ".demo",
    "errors": ".errors",
    "metrics": ".metrics",
    "objectives": ".probing.objectives",
    "positions": ".reading.positions",
    "checkpoints": ".sweeps.checkpoints",
    "suites": ".sweeps.suites",
    "plotting": ".visualizations.plotting",
}
_NAMES = {
    ".errors": ["AnisotropyError"],
    ".live.options": ["LiveConfig", "LiveTangent"],
    ".live.probe": ["TrainingProbe"],
    ".probing.anisotropy": ["IsoScoreConvention", "IsoScoreTarget"],
    ".probing.masking": ["MaskedLM"],
    ".probing.objectives": ["ObjectiveName", "Reduction"],
    ".probing.probe": ["GradientProbe", "TokenGradients"],
    ".probing.result": ["ProbeResult"],
    ".reading.activations": ["iter_token_activations", "token_activations"],
    ".reading.positions": ["PositionConvention"],
    ".sweeps.checkpoints": ["Checkpoint", "load_checkpoint", "loaded"],
    ".sweeps.config": ["SweepConfig"],
    ".sweeps.early_pool": ["EarlyCentering"],
    ".sweeps.result": ["SweepResult"],
    ".sweeps.runner": ["CheckpointSweep"],
    ".sweeps.settings": ["Parallelism", "ReferenceKind"],
    ".tangents.controls": ["analytic_null", "chance_std", "normal_controls", "p_value", "random_subspace_bases"],
    ".tangents.explainers": [
        "ICATangent",
        "NMFTangent",
        "PCATangent",
        "SemiNMFTangent",
        "SVDTangent",
        "TangentExplainer",
        "SklearnPCATangent",
        "TopKSAETangent",
    ],
    ".tangents.subspace": ["Subspace"],
    ".version": ["__version__"],
    ".visualizations.report": ["write_report"],
}
_LOCATION = {name: module for module, names in _NAMES.items() for name in names}


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


if TYPE_CHECKING:  # the names as static tools see them
    from . import demo, errors, metrics
    from .errors import AnisotropyError
    from .live.options import LiveConfig, LiveTangent
    from .live.probe import TrainingProbe
    from .probing import objectives
    from .probing.anisotropy import IsoScoreConvention, IsoScoreTarget
    from .probing.masking import MaskedLM
    from .probing.objectives import ObjectiveName, Reduction
    from .probing.probe import GradientProbe, TokenGradients
    from .probing.result import ProbeResult
    from .reading import positions
    from .reading.activations import iter_token_activations, token_activations
    from .reading.positions import PositionConvention
    from .sweeps import checkpoints, suites
    from .sweeps.checkpoints import Checkpoint, load_checkpoint, loaded
    from .sweeps.config import SweepConfig
    from .sweeps.early_pool import EarlyCentering
    from .sweeps.result import SweepResult
    from .sweeps.runner import CheckpointSweep
    from .sweeps.settings import Parallelism, ReferenceKind
    from .tangents.controls import analytic_null, chance_std, normal_controls, p_value, random_subspace_bases
    from .tangents.explainers import (
        ICATangent,
        NMFTangent,
        PCATangent,
        SemiNMFTangent,
        SklearnPCATangent,
        SVDTangent,
        TangentExplainer,
        TopKSAETangent,
    )
    from .tangents.subspace import Subspace
    from .version import __version__
    from .visualizations import plotting
    from .visualizations.report import write_report

__all__ = [
    "AnisotropyError",
    "Checkpoint",
    "CheckpointSweep",
    "GradientProbe",
    "LiveConfig",
    "LiveTangent",
    "ICATangent",
    "MaskedLM",
    "IsoScoreConvention",
    "IsoScoreTarget",
    "NMFTangent",
    "ObjectiveName",
    "PCATangent",
    "Parallelism",
    "EarlyCentering",
    "PositionConvention",
    "ProbeResult",
    "Reduction",
    "ReferenceKind",
    "SVDTangent",
    "SemiNMFTangent",
    "Subspace",
    "SweepConfig",
    "SweepResult",
    "TangentExplainer",
    "SklearnPCATangent",
    "TokenGradients",
    "TopKSAETangent",
    "TrainingProbe",
    "analytic_null",
    "chance_std",
    "checkpoints",
    "demo",
    "errors",
    "iter_token_activations",
    "load_checkpoint",
    "loaded",
    "metrics",
    "normal_controls",
    "objectives",
    "p_value",
    "plotting",
    "positions",
    "suites",
    "random_subspace_bases",
    "token_activations",
    "__version__",
    "write_report",
]
