# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Golden outputs: refactors keep numbers.

Recorded once (`INTERPRETO_ANISOTROPY_RECORD_GOLDEN=1 pytest tests/test_golden.py`) before a refactor and compared
after it: a checkpoint sweep's rows (PCA and SVD tangents, reference "both"), and, on each toy architecture, a
fitted tangent's basis and a `GradientProbe` result. Numbers must be equal to 1e-12 (relative; the computations
are deterministic on one thread, so in practice bit-identical); everything else exactly.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

import interpreto_anisotropy as ia

GOLDEN = Path(__file__).resolve().parent / "golden"
RECORD = os.environ.get("INTERPRETO_ANISOTROPY_RECORD_GOLDEN") == "1"
RTOL = 1e-12
# timings, paths of this run's temporary folders, and the content hash of the toy weights (an identity, not a result)
UNSTABLE_KEYS = {"wall_seconds", "source", "fingerprint"}


def _check(name: str, value) -> None:
    path = GOLDEN / f"{name}.json"
    if RECORD:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
        return
    assert path.exists(), f"no golden file {path.name}: record it with INTERPRETO_ANISOTROPY_RECORD_GOLDEN=1"
    _assert_same(value, json.loads(path.read_text()), name)


def _assert_same(actual, expected, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        for key in expected:
            _assert_same(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for index, (mine, theirs) in enumerate(zip(actual, expected, strict=True)):
            _assert_same(mine, theirs, f"{where}[{index}]")
    elif isinstance(expected, float) and not isinstance(actual, bool):
        if math.isnan(expected):
            assert math.isnan(actual), where
        else:
            assert actual == pytest.approx(expected, rel=RTOL, abs=1e-300), where
    else:
        assert actual == expected, where


def _jsonable(value):
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("method", ["pca", "svd"])
def test_sweep_rows_are_golden(method, toy_checkpoints, fit_texts, texts, tmp_path):
    table = ia.CheckpointSweep(
        str(toy_checkpoints.out_dir / "checkpoint-*"),
        split_point=1,
        texts=fit_texts[:16],
        probe_texts=texts[:12],
        method=method,
        nb_concepts=4,
        reference="both",
        n_controls=5,
        seed=3,
        max_fit_tokens=1500,
        max_metric_tokens=600,
        results_dir=tmp_path / "sweep",
        progress=False,
    ).run()
    rows = [{key: value for key, value in row.items() if key not in UNSTABLE_KEYS} for row in table.rows]
    _check(f"sweep_rows_{method}", _jsonable(rows))


@pytest.mark.parametrize("arch", ["gpt_neox", "llama", "eurobert"])
def test_tangent_and_probe_result_are_golden(arch, request, fit_texts, texts):
    mwsp = request.getfixturevalue(f"{arch}_mwsp")
    tangent = ia.PCATangent(mwsp, nb_concepts=6).fit(fit_texts[:16])
    subspace = tangent.subspace
    _check(
        f"tangent_{arch}",
        {"basis": subspace.basis.double().tolist(), "mean": subspace.mean.double().tolist()},
    )
    result = ia.GradientProbe(mwsp, seed=1).run(
        texts[:12], tangent, n_controls=5, seed=2, n_bootstrap=200, progress=False
    )
    _check(f"probe_{arch}", _jsonable(result.to_dict()))
    raw = ia.GradientProbe(mwsp, seed=1).gradients(texts[:4])
    _check(
        f"gradients_{arch}",
        {
            "gradients": raw.gradients.double().sum(0).tolist(),
            "norms": raw.gradients.double().norm(dim=1).tolist(),
            "positions": raw.positions.tolist(),
            "sequence_ids": raw.sequence_ids.tolist(),
            "loss_sum": raw.loss_sum,
            "loss_count": raw.loss_count,
        },
    )
    torch.testing.assert_close(subspace.basis.T @ subspace.basis, torch.eye(6), atol=1e-5, rtol=0)
