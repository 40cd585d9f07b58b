# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package's layers: the subpackages import one another without a cycle, and the sweeps never import the
figures or the report (these take the sweep's table).

Every import statement of src/ is read with `ast`, those inside functions and under ``TYPE_CHECKING`` included,
and resolved to the subpackage (or top-level module) it names.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "interpreto_anisotropy"
NAME = PACKAGE.name


def _unit(parts: tuple[str, ...]) -> str:
    """The layer of a module path inside the package: its subpackage, a top-level module, or the package itself."""
    if not parts:
        return NAME
    return parts[0] if (PACKAGE / parts[0]).is_dir() or (PACKAGE / f"{parts[0]}.py").exists() else NAME


def _imports(path: Path) -> list[tuple[str, int]]:
    """The (layer imported, line) of every import in `path` that names something of the package."""
    relative = path.relative_to(PACKAGE).with_suffix("").parts
    package = relative[:-1]  # the package a relative import of this file starts from
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = [NAME, *package[: len(package) - node.level + 1]] if node.level else []
            module = [*base, *(node.module.split(".") if node.module else [])]
            targets = [[*module, alias.name] for alias in node.names]  # `from .. import errors` names a module
        else:
            continue
        found += [(_unit(tuple(target[1:])), node.lineno) for target in targets if target[0] == NAME]
    return found


def _graph() -> dict[str, dict[str, list[str]]]:
    """Layer -> layer imported -> the "file:line" of each import, layers importing themselves left out."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _unit(path.relative_to(PACKAGE).with_suffix("").parts)
        if source == "__init__":
            source = NAME
        for target, line in _imports(path):
            if target != source:
                graph.setdefault(source, {}).setdefault(target, []).append(f"{path.relative_to(PACKAGE)}:{line}")
    return graph


def test_the_graph_is_read():
    graph = _graph()
    assert "probing" in graph["sweeps"] and "sweeps" in graph["visualizations"]  # a top-level and a lazy import
    assert "commons" in graph["live"]
    assert set(graph[NAME]) >= {"sweeps", "visualizations", "live", "probing"}  # the public namespace


def test_the_sweeps_do_not_import_the_visualizations():
    assert not _graph()["sweeps"].get("visualizations"), "the figures and the report take a SweepResult"


def test_no_import_cycle_between_subpackages():
    graph = _graph()
    facade = {NAME, "cli"}  # the public namespace and the command line import every layer; none imports them
    assert not [f"{source} -> {target}" for source, targets in graph.items() for target in targets if target in facade]
    layers = {source: set(targets) for source, targets in graph.items()}
    try:
        order = list(TopologicalSorter(layers).static_order())
    except CycleError as error:
        cycle = error.args[1]
        where = {f"{a} -> {b}": graph[a][b] for a, b in zip(cycle, cycle[1:], strict=False)}
        raise AssertionError(f"import cycle {' -> '.join(cycle)}: {where}") from None
    assert order.index("commons") < order.index("probing") < order.index("sweeps") < order.index("visualizations")
