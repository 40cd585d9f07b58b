# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Host synchronisations of each entry point on the emulated device, for 2 and 4 batches (docs/performance.md,
"Host synchronisations"). Not collected by `make test`; run it by name:

    PYTHONPATH=src python -m pytest -q -s -p no:cacheprovider tests/count_host_syncs.py
"""

from __future__ import annotations

from helpers.emulated_device import EMU, EmulatedDevice
from test_device_guard import OBJECTIVES, TRAINING, _mwsp, live_rows, probe_run

from interpreto_anisotropy.probing.probe import GradientProbe


def _count(mode: EmulatedDevice, run, *args, **kwargs) -> tuple[int, int]:
    """(reads caused by our package, all reads) of one call."""
    mode.syncs.clear()
    run(*args, **kwargs)
    return sum(mode.ours().values()), sum(mode.syncs.values())


def test_count_host_syncs(request, texts):
    lines = ["| entry point | 2 batches (ours, all) | 4 batches (ours, all) |", "|---|---|---|"]
    with EmulatedDevice() as mode:
        for objective, fixture in sorted(OBJECTIVES.items()):
            with mode.paused():
                mwsp = _mwsp(request.getfixturevalue(fixture), EMU)
            run = [_count(mode, probe_run, mwsp, texts[: 2 * n], objective, mode) for n in (2, 4)]
            lines.append(f"| `GradientProbe.run`, {objective} | {run[0]} | {run[1]} |")
            probe = GradientProbe(mwsp, objective=objective, batch_size=2, seed=0)
            run = [_count(mode, probe.gradients, texts[: 2 * n]) for n in (2, 4)]
            lines.append(f"| `GradientProbe.gradients`, {objective} | {run[0]} | {run[1]} |")
        for objective, fixture in sorted(TRAINING.items()):
            pair = request.getfixturevalue(fixture)
            run = {
                (steps, micro): _count(
                    mode, live_rows, pair, texts, EMU, n_steps=steps, n_micro=micro, objective=objective
                )
                for steps, micro in ((2, 2), (2, 4), (4, 2))
            }
            lines.append(
                f"| `TrainingProbe`, {objective}, 2 steps of 2 / 4 micro-batches | {run[2, 2]} | {run[2, 4]} |"
            )
            per_close = tuple((b - a) // 2 for a, b in zip(run[2, 2], run[4, 2], strict=True))
            lines.append(f"| `TrainingProbe`, {objective}, each window close (every=1) | {per_close} | {per_close} |")
    print("\n" + "\n".join(lines))
