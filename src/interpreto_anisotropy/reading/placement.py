# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Where a module of a model runs, for a model on one device or dispatched by accelerate.

A dispatched block runs on its accelerate hook's `execution_device`, whatever device (meta, when offloaded) its
parameters are on: the split point's h and dL/dh live there, and the inputs go where the input embedding runs.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["execution_device", "input_device", "is_dispatched", "module_device"]


def _hook_device(module: torch.nn.Module) -> torch.device | None:
    """The execution device of accelerate's hook on `module` (one of a `SequentialHook`'s), or None."""
    hook: Any = getattr(module, "_hf_hook", None)
    for candidate in [hook, *getattr(hook, "hooks", ())]:
        device = getattr(candidate, "execution_device", None)
        if device is not None:
            return torch.device(device)
    return None


def is_dispatched(model: torch.nn.Module) -> bool:
    """Whether accelerate dispatched the model: a `hf_device_map`, or a hook of accelerate on one of its modules."""
    return getattr(model, "hf_device_map", None) is not None or any(
        hasattr(module, "_hf_hook") for module in model.modules()
    )


def module_device(module: torch.nn.Module) -> torch.device | None:
    """The device of a module's first parameter or buffer not on the meta device (None: it has none)."""
    for tensor in [*module.parameters(), *module.buffers()]:
        if tensor.device.type != "meta":
            return tensor.device
    return None


def execution_device(model: torch.nn.Module, path: str) -> torch.device:
    """The device that runs the module at `path`, where its outputs and their gradients live.

    The hook's device on the module (`path`, "" for the model), its nearest ancestor or first descendant; else its
    own weights', else the model's first parameter's.

    Examples:
        >>> execution_device(torch.nn.Sequential(torch.nn.Linear(2, 2)), "0")
        device(type='cpu')
    """
    parts = path.split(".") if path else []
    module = model.get_submodule(path)
    ancestors = [model.get_submodule(".".join(parts[:depth])) for depth in range(len(parts) - 1, -1, -1)]
    for candidate in [module, *ancestors, *module.modules()]:  # `cpu_offload` hooks only the modules with weights
        device = _hook_device(candidate)
        if device is not None:
            return device
    own = module_device(module)
    return own if own is not None else next(model.parameters()).device


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: the device that runs its input embedding (its first parameter's without one).

    Examples:
        >>> input_device(torch.nn.Sequential(torch.nn.Linear(2, 2)))
        device(type='cpu')
    """
    try:
        embedding = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        embedding = None
    path = next((name for name, module in model.named_modules() if module is embedding), None)
    return next(model.parameters()).device if path is None else execution_device(model, path)
