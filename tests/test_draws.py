# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's draws: the per-row seed (stable, distinct per identity field) and the default R' that lets Holm pass."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from interpreto_anisotropy.sweeps.draws import default_n_random, floor_passes, row_seed, warn_if_cannot_pass
from interpreto_anisotropy.sweeps.multiple_testing import holm

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
    code = f"from interpreto_anisotropy.sweeps.draws import row_seed; print(row_seed(7, **{IDENTITY!r}))"
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
        UserWarning, match=r"n_random=20: .*1/21 = 0\.04762, not below alpha/m = 0\.05/16 = 0\.003125.*320"
    ):
        warn_if_cannot_pass(20, 16)
