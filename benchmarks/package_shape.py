# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package's shape, as issue 41 counts it: lines (docstring and code apart), modules, raises, exception classes,
the longest function and class, top-level names and import cycles (lazy imports included).

Usage: python benchmarks/package_shape.py [--package src/interpreto_anisotropy]
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def docstring_lines(tree: ast.Module) -> int:
    """Lines of every module, class and function docstring of `tree`."""
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
                if isinstance(first.value.value, str):
                    total += first.end_lineno - first.lineno + 1
    return total


def imports_of(tree: ast.Module, module: str, package: str) -> set[str]:
    """The package's modules that `module` imports at run time anywhere (top level or inside functions; not under
    ``if TYPE_CHECKING:``)."""
    found = set()
    parts = module.split(".")
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level] if not module.endswith("__init__") else parts[: -node.level]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name.startswith(package):
                found.add(name)
                found.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(package))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return result


def shape(package_dir: Path) -> dict:
    """Every count of the module docstring, for the package in `package_dir`."""
    package = package_dir.name
    lines = docs = raises = 0
    modules: dict[str, ast.Module] = {}
    per_folder: dict[str, int] = defaultdict(int)
    longest_function, longest_class = (0, ""), (0, "")
    exceptions = set()
    for path in sorted(package_dir.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        relative = path.relative_to(package_dir.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        modules[name] = tree
        per_folder[str(path.parent.relative_to(package_dir))] += 1
        lines += len(text.splitlines())
        docs += docstring_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise):
                raises += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                longest_function = max(longest_function, (size, f"{name}.{node.name}"))
            elif isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                longest_class = max(longest_class, (size, f"{name}.{node.name}"))
                if any(isinstance(base, ast.Name) and base.id.endswith(("Error", "Warning")) for base in node.bases):
                    exceptions.add(node.name)
    graph = {
        name: {target for target in imports_of(tree, name, package) if target in modules and target != name}
        for name, tree in modules.items()
    }
    top_level = __import__(package).__all__
    return {
        "lines": lines,
        "docstring_lines": docs,
        "other_lines": lines - docs,
        "modules": len(modules),
        "modules_per_folder": dict(sorted(per_folder.items())),
        "raise_statements": raises,
        "exception_classes": len(exceptions),
        "longest_function": longest_function,
        "longest_class": longest_class,
        "top_level_names": len(top_level),
        "import_cycles": [c for c in cycles(graph) if not all(m == package or m.count(".") == 1 for m in c)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--package", type=Path, default=ROOT / "src" / "interpreto_anisotropy")
    result = shape(parser.parse_args().package)
    for key, value in result.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
