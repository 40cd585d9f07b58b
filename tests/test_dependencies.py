# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Every package that `src/` imports is declared in pyproject.toml's dependencies, so that a wheel installs it.

The imports are read from the sources (every ``import`` and ``from ... import`` of every module, at any depth),
the standard library and the package itself left out. An import inside ``try: ... except ImportError:``, in its
body or in its handler (the fallback), is optional (the code has a way without it) and need not be declared. Each imported module is mapped to the
distribution that installs it (``importlib.metadata.packages_distributions``: ``jinja2`` is Jinja2's).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: huggingface_hub's dependency tomli is the same parser
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "interpreto_anisotropy"


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Jinja2`` and ``jinja2``, ``huggingface_hub`` and ``-hub``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _catches_import_error(node: ast.Try) -> bool:
    names = set()
    for handler in node.handlers:
        for caught in handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]:
            names.add(getattr(caught, "id", None))
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def imported_modules(source: str) -> tuple[set[str], set[str]]:
    """The top-level modules a module's source imports: (required, optional), absolute imports only.

    Args:
        source: A Python module's text.

    Returns:
        The first component of each imported name; optional ones are imported only in the body or the handlers
        of a ``try`` whose handlers catch ImportError.
    """
    required: set[str] = set()
    optional: set[str] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        (optional if guarded else required).update(name.split(".")[0] for name in names)
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for child in [*node.body, *node.handlers]:
                visit(child, True)
            for child in [*node.orelse, *node.finalbody]:
                visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(ast.parse(source), False)
    return required, optional - required


def _third_party_imports() -> dict[str, list[str]]:
    """Each third-party module that `src/` imports without an ImportError fallback -> the files that import it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        required, _ = imported_modules(path.read_text(encoding="utf-8"))
        for module in required - set(sys.stdlib_module_names) - {"interpreto_anisotropy"}:
            found.setdefault(module, []).append(str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {_normalized(re.match(r"[A-Za-z0-9._-]+", spec).group()) for spec in pyproject["project"]["dependencies"]}


# Imported only on the path of huggingface_hub 0.x, whose HTTP client they are (commons/hub.py's guard of
# its sessions and error classes): huggingface_hub 0.x depends on them; 1.x, on httpx, needs neither.
BROUGHT_BY_HUGGINGFACE_HUB_0 = {"requests", "urllib3"}


def test_every_imported_package_is_declared():
    distributions = packages_distributions()
    declared = _declared()
    unknown = {module: files for module, files in _third_party_imports().items() if module not in distributions}
    assert not unknown, f"imported but installed by no distribution here (a typo, or not installed?): {unknown}"
    undeclared = {
        module: files
        for module, files in _third_party_imports().items()
        if not declared & {_normalized(name) for name in distributions[module]}
        and module not in BROUGHT_BY_HUGGINGFACE_HUB_0
    }
    assert not undeclared, f"imported by src/ but not in pyproject.toml's dependencies: {undeclared}"


def test_the_import_reader_sees_nested_imports_and_ImportError_fallbacks():
    source = (
        "import os, numpy.linalg\n"
        "from scipy import stats\n"
        "from . import sibling\n"
        "def f():\n"
        "    import torch\n"
        "    try:\n"
        "        import httpx2 as transport\n"
        "    except ImportError:\n"
        "        import httpx as transport\n"
        "    try:\n"
        "        import jinja2\n"
        "    except ValueError:\n"
        "        pass\n"
    )
    required, optional = imported_modules(source)
    assert required == {"os", "numpy", "scipy", "torch", "jinja2"}
    assert optional == {"httpx2", "httpx"}
