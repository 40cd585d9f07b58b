# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package's shape: one seam touches models, and no import cycle.

* Only `reading/split_point.py` reads a splitter's `._model` or registers a hook on a module: everything else goes
  through `SplitPoint` (the RoBERTa position-id bug lived in duplicated model plumbing).
* The graph of imports between the package's modules (at import time, and inside functions) has no cycle, nor has
  the graph of imports between its subpackages (``sweeps`` -> ``probing`` -> ``sweeps`` would be one even without a
  cycle of modules); the sweeps never import the visualizations, which take the sweep's table; the sweeps and the
  live probe never import each other, and write through ``results`` (the row schema, the store, the table), which
  the visualizations read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "interpreto_anisotropy"
SEAM = PACKAGE / "reading" / "split_point.py"
HOOKS = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "register_hook"}


def _modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _model_plumbing(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "_model":
            found.append(f"line {node.lineno}: ._model")
        if isinstance(node, ast.Attribute) and node.attr in HOOKS:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("module", sorted(_modules()))
def test_only_the_seam_touches_the_model(module):
    path = _modules()[module]
    if path == SEAM:
        assert _model_plumbing(path), "the seam itself should hold the model plumbing (is the check broken?)"
        return
    assert not _model_plumbing(path), f"{module} touches the model outside the seam: {_model_plumbing(path)}"


def _imports(module: str, path: Path, *, typing_too: bool = False) -> set[str]:
    """The package modules `module` imports (relative and absolute, at any depth; `if TYPE_CHECKING:` aside unless
    `typing_too`)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    known = set(_modules())
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in node.body
        for child in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing_too:  # annotations only: never run
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            if node.module is None:  # "from . import distributed" imports a submodule, "from . import x" the package
                candidates = [name if name in known else target for name in submodules]
            else:
                candidates = [target, *submodules]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in candidates if name in known and name != module}
    return found


def internal_import_graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    return {module: _imports(module, path, typing_too=typing_too) for module, path in _modules().items()}


def _layer(module: str) -> str:
    """The subpackage of a module ("interpreto_anisotropy.sweeps"), or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module


def subpackage_graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    """Subpackage (or top-level module) -> those it imports, every import of its modules counted."""
    graph: dict[str, set[str]] = {}
    for module, targets in internal_import_graph(typing_too=typing_too).items():
        graph.setdefault(_layer(module), set()).update(_layer(target) for target in targets)
    return {layer: targets - {layer} for layer, targets in graph.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_inside_the_package():
    # The package's __init__ imports everything: edges into it are upward imports, counted apart.
    graph = {
        module: {target for target in targets if target != "interpreto_anisotropy"}
        for module, targets in internal_import_graph().items()
    }
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_no_module_imports_the_package_top_level():
    upward = [
        module
        for module, targets in internal_import_graph().items()
        if "interpreto_anisotropy" in targets and module != "interpreto_anisotropy"
    ]
    assert not upward, f"modules importing the package's __init__ (an upward import): {upward}"


def test_no_import_cycle_between_subpackages():
    graph = subpackage_graph(typing_too=True)
    assert {"interpreto_anisotropy.probing", "interpreto_anisotropy.commons"} <= graph["interpreto_anisotropy.sweeps"]
    graph = {layer: targets - {"interpreto_anisotropy"} for layer, targets in graph.items()}  # the upward test's
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle between subpackages: {' -> '.join(cycle)}"


#: Subpackage -> the subpackages it never imports: the sweeps and the live probe write through results/, which
#: imports neither; the figures and the report take its table (a live probe may draw its figures); nothing in
#: sweeps/ imports the figures.
APART = {
    "sweeps": {"live", "visualizations"},
    "live": {"sweeps"},
    "visualizations": {"sweeps", "live"},
    "results": {"sweeps", "live", "visualizations"},
}


def test_the_sweeps_and_the_live_probe_share_only_results():
    graph = subpackage_graph(typing_too=True)
    crossed = {
        f"{layer} -> {target}"
        for layer, apart in APART.items()
        for target in graph[f"interpreto_anisotropy.{layer}"]
        if target.removeprefix("interpreto_anisotropy.") in apart
    }
    assert not crossed, f"imports across subpackages kept apart: {crossed}"
    readers = ("sweeps", "live", "visualizations")
    assert all("interpreto_anisotropy.results" in graph[f"interpreto_anisotropy.{layer}"] for layer in readers)


def test_the_top_level_names_are_declared_alike_and_short():
    """`__all__`, the lazy map and the type-checking imports of the package name the same public names, about 20
    of them (enums and helpers stay in their modules), and each resolves."""
    import interpreto_anisotropy as ia

    lazy = set(ia._LOCATION)
    tree = ast.parse(Path(ia.__file__).read_text())
    checked = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    typed = {alias.asname or alias.name for node in checked.body for alias in node.names}
    assert set(ia.__all__) == lazy == typed
    assert len(ia.__all__) <= 30
    assert all(getattr(ia, name) is not None for name in ia.__all__)


# ------------------------------------------------------------------ docs/architecture.md names what exists
ROOT = PACKAGE.parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SUBPACKAGES = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
_REPO_FOLDERS = ("tests/", "benchmarks/", "docs/", "examples/", "src/")


def _spans(text: str) -> list[str]:
    """The inline code spans of a Markdown text (fenced blocks included: their lines hold no backticks)."""
    return re.findall(r"`([^`\n]+)`", text)


def _top_level_names(path: Path) -> set[str]:
    """Names a module defines or imports at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.names[0].name == "*" and node.level == 1:
            names |= _top_level_names(path.parent / f"{node.module}.py")  # `from .isotropy import *`
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _class_members() -> dict[str, set[str]]:
    """Class name -> the names its body defines (methods, properties, fields), over every class of the package."""
    members: dict[str, set[str]] = {}
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found = members.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        found.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        found.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        found |= {target.id for target in item.targets if isinstance(target, ast.Name)}
    return members


def _module_file(dotted: str) -> Path | None:
    parts = dotted.split(".")
    for candidate in (PACKAGE.joinpath(*parts).with_suffix(".py"), PACKAGE.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _dotted_problem(span: str, members: dict[str, set[str]]) -> str | None:
    """Why `sweeps.runner.FitReader.kept` (a module, then a name in it, then a member of that class) does not
    exist, or None."""
    parts = span.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            break
    else:
        return f"`{span}`: no module {parts[0]}.{parts[1]}"
    rest = parts[cut:]
    if not rest:
        return None
    if len(rest) > 2 or rest[0] not in _top_level_names(path):
        return f"`{span}`: {path.relative_to(PACKAGE)} defines no {rest[0]}"
    if len(rest) == 2 and rest[0] in members and rest[1] not in members[rest[0]]:
        return f"`{span}`: class {rest[0]} has no {rest[1]}"
    return None


def _doc_problems(text: str) -> list[str]:
    """Module paths, folders and dotted names of a page that do not exist in the package (or the repository)."""
    members = _class_members()
    problems = []
    for span in _spans(text):
        if re.fullmatch(r"[\w/]+\.py|[\w/]+/", span):
            root = ROOT if span.startswith(_REPO_FOLDERS) else PACKAGE
            if span.count("/") or span.endswith(".py"):
                if not (root / span).exists() and (span.endswith(".py") or span.split("/")[0] in SUBPACKAGES):
                    problems.append(f"`{span}`: no such file or folder")
        elif re.fullmatch(rf"(?:{'|'.join(SUBPACKAGES)})\.[A-Za-z_][\w.]*", span):
            problem = _dotted_problem(span, members)
            if problem:
                problems.append(problem)
        elif re.fullmatch(r"[A-Z]\w*\.\w+", span):
            owner, member = span.split(".")
            if owner in members and member not in members[owner]:
                problems.append(f"`{span}`: class {owner} has no {member}")
    return problems


def test_the_doc_checker_finds_what_does_not_exist():
    text = (
        "`sweeps/config.py` `sweeps.config.SweepConfig.make` `SweepStore.lock` `metrics.summary` "
        "`sweeps/nothing.py` `sweeps.config.NoSuchName` `SweepStore.no_such_method` `sweeps.nothing`"
    )
    problems = _doc_problems(text)
    assert len(problems) == 4, problems
    assert all(
        any(name in problem for problem in problems)
        for name in ("nothing.py", "NoSuchName", "no_such_method", "sweeps.nothing")
    )


def test_the_architecture_page_names_only_what_exists():
    problems = _doc_problems(ARCHITECTURE.read_text())
    assert not problems, "docs/architecture.md names what does not exist:\n" + "\n".join(problems)


def test_the_architecture_layout_names_every_module():
    text = ARCHITECTURE.read_text()
    layout = text.split("\n## The layout\n", 1)[1].split("\n## ", 1)[0]
    named = {span for span in _spans(layout) if span.endswith(".py") and not span.startswith(_REPO_FOLDERS)}
    modules = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" or path.parent == PACKAGE
    }
    assert modules - named == set(), f"docs/architecture.md's layout does not name {sorted(modules - named)}"
    assert named - modules == set(), (
        f"docs/architecture.md's layout names modules that do not exist: {named - modules}"
    )


#: The size limits of issue 41: a function (decorators included) or a class over them is split by idea.
LIMITS = {"function": 80, "class": 350}


def test_no_function_or_class_is_over_its_limit():
    over = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                if node.end_lineno - start + 1 > LIMITS[kind]:
                    over.append(f"{module}.{node.name}: {node.end_lineno - start + 1} lines")
    assert not over, f"over the limits {LIMITS}: {over}"
