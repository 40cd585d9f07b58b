# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`interpreto-anisotropy --help` against `python -c "import torch"`: the help answers before torch is imported.

The command line imports torch, Interpreto and matplotlib inside its commands, and the package's names are imported
when first used, so `--help`, `sweep --help` and `--version` only parse arguments. This script runs each command in
its own process, alternately (so that all see the same machine load), and prints the median wall time of each and
its ratio to importing torch alone: below 1 means the help is faster than torch's import, which it used to pay.

Usage:
    python benchmarks/cli_help.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "interpreto-anisotropy --help": [sys.executable, "-m", "interpreto_anisotropy.cli", "--help"],
    "interpreto-anisotropy sweep --help": [sys.executable, "-m", "interpreto_anisotropy.cli", "sweep", "--help"],
    "interpreto-anisotropy --version": [sys.executable, "-m", "interpreto_anisotropy.cli", "--version"],
}


def timed(command: list[str]) -> float:
    """Wall seconds of a command run to completion."""
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache once
        timed(command)
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            seconds[name].append(timed(command))
    torch_import = statistics.median(seconds["import torch"])
    print(f"{'command':<36} {'median s':>9} {'/ import torch':>15}")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        print(f"{name:<36} {median:>9.3f} {median / torch_import:>15.2f}")


if __name__ == "__main__":
    main()
