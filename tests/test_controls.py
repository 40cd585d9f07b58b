# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of matched-rank normal controls, the p-value and the analytic null, against explicit formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.tangents.controls import (
    analytic_null,
    largest_control_rank,
    normal_control_bases,
    normal_controls,
    p_value,
)
from interpreto_anisotropy.tangents.subspace import Subspace

FAST = settings(max_examples=25, deadline=None)


@pytest.fixture
def tangent() -> Subspace:
    return Subspace.random(64, 8, seed=11)


# --------------------------------------------------------------------------- controls
def test_controls_are_orthonormal_and_orthogonal_to_the_tangent(tangent):
    controls = normal_controls(tangent, n=20, seed=0)
    assert len(controls) == 20
    Q = tangent.basis.double()
    for control in controls:
        assert (control.dim, control.rank) == (64, 8)
        N = control.basis.double()
        assert (Q.T @ N).abs().max() < 1e-6
        assert (N.T @ N - torch.eye(8, dtype=torch.float64)).abs().max() < 1e-6


def test_controls_carry_metadata(tangent):
    tangent.split_point, tangent.step = "gpt_neox.layers.1", 7
    controls = normal_controls(tangent, n=3, seed=5)
    assert [c.name for c in controls] == ["control-0", "control-1", "control-2"]
    assert all(c.method == "normal_control" and c.split_point == "gpt_neox.layers.1" and c.step == 7 for c in controls)
    assert [c.info for c in controls] == [{"seed": 5, "index": i} for i in range(3)]
    assert all(c.basis.dtype == tangent.basis.dtype for c in controls)


def test_controls_are_deterministic_for_a_seed_and_differ_across_seeds(tangent):
    a = normal_control_bases(tangent, 5, seed=1)
    b = normal_control_bases(tangent, 5, seed=1)
    c = normal_control_bases(tangent, 5, seed=2)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    # The draws differ from one another too.
    assert Subspace(a[0]).overlap(Subspace(a[1])) < 0.9
    # normal_controls is the list view of normal_control_bases.
    assert all(torch.equal(s.basis, basis) for s, basis in zip(normal_controls(tangent, 5, seed=1), a, strict=True))


def test_controls_do_not_touch_the_global_rng(tangent):
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    normal_controls(tangent, 4, seed=9)
    assert torch.equal(torch.rand(2), expected)


def test_controls_follow_the_tangent_dtype():
    tangent = Subspace.random(20, 3, seed=0, dtype=torch.float64)
    bases = normal_control_bases(tangent, 4)
    assert bases.shape == (4, 20, 3) and bases.dtype == torch.float64
    assert (tangent.basis.T @ bases).abs().max() < 1e-12


@pytest.mark.parametrize(("d", "k"), [(11, 5), (13, 6), (10, 4), (64, 8)])
@pytest.mark.parametrize("seed", [0, 3])
def test_controls_of_a_random_tangent_with_the_same_seed_stay_orthogonal(d, k, seed):
    """Regression: controls drawn with the seed of `Subspace.random` must not reuse its Gaussian stream."""
    tangent = Subspace.random(d, k, seed=seed, dtype=torch.float64)
    bases = normal_control_bases(tangent, 3, seed=seed)
    assert (tangent.basis.T @ bases).abs().max() < 1e-12


def test_controls_are_uniform_in_the_complement():
    """Haar uniformity inside the complement: the mean control projector is k/(d-k) (I - Q Q^T)."""
    d, k, n = 12, 3, 3000
    tangent = Subspace.random(d, k, seed=0, dtype=torch.float64)
    bases = normal_control_bases(tangent, n, seed=0)
    mean_projector = torch.einsum("nik,njk->ij", bases, bases) / n
    expected = (k / (d - k)) * (torch.eye(d, dtype=torch.float64) - tangent.basis @ tangent.basis.T)
    assert (mean_projector - expected).abs().max() < 0.03


def test_half_dimensional_tangent_is_refused_since_its_only_control_is_the_complement():
    tangent = Subspace.random(10, 5, seed=0, dtype=torch.float64)
    with pytest.raises(InvalidInputError, match=r"nb_concepts=5.*R\^10.*nb_concepts <= 4"):
        normal_controls(tangent, 3, seed=0)


@pytest.mark.parametrize(("d", "k", "n"), [(10, 6, 5), (9, 5, 1), (10, 5, 2), (64, 8, 0), (64, 8, -1)])
def test_no_room_or_bad_count_raises(d, k, n):
    with pytest.raises(InvalidInputError):
        normal_controls(Subspace.random(d, k), n)


def test_no_room_error_says_what_to_do():
    with pytest.raises(InvalidInputError, match=r"nb_concepts=5.*R\^9.*nb_concepts <= 4"):
        normal_control_bases(Subspace.random(9, 5), 3)


@pytest.mark.parametrize(("d", "k", "largest"), [(32, 16, 15), (64, 32, 31), (9, 4, 4)])
def test_half_the_dimension_is_refused(d, k, largest):
    """2k = d: the complement holds one rank-k subspace, itself, so no control would be random; 2k = d - 1 is fine."""
    if 2 * k < d:
        assert normal_control_bases(Subspace.random(d, k), 2).shape == (2, d, k)
        return
    with pytest.raises(InvalidInputError, match=rf"nb_concepts={k}.*R\^{d}.*nb_concepts <= {largest}"):
        normal_control_bases(Subspace.random(d, k), 3)
    assert largest_control_rank(d) == largest


# --------------------------------------------------------------------------- p-value
@pytest.mark.parametrize(
    ("observed", "controls", "expected"),
    [
        (0.5, [0.1, 0.2, 0.6], 2 / 4),
        (0.9, [0.1] * 20, 1 / 21),  # the paper's smallest p-value with 20 controls
        (0.0, [0.1] * 20, 1.0),
        (0.3, [0.3, 0.3, 0.1], 3 / 4),  # ties count against the tangent
    ],
)
def test_p_value_examples(observed, controls, expected):
    assert p_value(observed, controls) == pytest.approx(expected)


@FAST
@given(
    observed=st.floats(0, 1),
    controls=st.lists(st.floats(0, 1), min_size=1, max_size=40),
)
def test_p_value_matches_the_formula(observed, controls):
    expected = (1 + sum(c >= observed for c in controls)) / (len(controls) + 1)
    value = p_value(observed, np.asarray(controls))
    assert value == pytest.approx(expected)
    assert 1 / (len(controls) + 1) <= value <= 1.0


@pytest.mark.parametrize(("observed", "controls"), [(0.5, []), (float("nan"), [0.1]), (0.5, [0.1, float("inf")])])
def test_p_value_rejects_bad_inputs(observed, controls):
    with pytest.raises(InvalidInputError):
        p_value(observed, controls)


# --------------------------------------------------------------------------- analytic null
@FAST
@given(energy=st.floats(0, 1), d=st.integers(2, 4096), data=st.data())
def test_analytic_null_matches_the_formula(energy, d, data):
    k = data.draw(st.integers(1, d - 1))
    assert analytic_null(energy, d, k) == pytest.approx((1 - energy) * k / (d - k))


@pytest.mark.parametrize(("energy", "d", "k"), [(0.5, 10, 0), (0.5, 10, 10), (-0.1, 10, 2), (1.5, 10, 2)])
def test_analytic_null_rejects_bad_inputs(energy, d, k):
    with pytest.raises(InvalidInputError):
        analytic_null(energy, d, k)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_control_energy_approaches_the_analytic_null(seed):
    """Monte-Carlo: on a fixed anisotropic G the average control energy share converges to (1 - E_T) k/(d - k)."""
    d, k, n_controls = 32, 4, 4000
    generator = torch.Generator().manual_seed(seed)
    scales = torch.logspace(0, -1.5, d, dtype=torch.float64)
    g = torch.randn(200, d, generator=generator, dtype=torch.float64) * scales  # strongly anisotropic gradients
    tangent = Subspace.random(d, k, seed=seed, dtype=torch.float64)
    e_tangent = tangent.energy_share(g)

    bases = normal_control_bases(tangent, n_controls, seed=seed + 100)
    total = g.pow(2).sum()
    shares = torch.einsum("nd,rdk->rnk", g, bases).pow(2).sum(dim=(1, 2)) / total  # (R,)
    # The batched computation is the same as the per-subspace one.
    assert shares[0].item() == pytest.approx(Subspace(bases[0]).energy_share(g), rel=1e-12)

    null = analytic_null(e_tangent, d, k)
    standard_error = shares.std().item() / n_controls**0.5
    assert abs(shares.mean().item() - null) < 4 * standard_error
    assert abs(shares.mean().item() - null) / null < 0.05
