# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The sweep's time estimate: the time per checkpoint measured on the first one (an injected clock here), times the
checkpoints left; on a resume, the time the rows already computed took. The logic is tested, not the timing."""

from __future__ import annotations

import itertools
import math
import re

import pytest
from test_top_tokens import SETTINGS

import interpreto_anisotropy as ia
from interpreto_anisotropy.sweeps import runner as eta
from interpreto_anisotropy.sweeps.runner import CheckpointTimer, estimate_line, seconds_per_checkpoint_of_rows

_LINE = re.compile(
    r"about (?P<per>[\d.]+) s per checkpoint(?: \([^)]*\))?, (?P<left>[\d.]+) (?P<unit>min|s) for the "
    r"(?P<k>\d+) checkpoints? left"
)


def _parsed(line: str) -> tuple[float, float, int]:
    """(seconds per checkpoint, seconds left, checkpoints left) as the line says them."""
    match = _LINE.fullmatch(line)
    assert match, line
    left = float(match["left"]) * (60 if match["unit"] == "min" else 1)
    return float(match["per"]), left, int(match["k"])


@pytest.mark.parametrize(("first", "total"), [(7.25, 6), (95.0, 40), (0.4, 3), (3.0, 2)])
def test_the_estimate_is_the_first_checkpoints_time_times_the_checkpoints_left(first, total):
    clock = iter([100.0, 100.0 + first, 200.0, 300.0]).__next__
    timer = CheckpointTimer(total, clock=clock)
    timer.start_round()
    per, left, remaining = _parsed(timer.end_round(1))
    assert remaining == total - 1
    assert per == pytest.approx(first, abs=0.05 if first < 10 else 0.5)
    assert left == pytest.approx(first * remaining, abs=3 if left >= 60 else 0.5)  # said to 0.1 min or 1 s
    timer.start_round()
    assert timer.end_round(1) is None  # said once, after the first checkpoint


def test_with_a_checkpoint_per_rank_the_time_left_counts_rounds():
    timer = CheckpointTimer(9, per_round=4, clock=iter([0.0, 20.0]).__next__)
    timer.start_round()
    per, left, remaining = _parsed(timer.end_round(4))
    assert (per, left, remaining) == (5.0, 20.0 * math.ceil(5 / 4), 5)


def test_nothing_is_said_when_the_first_round_was_the_last():
    timer = CheckpointTimer(1, clock=iter([0.0, 3.0]).__next__)
    timer.start_round()
    assert timer.end_round(1) is None


def test_the_time_of_earlier_rows_is_their_per_checkpoint_sum_of_split_points():
    rows = [
        {"step": step, "layer": layer, "tangent": kind, "wall_seconds": seconds}
        for step, layer, seconds in [(0, 1, 2.0), (0, 2, 3.0), (5, 1, 4.0), (5, 2, 1.0)]
        for kind in ("early", "each")  # the tangent kinds of a split point share its time
    ]
    rows.append({"step": 9, "layer": 1, "tangent": "early", "skipped": "CheckpointError: truncated"})
    expected = ((2.0 + 3.0) + (4.0 + 1.0)) / 2
    assert seconds_per_checkpoint_of_rows(rows) == expected
    assert seconds_per_checkpoint_of_rows([]) is None
    assert _parsed(estimate_line(expected, 3, source="earlier rows"))[1] == pytest.approx(expected * 3, abs=0.5)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_sweep_says_what_it_will_do_then_the_estimate(toy_checkpoints, fit_texts, texts, tmp_path, monkeypatch):
    checkpoints = [c for c in ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*")) if c.step <= 4]
    seconds = itertools.count(0.0, 11.0)  # every round takes 11 s on this clock
    monkeypatch.setattr(eta, "_now", lambda: next(seconds))
    arguments = {"texts": fit_texts[:8], "probe_texts": texts[:6], **SETTINGS, "reference": "early"}
    sweep = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "sweep", **arguments)
    said = []
    sweep.announce = said.append
    sweep.run()
    n = len(checkpoints)
    assert said[0] == (
        f"{n} checkpoints to compute, after the reference tangent is fitted on {len(sweep.plan.early)} early "
        "checkpoints; the time per checkpoint is measured on the first one"
    )
    assert _parsed(said[1]) == (11.0, 11.0 * (n - 1), n - 1)
    assert len(said) == 2
    lines = (tmp_path / "sweep" / "rows.jsonl").read_text().splitlines()
    (tmp_path / "sweep" / "rows.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    table = ia.SweepResult.load(tmp_path / "sweep")
    said.clear()
    sweep.run()
    per, left, remaining = _parsed(said[0])
    assert remaining == 1 and "(the wall_seconds of the rows already computed)" in said[0]
    assert per == pytest.approx(seconds_per_checkpoint_of_rows(table.rows), abs=0.05)
