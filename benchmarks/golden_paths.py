# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How far each golden quantity moves across summation orders of the same mathematics, in units of its tolerance.

Runs `tests/test_golden.py` once per path in a fresh process (ATen and MKL pick their kernels when they load),
each writing the values it computed (INTERPRETO_ANISOTROPY_GOLDEN_DUMP), then compares every path's values with
the committed golden files and with this machine's default path, by the rules of `tests/helpers/golden.py`. The
table gives, for each quantity, the largest difference over paths and records (relative to the rule's scale, in
radians for a basis, in grid steps for a rank p-value) and that difference as a fraction of its allowance (the
tests pass at <= 1). Runs in about three minutes.

Usage:
    python benchmarks/golden_paths.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.golden import (  # noqa: E402
    RULES,
    Close,
    RankCorrelation,
    RankPValue,
    SameSubspace,
    VectorClose,
    ZScore,
    ratios,
    run_golden_tests,
)  # noqa: E402

PATHS = {
    "default (1 thread)": {},
    "two threads": {"INTERPRETO_ANISOTROPY_TEST_THREADS": "2"},
    "ATen AVX2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "ATen and MKL AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ATen scalar kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL bitwise-compatible": {"MKL_CBWR": "COMPATIBLE"},
    "batches of 3": {"INTERPRETO_ANISOTROPY_GOLDEN_BATCH": "3"},
    "batches of 5": {"INTERPRETO_ANISOTROPY_GOLDEN_BATCH": "5"},
}


def _dump(env: dict[str, str], folder: Path) -> None:
    run_golden_tests({**env, "INTERPRETO_ANISOTROPY_GOLDEN_DUMP": str(folder)})


def _unit(rule) -> tuple[float, str]:
    """What one allowance is in the table's units: (size, unit)."""
    if isinstance(rule, SameSubspace):
        return rule.max_angle, "rad"
    if isinstance(rule, Close) and rule.rtol == 0:
        return rule.atol, "abs"
    if isinstance(rule, (Close, VectorClose, ZScore)):
        return rule.rtol, "rel"
    if isinstance(rule, RankCorrelation):
        return rule.swaps, "swaps"
    if isinstance(rule, RankPValue):
        return 1.0, "steps/ties"
    return 0.0, "exact"


def _worst(values: dict[str, dict], against: dict[str, dict]) -> dict[str, float]:
    """{quantity: largest ratio to its allowance} of `values` against `against`, over records and files."""
    worst: dict[str, float] = defaultdict(float)
    for name, expected in against.items():
        for where, ratio in ratios(values[name], expected, name):
            key = where.rsplit(".", 1)[-1].split(" ")[0]
            worst[key] = max(worst[key], ratio)
    return worst


def main() -> None:
    golden = {path.stem: json.loads(path.read_text()) for path in sorted((ROOT / "tests" / "golden").glob("*.json"))}
    with tempfile.TemporaryDirectory() as tmp:
        dumps = {}
        for label, env in PATHS.items():
            folder = Path(tmp) / str(len(dumps))
            _dump(env, folder)
            dumps[label] = {path.stem: json.loads(path.read_text()) for path in folder.glob("*.json")}
            print(f"ran {label}: {len(dumps[label])} files", flush=True)
    missing = [label for label, values in dumps.items() if values.keys() != golden.keys()]
    if missing:
        raise SystemExit(f"paths that did not write every golden file: {missing}")
    baseline = dumps["default (1 thread)"]
    against_files = defaultdict(float)
    across_paths = defaultdict(float)
    worst_path: dict[str, str] = {}
    for label, values in dumps.items():
        for key, ratio in _worst(values, golden).items():
            if ratio > against_files[key]:
                against_files[key], worst_path[key] = ratio, label
        for key, ratio in _worst(values, baseline).items():
            across_paths[key] = max(across_paths[key], ratio)
    print("\n| quantity | rule | vs committed files | vs this machine's default | share of allowance | path |")
    print("|---|---|---|---|---|---|")
    for key in sorted(against_files, key=lambda k: -against_files[k]):
        size, unit = _unit(RULES[key])
        if unit == "exact":
            status = "equal" if against_files[key] == 0 and across_paths[key] == 0 else "DIFFERS"
            print(f"| {key} | exact | {status} | | |")
            continue
        print(
            f"| {key} | {type(RULES[key]).__name__} {size:g} {unit} | {against_files[key] * size:.2g} "
            f"| {across_paths[key] * size:.2g} | {against_files[key]:.3f} | {worst_path[key]} |"
        )


if __name__ == "__main__":
    main()
