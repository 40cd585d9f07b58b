# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Modules that moved in the 0.2 layout, still importable under their former names with a deprecation warning."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: {former module: module that now holds its names}, both relative to the package.
MOVED: dict[str, str] = {
    "sweeps.settings": "sweeps.config",
    "sweeps.early_pool": "sweeps.resume",
    "sweeps.drift": "sweeps.resume",
    "sweeps.extension": "sweeps.resume",
    "sweeps.freshness": "sweeps.resume",
    "sweeps.references": "sweeps.resume",
    "sweeps.eta": "sweeps.runner",
    "sweeps.fit_read": "sweeps.runner",
    "sweeps.said_once": "sweeps.runner",
    "sweeps.weight_check": "sweeps.checkpoints",
    "probing.finding": "probing.result",
    "commons.columns": "results.schema",
    "sweeps.multiple_testing": "results.verdict",
    "sweeps.verdict": "results.verdict",
    "visualizations.columns": "visualizations.report",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a former module name as its new module, with a `FutureWarning` that names the new one."""

    def find_spec(self, fullname, path=None, target=None):
        """A spec for a former module name, else None."""
        former = fullname.removeprefix(f"{__package__}.")
        if former == fullname or former not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def exec_module(self, module):
        """Lets the former module hand out the new module's names, with a warning that names it."""
        new = importlib.import_module(f"{__package__}.{MOVED[module.__name__.removeprefix(f'{__package__}.')]}")
        warnings.warn(f"{module.__name__} moved to {new.__name__}: import it from there", FutureWarning, stacklevel=2)
        module.__getattr__ = lambda name: getattr(new, name)
        module.__dir__ = lambda: dir(new)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):  # once, when the package is imported
    sys.meta_path.append(_MovedModules())
