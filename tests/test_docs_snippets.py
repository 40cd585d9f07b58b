# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Every snippet of the README, the docs, the tutorials and the examples that fits a tangent fits the right one.

* Statically: no tangent is fitted on the output of Interpreto's `get_activations` (which reads models with learned
  absolute positions at shifted positions), in any Python block of a Markdown page or any tutorial or example.
* By running them: the README's and the how-to pages' snippets that wrap a model of yours are executed on tiny
  GPT-2 and BERT models (absolute positions: the models the old snippets got wrong), and every tangent they fit
  equals the PCA of the reference activations (one unpadded forward per text) at its split point.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
import torch
from architectures import FAMILIES, VOCAB, build

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SCRIPTS = [*sorted((ROOT / "docs" / "tutorials").glob("*.py")), *sorted((ROOT / "examples").glob("*.py"))]
# Sequence-level rows of Interpreto's SplitterForClassification, which only the splitter reads (rotary toy model).
ALLOWED = {("attributions.py", "sequence_activations")}


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def _sources() -> list[tuple[str, str]]:
    sources = [
        (f"{path.name}[{index}]", block) for path in MARKDOWN for index, block in enumerate(_python_blocks(path))
    ]
    return sources + [(path.name, path.read_text()) for path in SCRIPTS]


def _fitted_on_get_activations(source: str) -> list[str]:
    """Names bound to `get_activations(...)` output that are then passed to a `.fit` / `.partial_fit` call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a Markdown block with "..." placeholders in odd places
        tree = ast.parse(source.replace("...", "pass"))
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "get_activations":
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    read |= {name.id for name in names if isinstance(name, ast.Name)}
    fitted = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("fit", "partial_fit")
        ):
            fitted += [arg.id for arg in node.args[:1] if isinstance(arg, ast.Name) and arg.id in read]
    return fitted


def test_the_static_check_sees_the_old_snippet():
    old = "acts, _ = mwsp.get_activations(texts, activation_granularity=TOKEN)\ntangent = ia.PCATangent(mwsp, nb_concepts=16).fit(acts)"
    assert _fitted_on_get_activations(old) == ["acts"]


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[name for name, _ in _sources()])
def test_no_snippet_fits_a_tangent_on_get_activations_output(name, source):
    bad = [variable for variable in _fitted_on_get_activations(source) if (name, variable) not in ALLOWED]
    assert not bad, f"{name} fits a tangent on get_activations output {bad}: fit on texts (tangent.fit(texts))"


def _runnable_blocks() -> list[tuple[str, str]]:
    """Blocks that wrap a model of the reader's own (`ModelWithSplitPoints(model, ...)`) and fit a tangent.

    The set-up blocks of the how-to pages, which build a toy model of their own (`ia.demo.build_model`), are left to
    tests/test_docs_run.py, which runs every page's blocks in order.
    """
    return [
        (f"{path.relative_to(ROOT)}[{index}]", block)
        for path in MARKDOWN
        for index, block in enumerate(_python_blocks(path))
        if "ModelWithSplitPoints(model" in block and ".fit(" in block and "ia.demo.build_model(" not in block
    ]


def test_the_runnable_snippets_are_found():
    names = [name for name, _ in _runnable_blocks()]
    assert any(name.startswith("README.md") for name in names)
    assert any("several-layers" in name for name in names)


def _reference_pca(model, split_point: str, tokenizer, texts: list[str], k: int) -> np.ndarray:
    """Top-k principal directions (d, k) of the split point's rows, one unpadded forward per text."""
    rows, store = [], {}

    def hook(module, args, output):
        store["h"] = output[0] if isinstance(output, tuple) else output

    handle = model.get_submodule(split_point).register_forward_hook(hook)
    special = set(tokenizer.all_special_ids)
    try:
        with torch.no_grad():
            for text in texts:
                ids = torch.tensor(tokenizer(text)["input_ids"])
                model(input_ids=ids[None])
                keep = torch.tensor([token not in special for token in ids.tolist()])
                rows.append(store["h"][0][keep])
    finally:
        handle.remove()
    centred = torch.cat(rows).numpy()
    centred = centred - centred.mean(0)
    return np.linalg.svd(centred, full_matrices=False)[2][:k].T


@pytest.mark.parametrize("family_name", ["gpt2", "bert"])
@pytest.mark.parametrize(("name", "block"), _runnable_blocks(), ids=[name for name, _ in _runnable_blocks()])
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_snippet_fits_the_reference_tangent(name, block, family_name, corpus_texts, texts, fit_texts, monkeypatch):
    family = FAMILIES[family_name]
    arch = "gpt_neox" if family.tokenizer == "decoder" else "eurobert"
    tokenizer = train_tokenizer(corpus_texts, arch=arch, vocab_size=VOCAB)
    model = build(family, tokenizer, layers=10)
    fitted = []
    original_fit = ia.TangentExplainer.fit

    def recording_fit(self, activations, *args, **kwargs):
        fitted.append((self, copy.copy(activations)))
        return original_fit(self, activations, *args, **kwargs)

    monkeypatch.setattr(ia.TangentExplainer, "fit", recording_fit)
    namespace = {
        "model": model,
        "tok": tokenizer,
        "tokenizer": tokenizer,
        "fit_texts": fit_texts[:12],
        "probe_texts": texts[:6],
        "texts": fit_texts[:12],
    }
    exec(compile(block, name, "exec"), namespace)  # noqa: S102  (our own docs)
    assert fitted, f"{name} fitted no tangent"
    for tangent, fit_input in fitted:
        assert isinstance(fit_input, list) and all(isinstance(text, str) for text in fit_input)
        splitter = tangent.splitter
        expected = _reference_pca(splitter._model, splitter.split_point, tokenizer, fit_input, tangent.nb_concepts)
        angle = np.degrees(scipy.linalg.subspace_angles(tangent.subspace.basis.double().numpy(), expected).max())
        assert angle < 0.01, (
            f"{name} on {family_name} at {splitter.split_point}: {angle:.3g} degrees from the reference"
        )
