# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The demo's sweep under several versions of the package, alternated in one run: wall and CPU time, and ratios.

`interpreto-anisotropy demo` sweeps its 16 toy checkpoints (k = 8, 20 controls, reference "both", 160 fit and 80
probe docstrings); 9 of them are early checkpoints, read for the reference tangent and again for their own rows.
Each version is a source folder (a worktree of the repository at some commit, e.g. `git worktree add --detach
/tmp/before main`) put first on PYTHONPATH of its own process. The runs go round robin (so that every version sees
the same machine load), each into a fresh results folder, and each process times the sweep alone (`run()`, not the
imports or the corpus). CPU time (user + system of the process) is less disturbed by other jobs than wall time.
The rows of every version are compared with the first's (every field but the timings): a speed-up that changes a
number is not one.

Usage:
    python benchmarks/sweep_read_once.py --checkpoints runs/demo/toy \\
        --version before=/tmp/before/src --version after=src [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEMO_SWEEP = """
import json, resource, sys, time
from interpreto_anisotropy import CheckpointSweep
from interpreto_anisotropy.demo import load_corpus
toy, out = sys.argv[1], sys.argv[2]
fit = [text for text in load_corpus("fit", progress=False) if len(text) <= 600][:160]
probe = [text for text in load_corpus("probe", progress=False) if len(text) <= 600][:80]
sweep = CheckpointSweep(toy + "/checkpoint-*", split_point=1, texts=fit, probe_texts=probe, objective="causal_lm",
                        nb_concepts=8, reference="both", n_controls=20, seed=0, results_dir=out, overwrite=True,
                        progress=False)
before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
sweep.run()
wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"wall": wall, "cpu": cpu}))
"""

TIMINGS = {"wall_seconds", "download_seconds"}


def rows(folder: Path) -> dict[tuple, dict]:
    """The rows of a results folder by (step, split point, tangent), without their timings."""
    table = {}
    for line in (folder / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        table[(row["step"], row["layer"], row["tangent"])] = {k: v for k, v in row.items() if k not in TIMINGS}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", required=True, help="the demo's checkpoint folder (runs/demo/toy)")
    parser.add_argument("--version", action="append", required=True, help="NAME=SRC, the first is the baseline")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1", help="torch threads of each run (OMP_NUM_THREADS)")
    args = parser.parse_args()
    versions = dict(entry.split("=", 1) for entry in args.version)
    work = Path(tempfile.mkdtemp(prefix="sweep_read_once_"))
    env = {**os.environ, "OMP_NUM_THREADS": args.threads, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    times: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    for _ in range(args.repeats):
        for name, src in versions.items():
            out = work / name
            shutil.rmtree(out, ignore_errors=True)
            run_env = {**env, "PYTHONPATH": str(Path(src).resolve())}
            done = subprocess.run(
                [sys.executable, "-c", DEMO_SWEEP, args.checkpoints, str(out)],
                env=run_env,
                check=True,
                capture_output=True,
                text=True,
            )
            times[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    baseline = next(iter(versions))
    expected = rows(work / baseline)
    print(f"{'version':<16} {'wall s (each run)':<26} {'CPU s (each run)':<26} {'wall ratio':>10} {'CPU ratio':>10}")
    best = {name: (min(t["wall"] for t in runs), min(t["cpu"] for t in runs)) for name, runs in times.items()}
    for name, runs in times.items():
        walls = ", ".join(f"{t['wall']:.1f}" for t in runs)
        cpus = ", ".join(f"{t['cpu']:.1f}" for t in runs)
        wall_ratio, cpu_ratio = (best[name][i] / best[baseline][i] for i in (0, 1))
        print(f"{name:<16} {walls:<26} {cpus:<26} {wall_ratio:>9.2f}x {cpu_ratio:>9.2f}x")
        if rows(work / name) != expected:
            print(f"  !! the rows of {name} differ from those of {baseline}")
    print(f"ratios: best of {args.repeats} runs each, against {baseline}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
