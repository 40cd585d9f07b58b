# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Where a module of a model runs, for a model on one device or dispatched by accelerate.

A model that accelerate dispatched (`accelerate.dispatch_model`, `load_checkpoint_and_dispatch`, or transformers'
`from_pretrained(device_map=...)`) runs each block on the `execution_device` of the hook accelerate attached to it,
whatever device its parameters are on: an offloaded block's parameters sit on the meta device and are loaded from
CPU memory or disk at each call. The split point's hidden state and its gradient live on the device that runs the
split point's module; the inputs go where the input embedding runs.
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

    Args:
        model: The model, on one device or dispatched by accelerate.
        path: A dotted module path of the model ("" for the model itself).

    Returns:
        The execution device of accelerate's hook on the module, else on its nearest ancestor, else on its first
        descendant; without one, the device of the module's own weights, else of the model's first parameter.

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
