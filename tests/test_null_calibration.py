# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The exact p-values under the null, through the probe on a model, and the anisotropy share's by a loop.

Null: the tangent is a uniformly random k-subspace of R^d, independent of the gradients. Then `p_value_exact` and
`anisotropy_p_value_exact` (each the rank of the tangent's statistic among the same statistic of R' uniformly random
k-subspaces) are uniform on the grid j / (R' + 1). The model's gradients are computed once (`GradientProbe.gradients`)
and scored for each random tangent through the probe's own statistics (`sums_from_gradients` + `build_results`),
each tangent with its own seed, hence its own random subspaces: the outcomes are independent.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import DegenerateStatisticsWarning, InvalidInputError
from interpreto_anisotropy.live.options import LiveTangent
from interpreto_anisotropy.live.point import TangentSchedule
from interpreto_anisotropy.probing.anisotropy import IsoScoreSettings
from interpreto_anisotropy.probing.objectives import make_objective
from interpreto_anisotropy.probing.probe import GradientProbe
from interpreto_anisotropy.probing.statistics import SubspaceColumns, build_results, sums_from_gradients
from interpreto_anisotropy.tangents.controls import NORMAL_CONTROL_NULL_RATES
from interpreto_anisotropy.tangents.subspace import Subspace

pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")

OBJECTIVE = make_objective("causal_lm")
N_TANGENTS = 400
N_RANDOM = 19  # p-values on the grid j / 20: alpha = 0.05 and 0.1 are attainable exactly


def _scored(gradients, sequence_ids, tangent: Subspace, seed: int, isoscore=None) -> ia.ProbeResult:
    """The probe's result for `tangent` from gradients in hand (one normal control: only the exact p-values count)."""
    columns = SubspaceColumns.draw({"tangent": tangent}, n_controls=1, n_random=N_RANDOM, seed=seed)
    sums = sums_from_gradients(gradients, sequence_ids, columns)
    return build_results(sums, columns, seed, 1, 0.95, OBJECTIVE, None, isoscore)["tangent"]


@pytest.fixture(scope="module")
def model_gradients(gpt_neox_mwsp, texts):
    """The toy GPT-NeoX's per-token loss gradients at its split point (d = 64), computed once."""
    raw = GradientProbe(gpt_neox_mwsp, objective="causal_lm").gradients(texts)
    assert raw.gradients.shape[1] == 64
    return raw.gradients, raw.sequence_ids


def test_the_run_path_equals_the_gradients_path(gpt_neox_mwsp, texts, model_gradients):
    """`GradientProbe.run` and `sums_from_gradients` + `build_results` give the same exact p-values."""
    gradients, sequence_ids = model_gradients
    probe = GradientProbe(gpt_neox_mwsp, objective="causal_lm")
    for index in range(2):
        tangent = Subspace.random(64, 8, seed=5000 + index)
        run = probe.run(texts, tangent, n_controls=1, n_random=N_RANDOM, seed=index, n_bootstrap=1, progress=False)
        here = _scored(gradients, sequence_ids, tangent, index)
        np.testing.assert_allclose(run.random_energy_shares, here.random_energy_shares, rtol=1e-5)
        np.testing.assert_allclose(run.delta_isoscore_star_random, here.delta_isoscore_star_random, atol=1e-6)
        assert run.p_value_exact == here.p_value_exact
        assert run.anisotropy_p_value_exact == here.anisotropy_p_value_exact


@pytest.mark.parametrize("k", [8, 16])
def test_exact_p_values_are_calibrated_through_the_probe(model_gradients, k):
    """Over 400 random tangents, P(p <= alpha) lies in the binomial 99 % band of alpha, for both exact p-values.

    About 6 s per rank on one CPU thread (the gradients are the module fixture's).
    """
    gradients, sequence_ids = model_gradients
    results = [
        _scored(gradients, sequence_ids, Subspace.random(64, k, seed=10_000 + index), index)
        for index in range(N_TANGENTS)
    ]
    for column in ("p_value_exact", "anisotropy_p_value_exact"):
        p_values = np.array([getattr(result, column) for result in results])
        for alpha in (0.05, 0.1):
            low, high = scipy.stats.binom.interval(0.99, N_TANGENTS, alpha)
            count = np.count_nonzero(p_values <= alpha + 1e-12)
            assert low <= count <= high, (column, alpha, count, (low, high))


def _points_without(gradients: np.ndarray, basis: np.ndarray, convention: str) -> np.ndarray:
    """G with the subspace removed: coordinates in its complement, or G (I - Q Q^T) in R^d."""
    if convention == "complement":
        return gradients @ scipy.linalg.null_space(basis.T)
    return gradients - gradients @ basis @ basis.T


@pytest.mark.parametrize("convention", ["complement", "ambient"])
def test_anisotropy_p_value_exact_equals_a_loop_with_the_isoscore_package(convention):
    """Delta IsoScore* of the tangent and of each random subspace by the `isoscore` package, one subspace at a time."""
    reference = pytest.importorskip("IsoScore.IsoScore")
    d, k, zeta, seed = 20, 4, 0.2, 3
    generator = torch.Generator().manual_seed(0)
    scales = torch.arange(1, d + 1, dtype=torch.float64) ** -0.5
    gradients = torch.randn(120, d, generator=generator, dtype=torch.float64) * scales
    tangent = Subspace.random(d, k, seed=7, dtype=torch.float64)
    settings = IsoScoreSettings.make(convention=convention, zeta=zeta)
    result = _scored(gradients, torch.arange(120) // 10, tangent, seed, settings)

    G = gradients.numpy()

    def isoscore_star(points: np.ndarray) -> float:  # toward the scaled identity of the points' own space
        target = np.trace(np.cov(points.T)) / points.shape[1] * np.eye(points.shape[1])
        return float(reference.IsoScore_star(points, target, zeta))

    whole = isoscore_star(G)
    delta_tangent = isoscore_star(_points_without(G, tangent.basis.numpy(), convention)) - whole
    randoms = ia.controls.random_subspace_bases(d, k, N_RANDOM, seed=seed, dtype=torch.float64).numpy()
    delta_random = np.array([isoscore_star(_points_without(G, basis, convention)) - whole for basis in randoms])
    assert result.delta_isoscore_star == pytest.approx(delta_tangent, abs=1e-6)
    np.testing.assert_allclose(result.delta_isoscore_star_random, delta_random, atol=1e-6)
    assert result.anisotropy_p_value_exact == (1 + np.count_nonzero(delta_random >= delta_tangent)) / (N_RANDOM + 1)
    assert 0 < np.count_nonzero(delta_random >= delta_tangent) < N_RANDOM  # a rank that is neither extreme


def test_the_tangent_that_holds_the_anisotropy_gets_the_smallest_anisotropy_p_value():
    d, k = 32, 4
    generator = torch.Generator().manual_seed(1)
    gradients = torch.randn(400, d, generator=generator, dtype=torch.float64) * (torch.arange(1, d + 1) ** -1.0)
    top = Subspace(torch.eye(d, dtype=torch.float64)[:, :k])  # the k directions of largest variance
    result = _scored(gradients, torch.arange(400) // 10, top, 0)
    assert result.anisotropy_p_value_exact == pytest.approx(1 / (N_RANDOM + 1))


def test_half_the_dimension_is_refused_by_the_probe(gpt_neox_mwsp, texts):
    with pytest.raises(InvalidInputError, match=r"nb_concepts=32.*R\^64.*nb_concepts <= 31"):
        GradientProbe(gpt_neox_mwsp).run(texts[:2], Subspace.random(64, 32), progress=False)


def test_half_the_dimension_is_refused_at_a_live_probes_first_micro_batch():
    schedule = TangentSchedule(LiveTangent.EARLY, "gpt_neox.layers.1", nb_concepts=32, n_controls=2, seed=0)
    with pytest.raises(InvalidInputError, match=r"nb_concepts=32.*R\^64.*nb_concepts <= 31"):
        schedule.start(64, torch.device("cpu"))


@pytest.mark.filterwarnings("default::interpreto_anisotropy.errors.DegenerateStatisticsWarning")
def test_a_rank_with_anti_conservative_normal_controls_warns_with_the_measured_rate():
    gradients = torch.randn(200, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    rate = dict(NORMAL_CONTROL_NULL_RATES)[1 / 4]
    with pytest.warns(DegenerateStatisticsWarning, match=rf"16/64.*{rate:.1f} %.*0\.250"):
        _scored(gradients, torch.arange(200) // 10, Subspace.random(64, 16, seed=0), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateStatisticsWarning)
        _scored(gradients, torch.arange(200) // 10, Subspace.random(64, 4, seed=0), 0)  # k/d = 1/16: no warning


def test_exact_p_values_are_calibrated_at_a_large_r_prime():
    """R' = 1999 random subspaces a tangent (the chunked path, several chunks), 300 null tangents at d = 16, k = 2."""
    d, k, n_tangents, n_random = 16, 2, 300, 1999
    generator = torch.Generator().manual_seed(5)
    gradients = torch.randn(400, d, generator=generator, dtype=torch.float64) * torch.arange(1, d + 1) ** -0.8
    p_values, anisotropy = [], []
    for index in range(n_tangents):
        tangent = Subspace.random(d, k, seed=1000 + index)
        columns = SubspaceColumns.draw({"t": tangent}, n_controls=1, n_random=n_random, seed=index)
        result = build_results(
            sums_from_gradients(gradients, torch.arange(400) // 10, columns), columns, 0, 1, 0.9, OBJECTIVE, None
        )["t"]
        p_values.append(result.p_value_exact)
        anisotropy.append(result.anisotropy_p_value_exact)
    for values in (np.array(p_values), np.array(anisotropy)):
        assert len(np.unique(values)) > 100  # a fine grid, 1 / 2000
        for alpha in (0.05, 0.25):
            low, high = scipy.stats.binom.interval(0.99, n_tangents, alpha)
            assert low <= np.count_nonzero(values <= alpha + 1e-12) <= high, alpha
