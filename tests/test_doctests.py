# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The runnable examples of the pure modules' docstrings run, and give what they show.

Pure modules need no model: plumbing, metrics, positions, masking, controls, checkpoint listing, settings, the toy
corpus and tokenizers, errors, the command line's parsers. (Examples that need a wrapped model or a sweep table
are marked `# doctest: +SKIP`; the tutorials run those.)
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest
import torch

import interpreto_anisotropy as ia

PURE_MODULES = [
    "interpreto_anisotropy.cli",
    "interpreto_anisotropy.commons.accumulators",
    "interpreto_anisotropy.commons.distributed",
    "interpreto_anisotropy.commons.files",
    "interpreto_anisotropy.commons.tensors",
    "interpreto_anisotropy.demo.corpus",
    "interpreto_anisotropy.demo.options",
    "interpreto_anisotropy.demo.toy_models",
    "interpreto_anisotropy.errors",
    "interpreto_anisotropy.live.options",
    "interpreto_anisotropy.metrics",
    "interpreto_anisotropy.metrics.isotropy",
    "interpreto_anisotropy.metrics.manifold",
    "interpreto_anisotropy.probing.anisotropy",
    "interpreto_anisotropy.probing.intervals",
    "interpreto_anisotropy.probing.masking",
    "interpreto_anisotropy.probing.objectives",
    "interpreto_anisotropy.probing.result",
    "interpreto_anisotropy.probing.statistics",
    "interpreto_anisotropy.reading.batching",
    "interpreto_anisotropy.reading.split_point",
    "interpreto_anisotropy.reading.positions",
    "interpreto_anisotropy.results.change",
    "interpreto_anisotropy.results.records",
    "interpreto_anisotropy.results.schema",
    "interpreto_anisotropy.results.verdict",
    "interpreto_anisotropy.sweeps.checkpoints",
    "interpreto_anisotropy.sweeps.config",
    "interpreto_anisotropy.sweeps.resume",
    "interpreto_anisotropy.sweeps.runner",
    "interpreto_anisotropy.sweeps.suites",
    "interpreto_anisotropy.tangents.controls",
    "interpreto_anisotropy.tangents.explainers",
    "interpreto_anisotropy.tangents.sharing",
    "interpreto_anisotropy.tangents.subspace",
]


#: Modules an API page renders whole (`::: module` in docs/api/*.md): their examples are the reader's, so each of
#: the pure ones must have one. Elsewhere docstrings are one-line summaries (docs/architecture.md says where the
#: explanations went), so a module may have none.
DOCUMENTED = {
    match.group(1)
    for page in (Path(__file__).resolve().parents[1] / "docs" / "api").glob("*.md")
    for match in re.finditer(r"^:::\s+(\S+)", page.read_text(encoding="utf-8"), re.M)
}


@pytest.mark.parametrize("name", PURE_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    attempted = 0
    for test in doctest.DocTestFinder().find(module, globs={"torch": torch, "ia": ia, **vars(module)}):
        result = runner.run(test, out=report.append)
        attempted += result.attempted
    assert attempted > 0 or name not in DOCUMENTED, f"{name} has no runnable example"
    assert not runner.failures, "".join(report)
