# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Golden outputs: refactors keep numbers, on this machine bit for bit and on any machine to rounding.

Compared against the committed files (`tests/golden/*.json`) at the portable tolerances of `tests/helpers/golden.py`
(one rule per quantity, set by its precision path): a checkpoint sweep's rows (PCA and SVD tangents, reference
"both"), and, on each toy architecture, a fitted tangent's basis, a `GradientProbe` result and raw gradients.

Environment:
    INTERPRETO_ANISOTROPY_RECORD_GOLDEN=1: record the committed files (after a change that is meant to move
        numbers, in a commit of its own that says why).
    INTERPRETO_ANISOTROPY_RECORD_GOLDEN=local: record this machine's own copy under `tests/golden/local/<key>/`
        (not committed; the key hashes the CPU model, kernels, threads and torch). While it exists, every run on
        the same machine and settings must reproduce it bit for bit: record it before a refactor, compare after.
    INTERPRETO_ANISOTROPY_GOLDEN_DUMP=DIR: also write the values computed to DIR (`benchmarks/golden_paths.py`).
    INTERPRETO_ANISOTROPY_GOLDEN_BATCH=N: probe, fit and sweep N sequences per batch instead of the default
        (the same mathematics, another summation order).
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import interpreto_anisotropy as ia
from tests.helpers.golden import machine_key, mismatches, run_golden_tests

GOLDEN = Path(__file__).resolve().parent / "golden"
LOCAL = GOLDEN / "local" / machine_key()
RECORD = os.environ.get("INTERPRETO_ANISOTROPY_RECORD_GOLDEN", "")
DUMP = os.environ.get("INTERPRETO_ANISOTROPY_GOLDEN_DUMP")
BATCH = int(os.environ.get("INTERPRETO_ANISOTROPY_GOLDEN_BATCH", "0")) or None
# timings, paths of this run's temporary folders, and the content hash of the toy weights (an identity, not a result)
UNSTABLE_KEYS = {"wall_seconds", "source", "fingerprint"}


def _canonical(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True) + "\n"


def _check(name: str, value) -> None:
    text = _canonical(value)
    value = json.loads(text)
    if DUMP:
        Path(DUMP).mkdir(parents=True, exist_ok=True)
        (Path(DUMP) / f"{name}.json").write_text(text)
    if RECORD in ("1", "local"):
        folder = GOLDEN if RECORD == "1" else LOCAL
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(text)
        return
    path = GOLDEN / f"{name}.json"
    assert path.exists(), f"no golden file {path.name}: record it with INTERPRETO_ANISOTROPY_RECORD_GOLDEN=1"
    problems = mismatches(value, json.loads(path.read_text()), name)
    assert not problems, "beyond rounding (times its allowance): " + ", ".join(
        f"{where} x{ratio:.3g}" for where, ratio in problems[:10]
    )
    local = LOCAL / f"{name}.json"
    if local.exists():
        assert text == local.read_text(), f"{name} differs from this machine's own record {local} (bit for bit)"


@pytest.mark.parametrize("method", ["pca", "svd"])
def test_sweep_rows_are_golden(method, toy_checkpoints, fit_texts, texts, tmp_path):
    batch = {"batch_size": BATCH} if BATCH else {}
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
        **batch,
    ).run()
    rows = [{key: value for key, value in row.items() if key not in UNSTABLE_KEYS} for row in table.rows]
    _check(f"sweep_rows_{method}", rows)


@pytest.mark.parametrize("arch", ["gpt_neox", "llama", "eurobert"])
def test_tangent_and_probe_result_are_golden(arch, request, fit_texts, texts):
    mwsp = request.getfixturevalue(f"{arch}_mwsp")
    tangent = ia.PCATangent(mwsp, nb_concepts=6).fit(fit_texts[:16], batch_size=BATCH)
    subspace = tangent.subspace
    _check(
        f"tangent_{arch}",
        {"basis": subspace.basis.double().tolist(), "mean": subspace.mean.double().tolist()},
    )
    result = ia.GradientProbe(mwsp, seed=1, batch_size=BATCH).run(
        texts[:12], tangent, n_controls=5, seed=2, n_bootstrap=200, progress=False
    )
    _check(f"probe_{arch}", result.to_dict())
    raw = ia.GradientProbe(mwsp, seed=1, batch_size=BATCH).gradients(texts[:4])
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


#: Other summation orders of the same mathematics, each run in a fresh process (ATen and MKL choose their kernels
#: when they load): two threads; the AVX2 kernels of ATen and MKL, which AMD EPYC runs where Intel Xeon runs
#: AVX-512 (the machines the goldens were first found to differ on); three sequences a batch instead of eight.
OTHER_PATHS = {
    "two threads": {"INTERPRETO_ANISOTROPY_TEST_THREADS": "2"},
    "AVX2 kernels": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "batches of 3": {"INTERPRETO_ANISOTROPY_GOLDEN_BATCH": "3"},
}


@pytest.mark.slow
@pytest.mark.skipif(bool(RECORD), reason="recording, not comparing")
@pytest.mark.parametrize("path", list(OTHER_PATHS))
def test_golden_outputs_hold_on_other_summation_orders(path):
    run = run_golden_tests(OTHER_PATHS[path], timeout=600)
    assert run.returncode == 0, f"{path}: {run.stdout[-3000:]}{run.stderr[-2000:]}"


def _golden(name: str):
    return json.loads((GOLDEN / f"{name}.json").read_text())


def _rotated(basis: np.ndarray, degrees: float) -> np.ndarray:
    """`basis` with its first column turned by `degrees` towards a direction outside its span."""
    outside = np.linalg.qr(np.concatenate([basis, np.eye(basis.shape[0])], axis=1))[0][:, basis.shape[1]]
    angle = math.radians(degrees)
    turned = basis.copy()
    turned[:, 0] = math.cos(angle) * basis[:, 0] + math.sin(angle) * outside
    return turned


def test_rounding_level_changes_pass_and_real_changes_fail():
    """The rules' power: a float32-rounding move passes; a 1e-4 relative change or a 0.1 degree rotation fails."""
    probe, row = _golden("probe_gpt_neox"), _golden("sweep_rows_pca")[0]
    tangent = _golden("tangent_llama")
    basis = np.asarray(tangent["basis"])
    generator = np.random.default_rng(0)

    rounded = copy.deepcopy(probe)
    for key in ("energy_share", "control_mean", "loss", "isoscore_star", "ci_low", "ci_high"):
        rounded[key] *= 1 + 1e-6 * generator.standard_normal()
    rounded["control_energy_shares"] = [v * (1 + 1e-6) for v in probe["control_energy_shares"]]
    assert mismatches(rounded, probe, "probe") == []
    turned = {"basis": _rotated(basis, 0.001).tolist(), "mean": tangent["mean"]}
    assert mismatches(turned, tangent, "tangent") == []
    sign_flipped = {"basis": (basis * np.array([-1, 1, 1, 1, 1, -1])).tolist(), "mean": tangent["mean"]}
    assert mismatches(sign_flipped, tangent, "tangent") == []
    mixed = {"basis": (basis @ np.linalg.qr(generator.standard_normal((6, 6)))[0]).tolist(), "mean": tangent["mean"]}
    assert mismatches(mixed, tangent, "tangent") == []

    for record, key in [(probe, "energy_share"), (row, "energy_share"), (row, "activation_effective_rank")]:
        changed = copy.deepcopy(record)
        changed[key] *= 1 + 1e-4
        assert [where for where, _ in mismatches(changed, record, "r")] == [f"r.{key}"]
    turned = {"basis": _rotated(basis, 0.1).tolist(), "mean": tangent["mean"]}
    assert [where for where, _ in mismatches(turned, tangent, "tangent")] == ["tangent.basis"]
    stepped = copy.deepcopy(row)  # step-0's p = 1/6 with no control near the tangent's share
    stepped["p_value"] += 1 / 6
    assert [where for where, _ in mismatches(stepped, row, "r")] == ["r.p_value"]
    renamed = copy.deepcopy(row)
    renamed["new_column"] = 1.0
    assert "no rule" in mismatches(renamed | {"new_column": 1.0}, renamed, "r")[0][0]


def test_a_near_tie_allows_one_step_of_the_rank_p_value():
    record = copy.deepcopy(_golden("probe_llama"))
    record["control_energy_shares"][0] = record["energy_share"] * (1 + 1e-6)  # within rounding of the tangent's
    moved = copy.deepcopy(record)
    moved["p_value"] = record["p_value"] + (1 if record["p_value"] < 1 else -1) / (
        len(record["control_energy_shares"]) + 1
    )
    assert mismatches(moved, record, "r") == []
    moved["p_value"] = record["p_value"] + 2 / (len(record["control_energy_shares"]) + 1)
    assert [where for where, _ in mismatches(moved, record, "r")] == ["r.p_value"]
