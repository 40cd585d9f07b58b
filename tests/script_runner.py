# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Run several Python scripts one after the other in this one process, as ``python SCRIPT ARGS`` would.

Used by ``tests/test_tutorials_examples.py``: the tutorials and the examples' offline modes all import torch,
transformers and Interpreto, which takes 10 to 20 s on a busy 2-core machine; running them in one process pays
that once instead of once a script. Each script still runs as ``__main__`` with its own ``sys.argv``, working
directory, captured output and time limit (SIGALRM), and ``sys.exit(0)`` counts as success.

Usage: ``python tests/script_runner.py SPEC.json RESULTS.json``, where SPEC.json is a list of
``{"name", "path", "args", "cwd", "timeout"}`` objects. RESULTS.json is rewritten after each script with
``{name: {"ok", "seconds", "error", "output"}}``, so a run killed from outside still reports what finished.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path

OUTPUT_TAIL = 6000


class ScriptTimeout(Exception):
    """A script ran past its time limit."""


def _alarm(signum, frame):  # noqa: ARG001
    raise ScriptTimeout("the script ran past its time limit")


def run_one(spec: dict) -> dict:
    """Run one script as ``__main__``; return whether it succeeded, its wall time, error and output tail."""
    buffer = io.StringIO()
    argv, cwd = sys.argv, os.getcwd()
    error = None
    start = time.perf_counter()
    Path(spec["cwd"]).mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(spec.get("timeout", 300)))
    try:
        os.chdir(spec["cwd"])
        sys.argv = [spec["path"], *spec.get("args", [])]
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            runpy.run_path(spec["path"], run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            error = f"SystemExit({exit_.code!r})"
    except BaseException:  # noqa: BLE001  (report every failure, timeouts included)
        error = traceback.format_exc()
    finally:
        signal.alarm(0)
        sys.argv = argv
        os.chdir(cwd)
    seconds = time.perf_counter() - start
    with contextlib.suppress(Exception):
        import matplotlib.pyplot as plt

        plt.close("all")
    return {"ok": error is None, "seconds": seconds, "error": error, "output": buffer.getvalue()[-OUTPUT_TAIL:]}


def main(spec_path: str, results_path: str) -> int:
    """Run every script of the spec, writing the results after each one. Returns 0."""
    specs = json.loads(Path(spec_path).read_text())
    results: dict[str, dict] = {}
    target = Path(results_path)
    for spec in specs:
        results[spec["name"]] = run_one(spec)
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(json.dumps(results, indent=1))
        temporary.replace(target)
        status = "ok" if results[spec["name"]]["ok"] else "FAILED"
        print(f"{spec['name']}: {status} in {results[spec['name']]['seconds']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
