# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""1 -> 2 processes on CPU: the data-parallel probe under torchrun (gloo), one thread per process.

Runs the same `probe.run` (random GPT-NeoX d=256, 4 layers, a rank-16 tangent, 20 controls) with 1 and with 2
processes and reports the wall time of the probe itself (after model loading), the speed-up and whether the
results agree. A single process with 2 threads is measured too, as the alternative use of the same 2 cores.

Usage:
    python benchmarks/distributed_scaling.py [--sequences 64] [--length 128]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def worker(args: argparse.Namespace) -> None:
    """One rank: build the model, probe, print {"seconds", "energy_share"} from rank 0."""
    sys.path.insert(0, str(Path(__file__).parent))
    from probe_overhead import build, random_batch

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.commons import distributed

    distributed.init_from_environment()
    torch.set_num_threads(args.threads)
    model, mwsp, vocab = build("cpu-small", "cpu")
    inputs = random_batch(vocab, args.sequences, args.length, "cpu", seed=3)
    tangent = ia.Subspace.random(model.config.hidden_size, 16, seed=0)
    probe = ia.GradientProbe(mwsp, batch_size=8)
    distributed.barrier()
    start = time.perf_counter()
    result = probe.run(inputs, tangent, n_controls=20, progress=False)
    distributed.barrier()
    seconds = time.perf_counter() - start
    if distributed.is_main_process():
        print(json.dumps({"seconds": seconds, "energy_share": result.energy_share, "n_tokens": result.n_tokens}))


def launch(processes: int, threads: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    command += [__file__, "--worker", "--threads", str(threads)]
    command += ["--sequences", str(args.sequences), "--length", str(args.length)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with tempfile.TemporaryDirectory() as folder:
        output = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=folder).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=64)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    one = launch(1, 1, args)
    two = launch(2, 1, args)
    threads = launch(1, 2, args)
    print(f"# Data-parallel probe on CPU: {args.sequences} x {args.length} tokens, d=256, 4 layers, k=16, 20 controls")
    print(f"# machine: {os.cpu_count()} cores, torch {torch.__version__}, gloo")
    print("| processes x threads | probe wall (s) | speed-up vs 1 x 1 | energy share |")
    print("|---|---|---|---|")
    for label, run in (("1 x 1", one), ("2 x 1", two), ("1 x 2", threads)):
        print(
            f"| {label} | {run['seconds']:.2f} | {one['seconds'] / run['seconds']:.2f} | {run['energy_share']:.6f} |"
        )
    agree = abs(two["energy_share"] - one["energy_share"]) <= 1e-6 * abs(one["energy_share"])
    print(f"# 2-process result equals the 1-process result to 1e-6: {agree}")


if __name__ == "__main__":
    main()
