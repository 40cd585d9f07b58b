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

from . import demo, errors, metrics
from .errors import AnisotropyError
from .live.options import LiveTangent
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
    SVDTangent,
    TangentExplainer,
    TangentMethod,
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
    "SweepResult",
    "TangentExplainer",
    "TangentMethod",
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
    "write_report",
    "__version__",
]
