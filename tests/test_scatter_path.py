# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The random subspaces' energies read from the scatter G^T G equal their row-by-row projection.

When R' k > d, `GradientProbe.run` reads the random block from its float64 gradient moments instead of projecting
every row on it (`SubspaceColumns.from_scatter`). Forcing the projection (the path below the threshold) on the same
gradients must give the same p-values, energy ratios and shares, to float32 rounding, on every architecture.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.probing.statistics import SubspaceColumns, sums_from_gradients

ARCHITECTURES = ["gpt_neox_mwsp", "llama_mwsp", "eurobert_mwsp"]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_scatter_path_equals_projection_path(architecture, request, texts, monkeypatch):
    mwsp = request.getfixturevalue(architecture)
    probe = ia.GradientProbe(mwsp, seed=0)
    dim = probe.gradients(texts[:2], progress=False).gradients.shape[1]
    tangents = {"a": ia.Subspace.random(dim, 4, seed=1), "b": ia.Subspace.random(dim, 6, seed=2)}
    options = {"n_controls": 5, "n_random": 30, "draw_seeds": {"a": 11, "b": 12}, "progress": False}
    columns = SubspaceColumns.draw(tangents, n_controls=5, n_random=30, seed={"a": 11, "b": 12})
    assert columns.from_scatter  # 30 (4 + 6) > d
    scattered = probe.run(texts[:10], tangents, **options)
    with monkeypatch.context() as patched:
        patched.setattr(SubspaceColumns, "from_scatter", property(lambda self: False))
        projected = probe.run(texts[:10], tangents, **options)
    for name in tangents:
        ours, theirs = scattered[name], projected[name]
        for field in ("energy_share", "control_mean", "energy_ratio", "p_value", "ci_low", "ci_high", "z_score"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)  # tangents, controls: per row
        assert ours.p_value_exact == theirs.p_value_exact, name
        np.testing.assert_allclose(ours.random_energy_shares, theirs.random_energy_shares, rtol=2e-6, atol=0)
        assert np.all(ours.random_energy_shares > 0)


def test_the_scatter_equals_a_float64_recomputation(texts, gpt_neox_mwsp):
    """The scattered random shares against ||G Q||^2 / ||G||^2 recomputed in float64 from the probe's own rows."""
    probe = ia.GradientProbe(gpt_neox_mwsp, seed=0)
    raw = probe.gradients(texts[:10], progress=False)
    dim = raw.gradients.shape[1]
    tangent = ia.Subspace.random(dim, 4, seed=1)
    result = probe.run(texts[:10], tangent, n_controls=5, n_random=40, draw_seeds={"tangent": 7}, progress=False)
    bases = ia.controls.random_subspace_bases(dim, 4, 40, seed=7, dtype=torch.float64)
    gradients = raw.gradients.double()
    expected = [(gradients @ basis).square().sum().item() / gradients.square().sum().item() for basis in bases]
    np.testing.assert_allclose(result.random_energy_shares, expected, rtol=1e-5)
    columns = SubspaceColumns.draw({"tangent": tangent.to(dtype=torch.float32)}, n_controls=5, n_random=40, seed=7)
    sums = sums_from_gradients(raw.gradients, raw.sequence_ids, columns)  # every block projected row by row
    np.testing.assert_allclose(
        sums.energy_per_column()[columns.random_columns("tangent")].numpy() / sums.sequence_total.sum().item(),
        expected,
        rtol=1e-5,
    )
