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

from . import checkpoints, errors, metrics, plotting
from .activations import iter_token_activations, token_activations
from .checkpoints import Checkpoint, load_checkpoint, loaded
from .controls import analytic_null, normal_controls, p_value
from .demo import ToyRun, load_corpus, train_toy
from .errors import AnisotropyError
from .probe import GradientProbe, TokenGradients
from .probe_result import ProbeResult
from .subspace import Subspace
from .sweep import CheckpointSweep
from .sweep_result import SweepResult
from .tangent import (
    ICATangent,
    NMFTangent,
    PCATangent,
    SemiNMFTangent,
    SVDTangent,
    TangentExplainer,
    TangentMethod,
    TopKSAETangent,
)
from .version import __version__

__all__ = [
    "AnisotropyError",
    "Checkpoint",
    "CheckpointSweep",
    "GradientProbe",
    "ICATangent",
    "NMFTangent",
    "PCATangent",
    "ProbeResult",
    "SVDTangent",
    "SemiNMFTangent",
    "Subspace",
    "SweepResult",
    "TangentExplainer",
    "TangentMethod",
    "TokenGradients",
    "ToyRun",
    "TopKSAETangent",
    "analytic_null",
    "checkpoints",
    "errors",
    "load_checkpoint",
    "load_corpus",
    "loaded",
    "metrics",
    "normal_controls",
    "p_value",
    "plotting",
    "iter_token_activations",
    "token_activations",
    "train_toy",
    "__version__",
]
