# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The documentation runs: every tutorial (as the notebook the site publishes), every example's offline mode, the
site (the Markdown pages' snippets: tests/test_docs_run.py).

The slow tests run the examples the way a reader would (``python SCRIPT ARGS``, offline, on the
CPU), in one subprocess (``tests/script_runner.py``) so that the heavy imports are paid once, each script with its
own working directory and time limit. Each tutorial is executed once, as the notebook the docs site publishes
(``docs/hooks/tutorials.py`` makes it from the script), in a fresh Jupyter kernel (nbclient, ipykernel): the same
cells in the same order as ``python docs/tutorials/NAME.py``, which a fast test keeps free of anything that would
run in only one of the two. The site is built with ``mkdocs build --strict`` once per session
(``helpers.docs_site``). The fast tests check the examples' ``--help`` and that every tutorial is a well-formed
jupytext percent script.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_plugins = ["helpers.docs_site"]

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.py"))
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
RUNNER = ROOT / "tests" / "script_runner.py"

# Offline mode of each example: the flag that makes it run on a toy model without the Hub.
OFFLINE_ARGS = {
    "pythia_sweep.py": ["--toy", "--no-progress"],
    "eurobert_mlm.py": ["--toy", "--no-progress"],
    "compare_methods.py": ["--toy"],
    "live_training.py": ["--toy"],
}

# Each script must finish well within a minute on 2 CPU cores (imports excluded: they are paid once by the runner).
SCRIPT_TIMEOUT_S = 120
RUN_ALL_TIMEOUT_S = 900
# A tutorial's notebook: a fresh kernel pays the imports (10 to 20 s on a busy 2-core machine) before its cells.
CELL_TIMEOUT_S = 300
#: Code that runs in only one of ``python SCRIPT`` and a notebook kernel (IPython's names and magics, __file__).
SCRIPT_OR_NOTEBOOK_ONLY = re.compile(r"__file__|__name__|get_ipython|^\s*[%!]|\bdisplay\(", re.M)


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        NO_MKDOCS_2_WARNING="1",
        MPLBACKEND="Agg",
    )
    return env


def getting_started_snippet() -> str:
    """The first Python block of the "first result in ten lines" section of the getting-started page."""
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = page.split("## A first result in ten lines", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/getting-started.md lost its ten-line example"
    return match.group(1)


def test_every_example_has_an_offline_mode_here():
    assert EXAMPLES and {path.name for path in EXAMPLES} == set(OFFLINE_ARGS)
    assert {path.name for path in TUTORIALS} >= {
        "tangent_subspaces.py",
        "checkpoint_sweep.py",
        "attributions.py",
        "live_training.py",
    }


def test_getting_started_snippet_is_ten_lines():
    lines = [line for line in getting_started_snippet().splitlines() if line.strip()]
    assert len(lines) <= 10


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_help_answers_at_once(example):
    completed = subprocess.run(
        [sys.executable, str(example), "--help"], capture_output=True, text=True, timeout=60, env=_offline_env()
    )
    assert completed.returncode == 0, completed.stderr
    assert "usage:" in completed.stdout and "--toy" in completed.stdout
    assert "offline" in completed.stdout.lower()


def _tutorials_hook():
    """The docs hook module that turns tutorial scripts into pages and notebooks (needs jupytext)."""
    pytest.importorskip("jupytext", reason="jupytext comes with the docs extra: pip install -e '.[docs]'")
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import tutorials
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    return tutorials


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_is_a_percent_script_with_a_title(tutorial):
    source = tutorial.read_text(encoding="utf-8")
    assert source.startswith("# MIT License\n#\n# Copyright (c) 2026 interpreto-anisotropy contributors")
    page = _tutorials_hook().percent_to_markdown(source, script_name=tutorial.name)
    assert page.startswith("# ") and "```python" in page
    assert f"[Download as notebook]({tutorial.stem}.ipynb)" in page


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_notebook_has_the_script_cells(tutorial):
    nbformat = pytest.importorskip("nbformat", reason="nbformat comes with jupytext: pip install -e '.[docs]'")
    source = tutorial.read_text(encoding="utf-8")
    notebook = nbformat.reads(_tutorials_hook().percent_to_notebook(source), as_version=4)
    nbformat.validate(notebook)
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell in source for cell in code)
    assert all(not cell.get("outputs") for cell in notebook.cells), "the published notebook carries no outputs"
    only_one_way = SCRIPT_OR_NOTEBOOK_ONLY.findall("\n".join(code))
    assert not only_one_way, f"{tutorial.name} uses {only_one_way}: it would run as a script or a notebook, not both"


# --------------------------------------------------------------------------------------------------- slow: run them
@pytest.fixture(scope="module")
def script_results(tmp_path_factory):
    """Run the examples' offline modes; {name: result}."""
    from interpreto_anisotropy.demo import load_corpus

    load_corpus("train", max_texts=1, progress=False)  # harvest the corpus cache once, outside the timed scripts
    base = tmp_path_factory.mktemp("scripts")
    specs = [
        {"name": path.name, "path": str(path), "args": OFFLINE_ARGS[path.name], "cwd": str(base / path.stem)}
        for path in EXAMPLES
    ]
    for spec in specs:
        spec["timeout"] = SCRIPT_TIMEOUT_S
    spec_path, results_path = base / "spec.json", base / "results.json"
    spec_path.write_text(json.dumps(specs))
    completed = subprocess.run(
        [sys.executable, str(RUNNER), str(spec_path), str(results_path)],
        capture_output=True,
        text=True,
        timeout=RUN_ALL_TIMEOUT_S,
        env=_offline_env(),
        cwd=base,
    )
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    assert results, f"the script runner reported nothing:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    print("\n".join(f"{name}: {result['seconds']:.1f} s" for name, result in results.items()))
    return results


def _check(results: dict, name: str) -> dict:
    assert name in results, f"{name} did not run (an earlier script may have crashed the runner)"
    result = results[name]
    assert result["ok"], f"{name} failed after {result['seconds']:.0f} s:\n{result['error']}\n{result['output']}"
    return result


@pytest.mark.slow
@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_notebook_runs_offline(tutorial, tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat comes with jupytext: pip install -e '.[docs]'")
    nbclient = pytest.importorskip("nbclient", reason="nbclient comes with the test extra: pip install -e '.[test]'")
    pytest.importorskip("ipykernel", reason="ipykernel comes with the test extra: pip install -e '.[test]'")
    notebook = nbformat.reads(_tutorials_hook().percent_to_notebook(tutorial.read_text("utf-8")), as_version=4)
    start = time.perf_counter()
    client = nbclient.NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=_offline_env())  # raises CellExecutionError, with the cell and its traceback, on an error
    print(f"{tutorial.name} as a notebook: {time.perf_counter() - start:.1f} s")
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.get("output_type") == "error"]
    assert any(output.get("output_type") in ("stream", "display_data", "execute_result") for output in outputs)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_offline_mode_runs(script_results, example):
    output = _check(script_results, example.name)["output"]
    assert "wall time" in output


# --------------------------------------------------------------------------------------------------- slow: the site
@pytest.mark.slow
def test_docs_build_strict(built_site):
    site = built_site
    for tutorial in TUTORIALS:
        page = site / "tutorials" / tutorial.stem / "index.html"
        assert page.exists(), f"no page for {tutorial.name}"
        assert "language-python" in page.read_text(encoding="utf-8") or "highlight" in page.read_text(encoding="utf-8")
        assert (site / "tutorials" / tutorial.name).exists(), f"{tutorial.name} is not published for download"
        notebook = site / "tutorials" / f"{tutorial.stem}.ipynb"
        assert notebook.exists(), f"{tutorial.stem}.ipynb is not published for download"
        assert notebook.read_text("utf-8") == _tutorials_hook().percent_to_notebook(tutorial.read_text("utf-8"))
        assert f'href="../{notebook.name}"' in page.read_text(encoding="utf-8"), f"no notebook link on {page}"
    api = "".join(path.read_text(encoding="utf-8") for path in (site / "api").rglob("index.html"))
    from test_docstrings import public_names

    absent = [name for name in public_names() if name.rsplit(".", 1)[-1] not in api]
    assert not absent, f"public names missing from the built API reference: {absent}"
