# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Every read of a model runs it in eval mode, and gives the caller's modes back afterwards.

A model built from a config starts in `train()` mode, dropout on, which would make every read random.
`split_point.SplitPoint` wraps each of its reads in `eval_mode`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["eval_mode"]


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the body with `model` in eval mode, then restore the `training` flag of each of its modules.

    Each module gets back its own flag, even when the body raises.

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
