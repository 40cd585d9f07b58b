# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A training process with a live probe, killed (SIGKILL) at random moments and restarted from its last training
checkpoint each time, ends with the rows of the same training never killed, while a reader watches the rows.

Recomputed another way: an uninterrupted run in its own process gives the expected rows; after every kill every
line of rows.jsonl but a torn last one is a whole row, and every read of the folder, during the runs and between
them, is a prefix of the expected rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import interpreto_anisotropy as ia

N_STEPS = 60
EARLY_STEPS = 10
CHECKPOINT_EVERY = 5
N_KILLS = 3  # each a few windows further on: 60 steps leave room for them

_TRAINING = textwrap.dedent(
    f"""
    import os, sys, torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    import interpreto_anisotropy as ia

    results_dir, checkpoint = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = GPTNeoXConfig(vocab_size=96, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=64)
    model = GPTNeoXForCausalLM(config).double()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"]); optimizer.load_state_dict(state["optimizer"]); start = state["step"]
    probe = ia.TrainingProbe(model, 1, nb_concepts=4, n_controls=5, n_bootstrap=200, early_steps={EARLY_STEPS},
                             results_dir=results_dir, start_step=start, flush_seconds=0)
    with probe:
        for step in range(start, {N_STEPS}):
            ids = torch.randint(0, 96, (4, 32), generator=torch.Generator().manual_seed(step))
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step(); optimizer.zero_grad()
            probe.step()
            if (step + 1) % {CHECKPOINT_EVERY} == 0:
                torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}},
                           checkpoint + ".tmp")
                os.replace(checkpoint + ".tmp", checkpoint)
    """
)


def _train(results_dir, checkpoint) -> subprocess.Popen:
    command = [sys.executable, "-c", _TRAINING, str(results_dir), str(checkpoint)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lines(results_dir) -> list[str]:
    path = results_dir / "rows.jsonl"
    return path.read_text().split("\n") if path.exists() else [""]


def _read(results_dir) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a row caught half-written is left out, with a warning
        return ia.SweepResult.load(results_dir).rows if (results_dir / "config.json").exists() else []


@pytest.mark.slow
def test_a_training_killed_at_random_moments_resumes_to_the_rows_of_the_run_never_killed(tmp_path):
    whole = _train(tmp_path / "whole", tmp_path / "whole.pt")
    assert whole.wait() == 0, whole.stderr.read().decode()[-2000:]
    expected = [json.dumps(row) for row in ia.SweepResult.load(tmp_path / "whole").rows]
    assert len(expected) == N_STEPS

    results_dir, checkpoint = tmp_path / "killed", tmp_path / "killed.pt"
    random = np.random.default_rng(0)
    kills, reads = [], 0
    while len(kills) < N_KILLS:
        written = len(_read(results_dir))
        target = max(written, EARLY_STEPS) + int(random.integers(0, 10))  # rows exist once the tangent does
        process = _train(results_dir, checkpoint)
        while process.poll() is None and len(_read(results_dir)) <= target:
            now = [json.dumps(row) for row in _read(results_dir)]
            assert now == expected[: len(now)]
            reads += 1
        time.sleep(random.uniform(0, 0.02))
        if process.poll() is not None:  # finished before its kill
            assert process.returncode == 0, process.stderr.read().decode()[-2000:]
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills.append(len(_read(results_dir)))
        lines = _lines(results_dir)
        assert all(json.loads(line) for line in lines[:-1])  # whole rows, but for a torn last one
        now = [json.dumps(row) for row in _read(results_dir)]
        assert now == expected[: len(now)], kills
    finished = _train(results_dir, checkpoint)
    assert finished.wait() == 0, finished.stderr.read().decode()[-2000:]
    assert [json.dumps(row) for row in ia.SweepResult.load(results_dir).rows] == expected, kills
    assert len(kills) == N_KILLS and reads > 0, (kills, reads)
    assert not list(results_dir.glob(".*.tmp")), os.listdir(results_dir)
