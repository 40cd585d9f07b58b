# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The probe's statistics on gradient clouds in hand: the exact p-value's calibration, the null moments of a random
subspace's share by Monte Carlo, random subspaces, and ΔIsoScore* in each convention against the `isoscore` package.

The clouds go through the probe's own statistics code (`SubspaceColumns.draw`, `sums_from_gradients`,
`build_results`): only the forward and backward passes are left out.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch
from helpers.tolerances import assert_difference_close

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError, NonFiniteError
from interpreto_anisotropy.metrics import isoscore_from_covariance
from interpreto_anisotropy.probing.anisotropy import IsoScoreSettings
from interpreto_anisotropy.probing.objectives import make_objective
from interpreto_anisotropy.probing.statistics import SubspaceColumns, build_results, sums_from_gradients
from interpreto_anisotropy.tangents.controls import chance_std, normal_control_bases, random_subspace_bases
from interpreto_anisotropy.tangents.subspace import Subspace

OBJECTIVE = make_objective("causal_lm")


def gradient_cloud(seed: int, n: int, d: int, *, power: float = 1.0) -> torch.Tensor:
    """Anisotropic, off-centre "gradients": variances decaying as i^-power in a random orientation, plus a mean."""
    generator = torch.Generator().manual_seed(seed)
    scales = torch.arange(1, d + 1, dtype=torch.float64) ** (-power / 2)
    rotation, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    mean = 0.3 * torch.randn(d, generator=generator, dtype=torch.float64)
    return (torch.randn(n, d, generator=generator, dtype=torch.float64) * scales) @ rotation + mean


def probe_statistics(
    gradients: torch.Tensor,
    tangent: Subspace,
    *,
    n_controls: int = 20,
    n_random: int = 20,
    seed: int = 0,
    isoscore: IsoScoreSettings | None = None,
    sequence_length: int = 10,
) -> ia.ProbeResult:
    """The ProbeResult the probe would build from these gradient rows (sequences of `sequence_length` rows)."""
    columns = SubspaceColumns.draw({"tangent": tangent}, n_controls=n_controls, n_random=n_random, seed=seed)
    sequence_ids = torch.arange(gradients.shape[0]) // sequence_length
    sums = sums_from_gradients(gradients, sequence_ids, columns)
    return build_results(sums, columns, seed, 1, 0.95, OBJECTIVE, None, isoscore)["tangent"]


def haar_shares(second_moment: torch.Tensor, k: int, n: int, seed: int) -> torch.Tensor:
    """tr(Q^T S Q) / tr(S) for n Haar-random k-subspaces, drawn here independently of the package (QR of Gaussians)."""
    generator = torch.Generator().manual_seed(seed)
    d = second_moment.shape[0]
    shares = []
    for start in range(0, n, 5000):
        draws = torch.randn(min(5000, n - start), d, k, generator=generator, dtype=torch.float64)
        bases, _ = torch.linalg.qr(draws)
        shares.append(torch.einsum("rik,ij,rjk->r", bases, second_moment, bases) / torch.trace(second_moment))
    return torch.cat(shares)


# --------------------------------------------------------------------------- null moments of a random subspace
@pytest.mark.parametrize(("d", "k", "n"), [(6, 2, 200_000), (12, 3, 100_000), (64, 16, 20_000)])
def test_random_share_mean_and_std_match_the_closed_form_by_monte_carlo(d, k, n):
    gradients = gradient_cloud(d, 5 * d, d, power=2.0)
    second_moment = gradients.T @ gradients / gradients.shape[0]
    shares = haar_shares(second_moment, k, n, seed=k)
    mean_error = shares.std() / math.sqrt(n)
    assert abs(shares.mean() - k / d) < 4 * mean_error
    variance = shares.var()
    variance_error = math.sqrt(float(((shares - shares.mean()) ** 4).mean() - variance**2) / n)
    assert abs(variance - chance_std(second_moment, k) ** 2) < 4 * variance_error
    if d < 20:  # without the d / (d - 1) factor the formula would be off by 1/(d - 1): 20 % at d = 6, 9 % at d = 12
        spread = float((second_moment / torch.trace(second_moment)).square().sum()) - 1 / d
        without_factor = 2 * k * (d - k) / (d**2 * (d + 2)) * spread
        assert abs(variance - without_factor) > 4 * variance_error


def test_chance_std_in_terms_of_eigenvalues():
    gradients = gradient_cloud(1, 300, 20)
    eigenvalues = np.linalg.eigvalsh((gradients.T @ gradients).numpy())
    d, k = 20, 5
    expected = 2 * k * (d - k) / (d * (d - 1) * (d + 2)) * ((eigenvalues**2).sum() / eigenvalues.sum() ** 2 - 1 / d)
    assert chance_std(gradients.T @ gradients, k) == pytest.approx(math.sqrt(expected), rel=1e-10)
    assert chance_std(torch.eye(d), k) == 0.0 and chance_std(torch.eye(d), d) == 0.0


@pytest.mark.parametrize(
    ("matrix", "k", "message"),
    [
        (torch.zeros(4, 4), 1, "second_moment.*trace 0"),
        (torch.eye(4), 0, "1 <= k <= d.*k=0"),
        (torch.eye(4), 5, "1 <= k <= d.*k=5"),
        (torch.ones(4), 1, r"second_moment.*\(d, d\)"),
    ],
)
def test_chance_std_refuses_bad_inputs(matrix, k, message):
    with pytest.raises(InvalidInputError, match=message):
        chance_std(matrix, k)


# --------------------------------------------------------------------------- random subspaces
def test_random_subspaces_are_orthonormal_seeded_and_uniform():
    d, k = 12, 3
    bases = random_subspace_bases(d, k, 4000, seed=0, dtype=torch.float64)
    eye = torch.eye(k, dtype=torch.float64)
    assert (bases.transpose(-1, -2) @ bases - eye).abs().max() < 1e-12
    mean_projector = torch.einsum("nik,njk->ij", bases, bases) / bases.shape[0]
    assert (mean_projector - k / d * torch.eye(d, dtype=torch.float64)).abs().max() < 0.02
    assert torch.equal(random_subspace_bases(d, k, 5, seed=3), random_subspace_bases(d, k, 5, seed=3))
    assert not torch.allclose(random_subspace_bases(d, k, 5, seed=3), random_subspace_bases(d, k, 5, seed=4))


@pytest.mark.parametrize("seed", [0, 7])
def test_random_subspaces_are_neither_the_seeds_tangent_nor_its_controls(seed):
    """Their stream differs from `Subspace.random(seed)`'s and from the controls': no draw repeats another."""
    tangent = Subspace.random(32, 4, seed=seed, dtype=torch.float64)
    randoms = random_subspace_bases(32, 4, 3, seed=seed, dtype=torch.float64)
    controls = normal_control_bases(tangent, 3, seed=seed)
    for basis in randoms:
        assert Subspace(basis).overlap(tangent) < 0.9
        assert all(Subspace(basis).overlap(Subspace(control)) < 0.9 for control in controls)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((64, 8, 0), r"n_random.*\b0\b"),
        ((64, 0, 3), "1 <= k <= d.*k=0"),
        ((64, 65, 3), "1 <= k <= d.*k=65"),
        ((768, 16, 10**6), r"n_random=1000000.*91\.6 GiB"),
    ],
)
def test_random_subspaces_refuse_bad_options(arguments, message):
    with pytest.raises(InvalidInputError, match=message):
        random_subspace_bases(*arguments)


def test_tangents_of_one_rank_share_their_random_subspaces_and_not_their_values():
    gradients = gradient_cloud(3, 200, 32)
    tangents = {"a": Subspace.random(32, 4, seed=1), "b": Subspace.random(32, 4, seed=2), "c": Subspace.random(32, 6)}
    columns = SubspaceColumns.draw(tangents, n_controls=3, n_random=5, seed=9)
    assert set(columns.randoms) == {4, 6} and len(columns.widths) == 3 * (1 + 3)
    assert columns.randoms_of("a") == columns.randoms_of("b") == 4 != columns.randoms_of("c")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        together = build_results(
            sums_from_gradients(gradients, torch.arange(200) // 10, columns), columns, 9, 1, 0.9, OBJECTIVE, None
        )
        alone = probe_statistics(gradients, tangents["c"], n_controls=3, n_random=5, seed=9)
    np.testing.assert_allclose(together["c"].random_energy_shares, alone.random_energy_shares, rtol=1e-6)
    assert together["c"].p_value_exact == alone.p_value_exact


# --------------------------------------------------------------------------- calibration of the exact p-value
@pytest.mark.parametrize("k", [8, 16])
def test_exact_p_value_is_calibrated_under_the_null(k):
    """Uniformly random tangents, independent of a fixed gradient cloud: P(p_value_exact <= alpha) = alpha.

    With R' = 19 random subspaces the p-values live on the grid j / 20, so alpha in {0.05, 0.1, 0.25, 0.5} is
    attainable exactly, and the count of p <= alpha over independent tangents is Binomial(n, alpha).
    """
    d, n_tangents = 64, 400
    gradients = gradient_cloud(k, 400, d)
    p_values = np.array(
        [
            probe_statistics(
                gradients, Subspace.random(d, k, seed=index), n_controls=1, n_random=19, seed=index
            ).p_value_exact
            for index in range(n_tangents)
        ]
    )
    for alpha in (0.05, 0.1, 0.25, 0.5):
        low, high = scipy.stats.binom.interval(0.99, n_tangents, alpha)
        assert low <= np.count_nonzero(p_values <= alpha + 1e-12) <= high, alpha


def test_a_tangent_that_holds_the_energy_gets_the_smallest_exact_p_value():
    gradients = gradient_cloud(5, 400, 64, power=2.0)
    top = torch.linalg.eigh(gradients.T @ gradients).eigenvectors[:, -8:]
    result = probe_statistics(gradients, Subspace(top.float()), n_random=20)
    assert result.p_value_exact == pytest.approx(1 / 21) and result.z_score > 3


def test_exact_p_value_and_z_score_equal_a_direct_recomputation():
    d, k, n_random, seed = 48, 6, 30, 4
    gradients = gradient_cloud(2, 300, d, power=1.5)
    tangent = Subspace.random(d, k, seed=11)
    result = probe_statistics(gradients, tangent, n_random=n_random, seed=seed)
    G = gradients.numpy()
    total = np.sum(G**2)
    energy = np.sum((G @ tangent.basis.double().numpy()) ** 2) / total
    randoms = random_subspace_bases(d, k, n_random, seed=seed, dtype=torch.float64).numpy()
    random_energy = [np.sum((G @ basis) ** 2) / total for basis in randoms]
    np.testing.assert_allclose(result.random_energy_shares, random_energy, rtol=1e-5)
    assert result.p_value_exact == (1 + sum(value >= energy for value in random_energy)) / (n_random + 1)
    eigenvalues = np.linalg.eigvalsh(G.T @ G)
    spread = (eigenvalues**2).sum() / eigenvalues.sum() ** 2 - 1 / d
    sigma = math.sqrt(2 * k * (d - k) / (d * (d - 1) * (d + 2)) * spread)
    assert result.chance_std == pytest.approx(sigma, rel=1e-6)  # float32 rows, as the probe's
    assert result.z_score == pytest.approx((energy - k / d) / sigma, rel=1e-4)


# --------------------------------------------------------------------------- ΔIsoScore*: conventions and targets
def _points_without(gradients: np.ndarray, basis: np.ndarray, convention: str) -> np.ndarray:
    """G with the subspace removed: coordinates in its complement, or G (I - Q Q^T) in R^d."""
    if convention == "complement":
        return gradients @ scipy.linalg.null_space(basis.T)
    return gradients - gradients @ basis @ basis.T


def _reference_target(target: str, data: np.ndarray, basis: np.ndarray, convention: str, points: np.ndarray):
    """C0 in the space `points` live in, as the `isoscore` package takes it (`data`: the pooled or given matrix)."""
    m = points.shape[1]
    if target == "scaled_identity":
        return np.trace(np.cov(points.T)) / m * np.eye(m)
    if target == "identity":
        return np.eye(m)
    if convention == "complement":
        complement = scipy.linalg.null_space(basis.T)
        return complement.T @ data @ complement
    projector = np.eye(basis.shape[0]) - basis @ basis.T
    return projector @ data @ projector


@pytest.mark.parametrize("convention", ["complement", "ambient"])
@pytest.mark.parametrize("target", ["scaled_identity", "identity", "pooled", "given"])
@pytest.mark.parametrize("zeta", [0.2, 0.75])
def test_isoscore_without_a_subspace_agrees_with_the_isoscore_package(convention, target, zeta):
    reference = pytest.importorskip("IsoScore.IsoScore")
    d, k = 24, 5
    gradients = gradient_cloud(0, 120, d).numpy()
    covariance = np.cov(gradients.T)
    given = np.cov(gradient_cloud(1, 5000, d).numpy().T)
    c0 = torch.from_numpy(given) if target == "given" else target
    settings = IsoScoreSettings.make(convention=convention, zeta=zeta, c0=c0)
    bases = torch.stack([Subspace.random(d, k, seed=seed, dtype=torch.float64).basis for seed in range(3)])
    ours = settings.score_without(torch.from_numpy(covariance), bases)
    data = given if target == "given" else covariance
    for basis, value in zip(bases.numpy(), ours, strict=True):
        points = _points_without(gradients, basis, convention)
        target_matrix = _reference_target(target, data, basis, convention, points)
        assert value == pytest.approx(float(reference.IsoScore_star(points, target_matrix, zeta)), abs=1e-6)
    whole = {"scaled_identity": np.eye(d) * np.trace(covariance) / d, "identity": np.eye(d)}.get(target, data)
    assert settings.score(torch.from_numpy(covariance), 120) == pytest.approx(
        float(reference.IsoScore_star(gradients, whole, zeta)), abs=1e-6
    )


@pytest.mark.parametrize("convention", ["complement", "ambient"])
def test_pooled_target_gives_plain_isoscore(convention):
    d, k = 16, 3
    gradients = gradient_cloud(4, 200, d)
    covariance = torch.cov(gradients.T)
    basis = Subspace.random(d, k, seed=0, dtype=torch.float64).basis
    settings = IsoScoreSettings.make(convention=convention, zeta=0.5, c0="pooled")
    points = torch.from_numpy(_points_without(gradients.numpy(), basis.numpy(), convention))
    assert settings.score_without(covariance, basis[None])[0] == pytest.approx(
        float(isoscore_from_covariance(torch.cov(points.T))), abs=1e-10
    )
    assert settings.score(covariance, 200) == pytest.approx(float(isoscore_from_covariance(covariance)), abs=1e-12)


@pytest.mark.parametrize(("convention", "sign"), [("complement", 1), ("ambient", -1)])
def test_only_the_difference_with_the_controls_means_something(convention, sign):
    """Removing a random subspace raises IsoScore* in the complement and lowers it in R^d; the anisotropy share of
    a random tangent, tangent minus controls, is about 0 in both conventions."""
    d, k, n_tangents = 64, 16, 60
    gradients = gradient_cloud(8, 640, d)
    settings = IsoScoreSettings.make(convention=convention)
    results = [
        probe_statistics(
            gradients, Subspace.random(d, k, seed=index), n_controls=10, n_random=1, seed=index, isoscore=settings
        )
        for index in range(n_tangents)
    ]
    deltas = np.array([result.delta_isoscore_star for result in results])
    shares = np.array([result.anisotropy_share for result in results])
    assert sign * deltas.mean() > 4 * deltas.std() / math.sqrt(n_tangents)
    assert abs(shares.mean()) < 4 * shares.std() / math.sqrt(n_tangents)
    for result in results[:3]:
        # = IsoScore* without the tangent - the mean of IsoScore* without each control: on those terms' scale
        terms = (result.isoscore_star_without_tangent, result.isoscore_star_without_controls)
        expected = result.delta_isoscore_star - result.delta_isoscore_star_controls.mean()
        assert_difference_close(result.anisotropy_share, expected, *terms, rtol=1e-6)
        assert result.anisotropy_share_p_value == ia.controls.p_value(
            result.delta_isoscore_star, result.delta_isoscore_star_controls
        )
        assert result.isoscore_convention == convention


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"convention": "inside"}, InvalidInputError, "isoscore_convention.*'inside'"),
        ({"zeta": 1.5}, InvalidInputError, r"isoscore_zeta.*\[0, 1\].*1\.5"),
        ({"zeta": "oas"}, InvalidInputError, "isoscore_zeta.*'oas'"),
        (
            {"c0": "covariance"},
            InvalidInputError,
            "isoscore_c0.*'scaled_identity'.*'covariance'",
        ),
        ({"c0": torch.ones(3)}, InvalidInputError, r"isoscore_c0.*\(d, d\).*\(3,\)"),
        ({"c0": torch.zeros(3, 3)}, InvalidInputError, "isoscore_c0.*trace 0"),
        ({"c0": torch.full((3, 3), math.nan)}, NonFiniteError, "isoscore_c0.*NaN"),
        ({"c0": 3}, InvalidInputError, r"isoscore_c0.*\bint\b"),
    ],
)
def test_isoscore_options_are_refused_naming_them(options, error, message):
    with pytest.raises(error, match=message):
        IsoScoreSettings.make(**options)


def test_a_given_c0_of_another_size_is_refused():
    with pytest.raises(InvalidInputError, match=r"isoscore_c0.*R\^8"):
        IsoScoreSettings.make(c0=torch.eye(3)).check_dim(8)
