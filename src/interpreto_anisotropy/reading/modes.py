# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Every read of a model runs it in eval mode, and gives the caller's modes back afterwards.

A model built from a config starts in `train()` mode, with dropout on: read that way, activations are drawn anew at
every forward (two fits of the same texts fall tens of degrees apart) and differ from the activations the model
computes in use. `eval_mode` switches dropout (and every other train-time behaviour) off for the length of a read
and then restores each module's own `training` flag, exactly as it was, even when the read raises. The split-point
seam (`split_point.SplitPoint`) wraps each of its reads in it: the activation reader, tangent fits on texts, the
metrics and top tokens computed on their rows, and the gradient probe's forward and backward.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["eval_mode"]


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the body with `model` in eval mode, then restore the `training` flag of each of its modules.

    Each module gets back its own flag, so a model the caller left partly in train mode (a frozen part in eval,
    say) is given back as it was, not switched wholesale by `model.train()`. A model already in eval mode is left
    untouched.

    Args:
        model: The model to read.

    Yields:
        The model, in eval mode.

    Examples:
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
        >>> with eval_mode(model):
        ...     model.training, model[1].training
        (False, False)
        >>> model.training, model[1].training
        (True, True)
    """
    flags = [(module, module.training) for module in model.modules()]
    if not any(flag for _, flag in flags):
        yield model
        return
    model.eval()
    try:
        yield model
    finally:
        for module, flag in flags:
            module.training = flag
