# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A refactor's cost and its numbers: two source trees, alternated in one run, each in fresh processes.

For each tree, in turn (before, after, before, after, ...): the demo (`interpreto-anisotropy demo`: toy training with
the live probe, a 16-checkpoint sweep, the report), timed from outside, and the probe's ratio to its floor (the
per-batch `probe.run` time over a plain training forward+backward, `benchmarks/probe_overhead.py` of that tree). Then
the numbers: every row the two trees' demos wrote (the sweep's and the live probe's `rows.jsonl`) is compared field
by field, timings and paths aside, and must be equal.

Usage:
    python benchmarks/before_after.py BEFORE_TREE AFTER_TREE [--repeats 2] [--shape cpu-tiny] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNSTABLE = {"wall_seconds", "source", "fingerprint", "created", "written_at", "elapsed_seconds"}


def run_demo(tree: Path, out: Path) -> float:
    """Wall seconds of the tree's demo, written to `out`."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "interpreto_anisotropy.cli", "demo", "--out", str(out)],
        check=True,
        env=env,
        cwd=out.parent,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def probe_ratio(tree: Path, shape: str) -> float:
    """The tree's probe.run per batch over a plain training step (`probe_overhead.py`)."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree / 'benchmarks'}", "HF_HUB_OFFLINE": "1"}
    text = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "probe_overhead.py"), "--shape", shape, "--skip-interpreto"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    return float(re.search(r"per batch over \d+ batches\s*\|\s*[\d.]+\s*\|\s*([\d.]+)", text).group(1))


def rows_of(results: Path) -> dict[str, list[dict]]:
    """{rows file relative to the demo folder: its rows without timings and paths}."""
    found = {}
    for path in sorted(results.rglob("rows.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        found[str(path.relative_to(results))] = [strip(row) for row in rows]
    return found


def strip(value):
    """The value without the keys that hold timings, paths or dates."""
    if isinstance(value, dict):
        return {key: strip(item) for key, item in value.items() if key not in UNSTABLE}
    if isinstance(value, list):
        return [strip(item) for item in value]
    return value


def differences(before, after, path="") -> list[str]:
    """Where two JSON values differ (the first 20)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = [f"{path}.{key}: only in one" for key in sorted(set(before) ^ set(after))]
        for key in sorted(set(before) & set(after)):
            found += differences(before[key], after[key], f"{path}.{key}")
        return found[:20]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            found
            for index, pair in enumerate(zip(before, after, strict=True))
            for found in differences(*pair, f"{path}[{index}]")
        ][:20]
    return [] if before == after else [f"{path}: {str(before)[:60]} != {str(after)[:60]}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--shape", default="cpu-tiny")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="before_after_"))
    out.mkdir(parents=True, exist_ok=True)
    times = {"before": [], "after": []}
    ratios = {"before": [], "after": []}
    for repeat in range(args.repeats):
        for label, tree in (("before", args.before), ("after", args.after)):
            folder = out / f"{label}-{repeat}"
            times[label].append(run_demo(tree.resolve(), folder))
            ratios[label].append(probe_ratio(tree.resolve(), args.shape))
            print(f"{label} #{repeat}: demo {times[label][-1]:.1f} s, probe ratio {ratios[label][-1]:.2f}", flush=True)
    before_rows, after_rows = rows_of(out / "before-0"), rows_of(out / "after-0")
    found = differences(before_rows, after_rows)
    print("| tree | demo wall s (each run) | median | probe / training step (each run) | median |")
    print("|---|---|---|---|---|")
    for label in ("before", "after"):
        print(
            f"| {label} | {', '.join(f'{t:.1f}' for t in times[label])} | {statistics.median(times[label]):.1f} "
            f"| {', '.join(f'{r:.2f}' for r in ratios[label])} | {statistics.median(ratios[label]):.2f} |"
        )
    count = sum(len(rows) for rows in before_rows.values())
    print(f"rows compared: {count} in {len(before_rows)} files; differences: {len(found)}")
    for line in found:
        print("  ", line)
    sys.exit(1 if found or set(before_rows) != set(after_rows) else 0)


if __name__ == "__main__":
    main()
