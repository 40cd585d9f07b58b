# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How far each tolerance comparison of the tests is from failing, under several thread counts and matmul precisions.

Runs the chosen tests once per configuration (1, 2 and 4 torch threads, OMP_NUM_THREADS and MKL_NUM_THREADS alike;
float32 matmul precision "highest" and "high"), each in its own pytest process with tests/helpers/margins_plugin.py,
which records every comparison's worst error as a fraction of its tolerance. The environment is otherwise the
caller's (CI's): OPENBLAS_* and the like are left as they are. Writes a markdown report: per comparison (call site
and test) its margin = tolerance / worst error over all configurations, the 10 smallest first; a margin under 10
is flagged.

Usage:
    python benchmarks/margins/test_margins.py [--threads 1 2 4] [--precisions highest high] [--out FILE.md] [-- PYTEST ARGS]

Without pytest arguments it runs the test files that call a tolerance comparison, without the slow-marked tests
(`default_selection`). `make test-margins` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
COMPARISONS = re.compile(r"assert_close|assert_allclose|allclose\(|isclose\(|approx\(|assert_same_window|_close\(")
WANTED = 10.0


def default_selection() -> list[str]:
    """The test files that call a tolerance comparison (directly or through a helper), slow tests left out."""
    files = sorted(p for p in TESTS.glob("test_*.py") if COMPARISONS.search(p.read_text()))
    return [str(p.relative_to(ROOT)) for p in files] + ["-m", "not slow"]


def run_configuration(threads: int, precision: str, pytest_args: list[str], out: Path) -> dict:
    """One pytest process under `threads` and `precision`; its margins (JSON) and outcome."""
    env = {
        **os.environ,
        "INTERPRETO_ANISOTROPY_TEST_THREADS": str(threads),
        "INTERPRETO_ANISOTROPY_TEST_MATMUL_PRECISION": precision,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "helpers.margins_plugin"]
    command += ["--margins-out", str(out), "--matmul-precision", precision, *pytest_args]
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = (completed.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"threads={threads} precision={precision}: {summary} ({seconds:.0f} s)", flush=True)
    if completed.returncode not in (0, 1):
        print(completed.stdout[-3000:], completed.stderr[-3000:], file=sys.stderr)
    records = json.loads(out.read_text()) if out.exists() else []
    failed = re.findall(r"^FAILED (\S+)", completed.stdout, flags=re.M)
    return {"threads": threads, "precision": precision, "records": records, "summary": summary,
            "seconds": seconds, "failed": failed}  # fmt: skip


def worst_per_comparison(runs: list[dict]) -> list[dict]:
    """Each call site and field: its worst fraction over the tests and configurations, with the test and
    configuration that gave it and the number of tests that reached it."""
    worst: dict[tuple, dict] = {}
    tests: dict[tuple, set] = {}
    for run in runs:
        for record in run["records"]:
            site = (record["site"], record.get("field", ""))
            tests.setdefault(site, set()).add(record["test"])
            if site not in worst or record["fraction"] > worst[site]["fraction"]:
                worst[site] = {**record, "config": f"{run['threads']} thr, {run['precision']}"}
    for site, record in worst.items():
        record["n_tests"] = len(tests[site])
    return sorted(worst.values(), key=lambda r: -r["fraction"])


def margin(fraction: float) -> str:
    return "exact" if fraction == 0 else f"{1 / fraction:.3g}"


def report(runs: list[dict], pytest_args: list[str], smallest: int = 10) -> str:
    """The markdown report: what ran, each configuration's outcome, the smallest margins."""
    rows = worst_per_comparison(runs)
    lines = [
        f"Tests: `pytest {' '.join(pytest_args)}`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; python {platform.python_version()}",
        "",
        "| threads | matmul precision | outcome | seconds |",
        "|---|---|---|---|",
        *(f"| {r['threads']} | {r['precision']} | {r['summary']} | {r['seconds']:.0f} |" for r in runs),
        "",
        f"{len(rows)} call sites and fields; {sum(1 / r['fraction'] < WANTED for r in rows if r['fraction'])}"
        f" with a margin under {WANTED:g}. The {smallest} smallest margins (tolerance / worst error):",
        "",
        "| margin | call site | field | worst in (of n tests) | comparison | tolerance | worst under |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows[:smallest]:
        lines.append(
            f"| {margin(r['fraction'])} | {r['site']} | {r.get('field', '')} | {r['test']} ({r['n_tests']}) | {r['kind']} "
            f"| {r.get('tolerance', '')} "
            f"| {r['config']} |"
        )
    failed = sorted({f"{name} ({r['threads']} thr, {r['precision']})" for r in runs for name in r["failed"]})
    if failed:
        lines += ["", "Failed: " + ", ".join(failed)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--precisions", nargs="+", default=["highest", "high"])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "test_margins.md")
    parser.add_argument("--json", type=Path, default=None, help="also keep every configuration's records here")
    parser.add_argument("pytest_args", nargs="*", help="after --: the tests to run (default: default_selection())")
    args = parser.parse_args()
    pytest_args = args.pytest_args or default_selection()
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for threads in args.threads:
            for precision in args.precisions:
                out = Path(scratch) / f"{threads}-{precision}.json"
                runs.append(run_configuration(threads, precision, pytest_args, out))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(runs, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(runs, pytest_args))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
