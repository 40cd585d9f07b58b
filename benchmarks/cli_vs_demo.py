# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The command line's sweep with its default settings against the demo's own sweep, on the demo's checkpoints.

`interpreto-anisotropy demo` trains a toy GPT-NeoX (16 log-spaced checkpoints), then sweeps it with its own settings
(k = 8, 20 controls, reference "both", 160 fit and 80 probe docstrings). A user then runs the README's command,
`interpreto-anisotropy sweep --model runs/demo/toy --split-point 1 --out ...`, with every default: k = 16, 20
controls, the early reference, the built-in stdlib corpus (as many and as short texts as the demo's), and the
report. This script times both on the same checkpoints, alternately (so that both see the same machine load), each
in its own process; CPU time (user + system) is less disturbed by other processes than wall time. The ratio is what
to read: the defaults should keep a toy sweep near the demo's cost.

Usage:
    python benchmarks/cli_vs_demo.py [--checkpoints runs/demo/toy] [--repeats 2] [--threads 1]
        (without --checkpoints, the demo's training runs first, into a temporary folder)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEMO_SWEEP = """
import sys
from interpreto_anisotropy import CheckpointSweep
from interpreto_anisotropy.demo import load_corpus
toy, out = sys.argv[1], sys.argv[2]
fit = [text for text in load_corpus("fit", progress=False) if len(text) <= 600][:160]
probe = [text for text in load_corpus("probe", progress=False) if len(text) <= 600][:80]
CheckpointSweep(toy + "/checkpoint-*", split_point=1, texts=fit, probe_texts=probe, objective="causal_lm",
                nb_concepts=8, reference="both", n_controls=20, seed=0, results_dir=out, overwrite=True,
                progress=False).run()
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a command run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", help="the demo's checkpoint folder (runs/demo/toy); default: train it")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", default="1", help="torch threads of each run (OMP_NUM_THREADS)")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": args.threads, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    work = Path(tempfile.mkdtemp(prefix="cli_vs_demo_"))
    toy = args.checkpoints
    if toy is None:
        subprocess.run(
            [sys.executable, "-m", "interpreto_anisotropy.cli", "demo", "--out", str(work / "demo"), "--no-progress"],
            env=env,
            check=True,
            capture_output=True,
        )
        toy = str(work / "demo" / "toy")
    commands = {
        "demo's sweep": [sys.executable, "-c", DEMO_SWEEP, toy, str(work / "demo_sweep")],
        "CLI sweep, defaults": [
            *(sys.executable, "-m", "interpreto_anisotropy.cli", "sweep", "--model", toy, "--split-point", "1"),
            *("--out", str(work / "cli_sweep"), "--overwrite", "--no-progress"),
        ],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, command in commands.items():
            for folder in ("demo_sweep", "cli_sweep"):  # a sweep into its own finished folder would do nothing
                shutil.rmtree(work / folder, ignore_errors=True)
            times[name].append(timed(command, env))
    print(f"{'run':<22} {'wall s (each run)':<24} {'CPU s (each run)':<24}")
    for name, runs in times.items():
        walls = ", ".join(f"{wall:.1f}" for wall, _ in runs)
        cpus = ", ".join(f"{cpu:.1f}" for _, cpu in runs)
        print(f"{name:<22} {walls:<24} {cpus:<24}")
    demo, cli = (min(cpu for _, cpu in times[name]) for name in commands)
    print(f"CLI defaults / demo's sweep, best CPU time: {cli / demo:.2f}x")


if __name__ == "__main__":
    main()
