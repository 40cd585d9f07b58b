# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The documentation runs: every tutorial, every example's offline mode, the getting-started snippet, the site.

The slow tests run the scripts the way a reader would (``python SCRIPT ARGS``, offline, on the CPU), in one
subprocess (``tests/script_runner.py``) so that the heavy imports are paid once, each script with its own working
directory and time limit; and they build the site with ``mkdocs build --strict``. The fast tests check the
examples' ``--help`` and that every tutorial is a well-formed jupytext percent script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_is_a_percent_script_with_a_title(tutorial):
    pytest.importorskip("jupytext", reason="jupytext comes with the docs extra: pip install -e '.[docs]'")
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from tutorials import percent_to_markdown
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    source = tutorial.read_text(encoding="utf-8")
    assert source.startswith("# MIT License\n#\n# Copyright (c) 2026 interpreto-anisotropy contributors")
    page = percent_to_markdown(source, script_name=tutorial.name)
    assert page.startswith("# ") and "```python" in page


# --------------------------------------------------------------------------------------------------- slow: run them
@pytest.fixture(scope="module")
def script_results(tmp_path_factory):
    """Run the tutorials, the examples' offline modes and the getting-started snippet; {name: result}."""
    from interpreto_anisotropy.demo import load_corpus

    load_corpus("train", max_texts=1, progress=False)  # harvest the corpus cache once, outside the timed scripts
    base = tmp_path_factory.mktemp("scripts")
    snippet = base / "getting_started.py"
    snippet.write_text(getting_started_snippet(), encoding="utf-8")
    specs = [{"name": "getting_started", "path": str(snippet), "args": [], "cwd": str(base / "getting_started")}]
    specs += [{"name": path.name, "path": str(path), "args": [], "cwd": str(base / path.stem)} for path in TUTORIALS]
    specs += [
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
def test_getting_started_snippet_runs(script_results):
    output = _check(script_results, "getting_started")["output"]
    assert "energy share E_T" in output and "p-value" in output


@pytest.mark.slow
@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_runs_offline(script_results, tutorial):
    _check(script_results, tutorial.name)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_offline_mode_runs(script_results, example):
    output = _check(script_results, example.name)["output"]
    assert "wall time" in output


# --------------------------------------------------------------------------------------------------- slow: the site
@pytest.mark.slow
def test_docs_build_strict(tmp_path):
    missing = [
        name
        for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "jupytext")
        if importlib.util.find_spec(name.split(".")[0]) is None
    ]
    if missing:
        pytest.skip(f"the docs extra is not installed (missing {missing}): pip install -e '.[docs]'")
    site = tmp_path / "site"
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_offline_env(),
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-6000:]
    for tutorial in TUTORIALS:
        page = site / "tutorials" / tutorial.stem / "index.html"
        assert page.exists(), f"no page for {tutorial.name}"
        assert "language-python" in page.read_text(encoding="utf-8") or "highlight" in page.read_text(encoding="utf-8")
        assert (site / "tutorials" / tutorial.name).exists(), f"{tutorial.name} is not published for download"
    api = "".join(path.read_text(encoding="utf-8") for path in (site / "api").rglob("index.html"))
    from test_docstrings import public_names

    absent = [name for name in public_names() if name.rsplit(".", 1)[-1] not in api]
    assert not absent, f"public names missing from the built API reference: {absent}"
