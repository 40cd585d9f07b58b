# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The random subspaces' energies and ΔIsoScore*, read from the gradient moments chunk by chunk, equal a loop.

`GradientProbe.run` never projects a row on the exact p-values' R' random subspaces: `RandomSubspaces.scores` reads
each chunk's energies tr(Q^T G^T G Q) and IsoScore* without it from one product Sigma Q. Here the same numbers are
recomputed one subspace at a time (the path this replaced): projected rows in float64, the scatter G^T G, and
`IsoScoreSettings.score_without` on each basis; for every IsoScore* target, both conventions and several chunk sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons.accumulators import MomentAccumulator
from interpreto_anisotropy.probing.anisotropy import IsoScoreSettings
from interpreto_anisotropy.probing.statistics import RandomSubspaces
from interpreto_anisotropy.tangents import controls

ARCHITECTURES = ["gpt_neox_mwsp", "llama_mwsp", "eurobert_mwsp"]


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # 10 texts
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_the_probes_random_shares_equal_float64_projections_of_its_rows(architecture, request, texts):
    """On each architecture: the probe's random shares and exact p-values against its raw rows projected in float64."""
    mwsp = request.getfixturevalue(architecture)
    probe = ia.GradientProbe(mwsp, seed=0)
    raw = probe.gradients(texts[:10], progress=False)
    dim = raw.gradients.shape[1]
    tangents = {"a": ia.Subspace.random(dim, 4, seed=1), "b": ia.Subspace.random(dim, 6, seed=2)}
    seeds = {"a": 11, "b": 12}
    results = probe.run(texts[:10], tangents, n_controls=5, n_random=30, draw_seeds=seeds, progress=False)
    gradients = raw.gradients.double()
    total = gradients.square().sum().item()
    for name, tangent in tangents.items():
        bases = controls.random_subspace_bases(dim, tangent.rank, 30, seed=seeds[name], dtype=torch.float64)
        expected = np.array([(gradients @ basis).square().sum().item() / total for basis in bases])
        result = results[name]
        np.testing.assert_allclose(result.random_energy_shares, expected, rtol=1e-5)
        assert np.all(result.random_energy_shares > 0)
        energy = (gradients @ tangent.basis.double()).square().sum().item() / total
        near = np.abs(expected - energy) <= 1e-5 * energy  # a near-tie may fall either way
        assert abs(result.p_value_exact - (1 + np.count_nonzero(expected >= energy)) / 31) <= near.sum() / 31


def _cloud(n: int, d: int, seed: int) -> torch.Tensor:
    """Anisotropic float32 rows with a mean, as gradients are."""
    generator = torch.Generator().manual_seed(seed)
    scales = torch.arange(1, d + 1, dtype=torch.float64) ** -0.7
    rows = torch.randn(n, d, generator=generator, dtype=torch.float64) * scales + 0.3 * scales.flip(0)
    return rows.float()


SETTINGS = [
    {"convention": "complement"},
    {"convention": "ambient"},
    {"convention": "complement", "zeta": 0.75, "c0": "identity"},
    {"convention": "ambient", "c0": "pooled"},
    {"convention": "complement", "zeta": 0.5, "c0": "given"},
]


@pytest.mark.parametrize("options", SETTINGS, ids=lambda options: "-".join(map(str, options.values())))
@pytest.mark.parametrize("max_bytes", [1, 2**17, controls.RANDOM_CHUNK_BYTES])
def test_chunked_scores_equal_a_loop_over_the_subspaces(options, max_bytes, monkeypatch):
    d, k, count, seed = 40, 5, 70, 3
    rows = _cloud(500, d, seed=0)
    if options.get("c0") == "given":
        options = {**options, "c0": torch.cov(_cloud(2000, d, seed=1).double().T)}
    isoscore = IsoScoreSettings.make(**options)
    moments = MomentAccumulator(d).update(rows[:200]).update(rows[200:])
    covariance = isoscore.covariance(moments)
    monkeypatch.setattr(controls, "RANDOM_CHUNK_BYTES", max_bytes)
    randoms = RandomSubspaces(d, k, count, seed)
    chunks = list(controls.random_subspace_chunks(d, k, count, seed=seed, max_bytes=max_bytes))
    assert sum(chunk.shape[0] for chunk in chunks) == count
    energies, without = randoms.scores(moments, covariance, isoscore)

    scatter = moments.second_moment() * moments.count
    bases = controls.random_subspace_bases(d, k, count, seed=seed, dtype=torch.float64)
    assert torch.equal(torch.cat(chunks), bases)  # the chunks are the subspaces of one draw
    projected = np.array([(rows.double() @ basis).square().sum().item() for basis in bases])
    from_scatter = np.array([torch.trace(basis.T @ scatter @ basis).item() for basis in bases])
    one_by_one = np.concatenate([isoscore.score_without(covariance, basis[None]) for basis in bases])
    np.testing.assert_allclose(energies, from_scatter, rtol=1e-12)
    np.testing.assert_allclose(energies, projected, rtol=1e-6)  # float32 products in the moments
    np.testing.assert_allclose(without, one_by_one, rtol=0, atol=1e-12)
    assert np.ptp(without) > 1e-3 and np.ptp(energies) > 1e-2 * energies.mean()  # the subspaces differ


def test_the_draws_and_their_scores_do_not_depend_on_the_chunk_size():
    d, k, count, seed = 24, 3, 100, 9
    rows = _cloud(300, d, seed=2)
    isoscore = IsoScoreSettings.make()
    moments = MomentAccumulator(d).update(rows)
    covariance = isoscore.covariance(moments)
    whole = RandomSubspaces(d, k, count, seed).scores(moments, covariance, isoscore)
    sizes = controls.random_chunk_sizes(d, k, count, max_bytes=1)
    assert sizes == [16] * 5 + [20] and all(size % 16 == 0 for size in sizes[:-1])
    pieces = [
        torch.cat(list(controls.random_subspace_chunks(d, k, count, seed=seed, max_bytes=size))) for size in (1, 4096)
    ]
    assert all(torch.equal(piece, pieces[0]) for piece in pieces)
    np.testing.assert_allclose(
        whole[0], [torch.trace(b.T @ (moments.second_moment() * 300) @ b) for b in pieces[0]], rtol=1e-12
    )
