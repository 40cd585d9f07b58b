# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's draws: the per-row seed (stable, distinct per identity field) and the default R' that lets Holm pass."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import interpreto_anisotropy as ia
from interpreto_anisotropy.results import verdict as draws
from interpreto_anisotropy.results.verdict import (
    Family,
    adjust,
    default_n_random,
    floor_passes,
    holm,
    row_seed,
    warn_if_cannot_pass,
)
from interpreto_anisotropy.sweeps.checkpoints import Checkpoint
from interpreto_anisotropy.sweeps.resume import ResultsDirCheck, merge_configs

IDENTITY = {"step": 100, "split_point": "gpt_neox.layers.1", "kind": "early"}


def test_the_row_seed_is_the_sha256_of_the_identity():
    expected = hashlib.sha256(json.dumps([7, 100, "gpt_neox.layers.1", "early"]).encode()).digest()
    assert row_seed(7, **IDENTITY) == int.from_bytes(expected[:4], "big")


@pytest.mark.parametrize("field", ["seed", "step", "split_point", "kind"])
def test_every_identity_field_changes_the_seed(field):
    base = row_seed(7, **IDENTITY)
    other = {"seed": 8, "step": 101, "split_point": "gpt_neox.layers.2", "kind": "each"}[field]
    changed = row_seed(other, **IDENTITY) if field == "seed" else row_seed(7, **{**IDENTITY, field: other})
    assert changed != base


def test_the_row_seed_is_the_same_in_another_process_with_another_hash_salt():
    code = f"from interpreto_anisotropy.results.verdict import row_seed; print(row_seed(7, **{IDENTITY!r}))"
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    output = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    assert int(output.stdout) == row_seed(7, **IDENTITY)


@pytest.mark.parametrize("n_controls", [1, 20, 500])
def test_the_default_n_random_is_the_smallest_that_passes(n_controls):
    level = Fraction(1, 20)
    for family_size in range(1, 120):
        # Independently: the smallest integer R' >= R with 1 / (R' + 1) < level / m, in exact rationals.
        expected = n_controls
        while not Fraction(1, expected + 1) < level / family_size:
            expected += 1
        assert default_n_random(family_size, n_controls=n_controls) == expected, family_size
        assert floor_passes(expected, family_size) and (
            expected == n_controls or not floor_passes(expected - 1, family_size)
        )


def test_holm_passes_at_the_floor_with_the_default_and_not_with_twenty():
    """Every row of a 16-row curve at the floor: Holm's adjusted p-values pass with the default R', not with 20."""
    for n_random, passes in ((default_n_random(16, n_controls=20), True), (20, False)):
        adjusted = holm(np.full(16, 1 / (n_random + 1)))
        assert bool(np.all(adjusted <= 0.05)) is passes, n_random


def test_an_explicit_n_random_that_cannot_pass_is_warned_about():
    with pytest.warns(
        ia.errors.DegenerateStatisticsWarning,
        match=r"n_random=20.*1/21 = 0\.04762.*0\.05/16 = 0\.003125.*n_random=320",
    ):
        warn_if_cannot_pass(20, 16)


def _rows(split_points: int, kinds: int, checkpoints: int) -> list[dict]:
    """One row per (split point, tangent kind, checkpoint), every p-value a placeholder."""
    names = ("early", "each")[:kinds]
    return [
        {"split_point": f"layers.{s}", "tangent": kind, "step": step, "p_value_exact": 0.5}
        for s in range(split_points)
        for kind in names
        for step in range(checkpoints)
    ]


@pytest.mark.parametrize("family", [member.value for member in Family])
@pytest.mark.parametrize(("split_points", "kinds", "checkpoints"), [(3, 1, 16), (2, 2, 5), (1, 2, 7)])
def test_the_family_size_is_the_largest_family_the_verdict_adjusts_over(family, split_points, kinds, checkpoints):
    """Recomputed another way: the rows of the largest group `verdict.Family` makes of such a sweep."""
    rows = _rows(split_points, kinds, checkpoints)
    members = Family(family).key
    largest = max(sum(members(other) == members(row) for other in rows) for row in rows)
    assert draws.family_size(family, checkpoints=checkpoints, split_points=split_points, kinds=kinds) == largest


@pytest.mark.parametrize(("correction", "level"), [("holm", 0.05), ("holm", 0.01), ("bh", 0.05)])
def test_with_family_all_over_3_split_points_and_16_checkpoints_the_default_r_prime_lets_the_correction_pass(
    correction, level
):
    """Every row at the floor 1/(R'+1): the correction over the 48 rows passes with the family's default R', and the
    curve-sized one (sized on 16 checkpoints, as before) leaves even the smallest p above level / 48 (Holm)."""
    rows = _rows(3, 1, 16)
    size = draws.family_size("all", checkpoints=16, split_points=3, kinds=1)
    n_random = default_n_random(size, n_controls=20, level=level)
    assert (size, n_random) == (48, math.floor(Fraction(48) / Fraction(str(level))))  # 1/(R'+1) < level/48
    at_floor = [{**row, "p_value_exact": 1 / (n_random + 1)} for row in rows]
    adjusted = adjust(at_floor, column="p_value_exact", correction=correction, family="all")
    assert max(adjusted) <= level and min(adjusted) <= level
    curve_sized = default_n_random(16, n_controls=20, level=level)
    smallest = adjust(
        [{**row, "p_value_exact": 1 / (curve_sized + 1) if i == 0 else 1.0} for i, row in enumerate(rows)],
        column="p_value_exact",
        correction=correction,
        family="all",
    )[0]
    assert smallest > level  # a single row at the curve-sized floor cannot pass over the family


def test_the_sweep_config_s_family_and_level_size_the_default_r_prime_of_a_run_and_of_its_results_directory(
    tmp_path,
):
    """SweepConfig(family="all") over 3 split points x 16 checkpoints: R' = 960 when the sweep is built and when its
    results directory is checked (which counts the stored split points and tangent kinds); config.json keeps the
    family, correction and level, and a resume may declare others."""
    checkpoints = [Checkpoint(step, f"/nowhere/checkpoint-{step}") for step in range(16)]
    options = {"split_point": [0, 1, 2], "texts": ["a b", "c d"], "device": "cpu", "progress": False}

    def resolved(folder, **declared):
        sweep = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / folder, **options, **declared)
        check = ResultsDirCheck(sweep)
        with check.held() as n_random:
            return sweep._n_random, n_random, json.loads((tmp_path / folder / "config.json").read_text())

    assert resolved("curve")[:2] == (default_n_random(16, n_controls=20),) * 2 == (320, 320)
    built, checked, config = resolved("all", family="all")
    assert built == checked == default_n_random(48, n_controls=20) == 960 and config["family"] == "all"
    built, checked, config = resolved("strict", family="all", correction="bh", level=0.01, reference="both")
    assert built == checked == default_n_random(96, n_controls=20, level=0.01) == 9600
    assert (config["correction"], config["level"]) == ("bh", 0.01)
    assert "family" not in resolved("all")[2]  # a resume declaring the default family: config.json says so


def test_a_resume_may_judge_the_rows_otherwise_but_not_compute_them_otherwise():
    stored = {
        "checkpoints": [{"step": 0, "source": "a", "revision": None}],
        "split_points": [1],
        "reference": "early",
        "given_reference": None,
        "early_steps": [0],
        "early_fraction": 0.3,
        "seed": 0,
        "family": "all",
    }
    merged = merge_configs(stored, {**stored, "family": "tangent", "level": 0.01}, where="sweep")
    assert (merged["family"], merged["level"]) == ("tangent", 0.01)
    assert "family" not in merge_configs(stored, {k: v for k, v in stored.items() if k != "family"}, where="sweep")
    with pytest.raises(ia.errors.InvalidInputError, match="seed"):
        merge_configs(stored, {**stored, "seed": 1}, where="sweep")


def test_bad_family_correction_or_level_are_our_errors_naming_the_option(tmp_path):
    for name, value, words in (
        ("family", "curve", "'split_point_and_tangent'.*'all'"),
        ("correction", "bonferroni", "'holm'.*'bh'"),
        ("level", 1.0, r"\(0, 1\)"),
        ("level", 0, r"\(0, 1\)"),
    ):
        with pytest.raises(ia.errors.InvalidInputError, match=rf"{name}.*{words}"):
            ia.SweepConfig(split_point=1, results_dir=tmp_path, **{name: value})
