# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""torch.distributed on CPU (gloo, 2 processes under torchrun): results equal the single-process run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.live_kit import assert_same_window, micro_batch, probe_inputs
from helpers.tolerances import assert_difference_close
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons import distributed

WORKER = Path(__file__).parent / "helpers" / "distributed_worker.py"


def _torchrun(arguments: dict, tmp_path: Path) -> None:
    path = tmp_path / "args.json"
    path.write_text(json.dumps(arguments))
    threads = os.environ.get("INTERPRETO_ANISOTROPY_TEST_THREADS", "1")  # tests/conftest.py
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": threads}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(WORKER),
        str(path),
    ]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]


#: The ranks' other order of float64 reductions: the relative tolerance of every compared number.
RTOL = 1e-6
#: Row columns that are differences of IsoScore*s of order one.
ISOSCORE_DIFFERENCES = (
    "delta_isoscore_star",
    "delta_isoscore_star_controls",
    "delta_isoscore_star_random",
    "anisotropy_share",
)
#: Bootstrap-t interval bounds (the probe's and the change's from the first checkpoint).
INTERVAL_BOUNDS = (
    "ci_low",
    "ci_high",
    *(f"{name}_change_{end}" for name in ("energy_share", "energy_ratio") for end in ("low", "high")),
)


def _assert_close(mine, theirs, path=""):
    if isinstance(mine, dict):
        assert mine.keys() == theirs.keys(), path
        for key in mine:
            if key in INTERVAL_BOUNDS and mine.get("n_sequences", 10) < 10 and mine[key] is not None:
                # below 10 sequences the bootstrap-t amplifies the ranks' reduction rounding (tests/test_intervals.py)
                assert mine[key] == pytest.approx(theirs[key], rel=1e-3), f"{path}.{key}"
            elif key in ISOSCORE_DIFFERENCES and isinstance(theirs.get("isoscore_star"), float):
                # IsoScore* without a subspace minus IsoScore* (the anisotropy share: of two such), each known to
                # RTOL: compared on that scale (tests/helpers/tolerances.py)
                terms = (theirs["isoscore_star"], theirs["isoscore_star"] + np.asarray(theirs[key], dtype=float))
                assert_difference_close(mine[key], theirs[key], *terms, rtol=RTOL, err_msg=f"{path}.{key}")
            elif key not in ("wall_seconds", "source"):
                _assert_close(mine[key], theirs[key], f"{path}.{key}")
    elif isinstance(mine, list):
        assert len(mine) == len(theirs), path
        for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            _assert_close(a, b, f"{path}[{index}]")
    elif isinstance(mine, float) and isinstance(theirs, float):
        # abs: for values near 0 (the IsoScore* differences compare on their terms' scale above)
        assert mine == pytest.approx(theirs, rel=RTOL, abs=1e-8), path
    else:
        assert mine == theirs, path


def test_helpers_are_no_ops_without_a_process_group():
    assert not distributed.is_distributed()
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (0, 1, True)
    assert distributed.all_gather_objects(3) == [3] and distributed.broadcast_object("x") == "x"


@pytest.mark.slow
def test_a_non_finite_batch_on_one_rank_raises_on_every_rank(toy_checkpoints, texts, tmp_path):
    """No rank is left waiting in an all-reduce: the flag is summed first, then every rank raises."""
    out = tmp_path / "error"
    checkpoint = str(toy_checkpoints.checkpoints[-1])
    _torchrun({"mode": "probe_nonfinite", "checkpoint": checkpoint, "texts": texts[:14], "out": str(out)}, tmp_path)
    first, second = (Path(f"{out}.rank{rank}").read_text() for rank in (0, 1))
    assert first.startswith("NonFiniteError: Non-finite loss or gradients in batch 4 (sequences [12, 13])")
    assert second.startswith("NonFiniteError: Non-finite loss or gradients in a batch of another rank")


@pytest.mark.slow
@pytest.mark.parametrize(
    "draws",
    [{}, {"n_random": 20, "draw_seeds": {"a": 5, "b": 6}}],
    ids=["shared-draws-projected", "own-draws-from-scatter"],  # 20 x (4 + 4) > d = 32: read from G^T G
)
def test_data_parallel_probe_equals_the_single_process_probe(draws, toy_checkpoints, texts, tmp_path):
    checkpoint = str(toy_checkpoints.checkpoints[-1])
    out = tmp_path / "result.json"
    job = {"mode": "probe", "checkpoint": checkpoint, "texts": texts[:14], "out": str(out), "draws": draws}
    _torchrun(job, tmp_path)
    model, tokenizer = ia.checkpoints.load_checkpoint(ia.checkpoints.Checkpoint(0, checkpoint), device="cpu")
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=3)
    subspaces = {
        name: ia.Subspace.random(model.config.hidden_size, 4, seed=seed) for name, seed in (("a", 0), ("b", 1))
    }
    single = ia.GradientProbe(mwsp, batch_size=3).run(
        texts[:14], subspaces, n_controls=5, seed=2, progress=False, **draws
    )
    _assert_close(json.loads(out.read_text()), {name: result.to_dict() for name, result in single.items()})


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["data", "checkpoints"])
def test_distributed_sweep_equals_the_single_process_sweep(parallel, toy_checkpoints, fit_texts, texts, tmp_path):
    pattern = str(toy_checkpoints.out_dir / "checkpoint-*")
    settings = {
        "split_point": 1,
        "texts": fit_texts[:12],
        "probe_texts": texts[:9],
        "nb_concepts": 4,
        "n_controls": 4,
        "reference": "both",
        "max_fit_tokens": None,
        "max_metric_tokens": 500,
        "batch_size": 3,
        "progress": False,
    }
    _torchrun(
        {
            "mode": "sweep",
            "pattern": pattern,
            "sweep": {**settings, "parallel": parallel, "results_dir": str(tmp_path / "ddp")},
        },
        tmp_path,
    )
    parallel_rows = ia.SweepResult.load(tmp_path / "ddp").rows
    single_rows = ia.CheckpointSweep(pattern, results_dir=tmp_path / "single", **settings).run().rows
    assert len(parallel_rows) == len(single_rows) == 2 * len(toy_checkpoints.checkpoints)
    _assert_close(parallel_rows, single_rows)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")
def test_live_probe_under_data_parallel_training_equals_the_post_hoc_probe(toy_checkpoints, texts, tmp_path):
    """2 gloo ranks train a DDP model, each on its micro-batch; each window equals the probe of both micro-batches
    (rank 0's, then rank 1's) with the weights of that step, run in one process. So does a window scored
    retrospectively once the early tangent was fitted on both ranks' activations, its bootstrap interval included;
    and a run restarted at step 1 gives step 1's row again on both ranks."""
    checkpoint = str(toy_checkpoints.checkpoints[-1])
    out = tmp_path / "live.json"
    _torchrun({"mode": "live", "checkpoint": checkpoint, "texts": texts[:12], "out": str(out)}, tmp_path)
    rows = json.loads(out.read_text())
    early_rows = json.loads(Path(f"{out}.early").read_text())
    assert [row["step"] for row in rows] == [0, 1] and [row["retrospective"] for row in early_rows] == [True, False]
    for rank in (0, 1):  # restarted at step 1, both ranks score against the early tangent the stopped run fitted
        assert json.loads(Path(f"{out}.resumed{rank}").read_text()) == early_rows[1:]
    model, tokenizer = ia.checkpoints.load_checkpoint(ia.checkpoints.Checkpoint(0, checkpoint), device="cpu")
    model = model.double()
    tangents = {
        "given": ia.Subspace.random(model.config.hidden_size, 4, seed=0),
        "early": ia.Subspace.load(f"{out}.tangent.safetensors"),
    }
    for step in range(2):
        model.load_state_dict(torch.load(f"{out}.step{step}.pt"))
        batches = [
            micro_batch(tokenizer, texts[(2 * step + rank) * 3 : (2 * step + rank + 1) * 3], start=0)
            for rank in (0, 1)
        ]
        mwsp = ModelWithSplitPoints(model.eval(), split_point=1, tokenizer=tokenizer, batch_size=3)
        for row, tangent in ((rows[step], tangents["given"]), (early_rows[step], tangents["early"])):
            reference = ia.GradientProbe(mwsp, objective="causal_lm").run(
                probe_inputs(batches),
                tangent,
                n_controls=5,
                seed=0,
                draw_seeds={"tangent": row["draw_seed"]},
                progress=False,
            )
            assert_same_window(row, reference)
