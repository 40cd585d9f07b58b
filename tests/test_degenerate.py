# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Degenerate inputs are refused or warned about, never turned into confident statistics (issue 14, finding 9).

A tangent from rows that define no direction (one row, identical rows) is refused; one from rows that span fewer
than `nb_concepts` dimensions warns, since its extra directions are arbitrary. A probe's bootstrap interval over
fewer than `MIN_BOOTSTRAP_SEQUENCES` (20) sequences warns, and over a single sequence is NaN, not a zero-width
interval.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import DegenerateStatisticsWarning, InvalidInputError
from interpreto_anisotropy.probing.intervals import MIN_BOOTSTRAP_SEQUENCES

D = 64


def rows(n: int, *, rank: int | None = None, seed: int = 0) -> torch.Tensor:
    """(n, 64) float32 rows with an offset; with `rank`, in a random affine subspace of that dimension."""
    generator = torch.Generator().manual_seed(seed)
    rank = D if rank is None else rank
    frame = torch.linalg.qr(torch.randn(D, rank, generator=generator))[0]
    return torch.randn(n, rank, generator=generator) @ frame.T + 5 * torch.randn(D, generator=generator)


def _not_json(name: str) -> None:
    raise AssertionError(f"{name} is not valid JSON")


def _degenerate_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(item.message) for item in caught if issubclass(item.category, DegenerateStatisticsWarning)]


@pytest.fixture(scope="module")
def splitter(gpt_neox_mwsp):
    return gpt_neox_mwsp


# ------------------------------------------------------------------------------------------------ tangents
@pytest.mark.parametrize("method", ["pca", "svd", "ica", "semi_nmf"])
def test_a_centred_tangent_from_one_row_is_refused(splitter, method):
    with pytest.raises(InvalidInputError, match=r"\b2\b.*got 1.*max_fit_tokens"):
        ia.TangentExplainer(splitter, nb_concepts=2, method=method).fit(rows(1))


@pytest.mark.parametrize("method", ["pca", "svd", "ica"])
def test_a_tangent_from_identical_rows_is_refused(splitter, method):
    identical = rows(1).expand(50, D)
    with pytest.raises(InvalidInputError, match="50 activation rows.*identical"):
        ia.TangentExplainer(splitter, nb_concepts=2, method=method).fit(identical)


def test_an_uncentred_tangent_from_zero_rows_is_refused_from_one_row_is_not(splitter):
    """One row fits an uncentred rank-1 tangent (its direction), with a warning: 1 < k + 1 rows (issue 27, 10)."""
    with pytest.raises(InvalidInputError, match="10 activation rows.*zero"):
        ia.PCATangent(splitter, nb_concepts=2, center=False).fit(torch.zeros(10, D))
    one = rows(1)
    with pytest.warns(DegenerateStatisticsWarning, match=r"nb_concepts=1.*\b1 activation rows.*max_fit_tokens"):
        basis = ia.PCATangent(splitter, nb_concepts=1, center=False).fit(one).subspace.basis
    assert abs(float((basis[:, 0] @ one[0]).abs() / one[0].norm()) - 1) < 1e-5  # the row's direction


METHODS = ["pca", "pca_sklearn", "svd", "ica", "semi_nmf", "nmf", "topk_sae"]


@pytest.mark.parametrize("center", [True, False], ids=["centred", "uncentred"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.filterwarnings("ignore:The dictionary's:UserWarning")  # dependent atoms, dropped
def test_every_fit_from_k_rows_warns_centred_or_not(splitter, method, center):
    """A rank-k fit from k rows (fewer than k + 1) warns on every path: k rows fit a k-dimensional span exactly."""
    data = rows(4).abs() if method == "nmf" else rows(4)
    options = {"nb_epochs": 2} if method == "topk_sae" else {}
    tangent = ia.TangentExplainer(splitter, nb_concepts=4, method=method, center=center)
    with pytest.warns(DegenerateStatisticsWarning, match="nb_concepts=4.*nb_concepts <= 3"):
        tangent.fit(data, **options)


@pytest.mark.parametrize("center", [True, False], ids=["centred", "uncentred"])
def test_a_streamed_fit_from_k_rows_warns_at_its_subspace(splitter, center):
    tangent = ia.PCATangent(splitter, nb_concepts=4, center=center).partial_fit(rows(2)).partial_fit(rows(2, seed=1))
    with pytest.warns(DegenerateStatisticsWarning, match="nb_concepts=4.*nb_concepts <= 3"):
        tangent.finalize()


@pytest.mark.parametrize("method", ["pca", "svd", "semi_nmf"])
@pytest.mark.filterwarnings("ignore:The dictionary's:UserWarning")  # semi-NMF's dependent atoms, dropped
def test_fewer_rows_than_the_rank_needs_warn_naming_nb_concepts(splitter, method):
    tangent = ia.TangentExplainer(splitter, nb_concepts=4, method=method)
    with pytest.warns(DegenerateStatisticsWarning, match=r"nb_concepts=4.*\b3 activation rows") as caught:
        tangent.fit(rows(3))
    message = _degenerate_warnings(caught.list)[0]
    assert "2 dimension" in message and "max_fit_tokens" in message and "nb_concepts <= 2" in message
    assert all(
        item.filename == __file__
        for item in caught.list
        if item.category is DegenerateStatisticsWarning and "nb_concepts=" in str(item.message)
    )


def test_nmf_counts_its_rows_uncentred(splitter):
    with pytest.warns(DegenerateStatisticsWarning, match=r"nb_concepts=4.*\b3 activation rows.*only 3 "):
        ia.NMFTangent(splitter, nb_concepts=4).fit(rows(3).abs())


def test_scikit_learn_pca_from_fewer_rows_than_components_is_refused(splitter):
    with pytest.raises(InvalidInputError, match=r"nb_concepts=4.*\b3 activation rows.*method='pca'"):
        ia.TangentExplainer(splitter, nb_concepts=4, method="pca_sklearn").fit(rows(3))


def test_many_rows_of_low_rank_warn_from_the_eigenvalues(splitter):
    with pytest.warns(DegenerateStatisticsWarning, match="1000 activation rows.*only 2 dimension"):
        ia.PCATangent(splitter, nb_concepts=4).fit(rows(1000, rank=2))


def test_enough_rows_give_no_warning(splitter):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateStatisticsWarning)
        ia.PCATangent(splitter, nb_concepts=4).fit(rows(5))  # 5 rows span 4 dimensions once centred
        ia.PCATangent(splitter, nb_concepts=8).fit(rows(2000, rank=8))
        ia.SVDTangent(splitter, nb_concepts=4).fit(rows(5))


def test_the_streamed_pca_checks_once_every_shard_is_in(splitter):
    """Shards too small alone (1 row, 2 rows) are fine once merged: the check is at finalize, not per batch."""
    shards = [ia.PCATangent(splitter, nb_concepts=3).partial_fit(part) for part in (rows(1), rows(4, seed=1))]
    other = shards[1].concept_model.moments
    shards[0].concept_model.merge(lambda mine: mine.merge(other))  # what an all-reduce over two ranks does
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateStatisticsWarning)
        assert shards[0].merge_across_ranks().finalize().subspace.rank == 3


def test_a_streamed_pca_of_one_row_is_refused_at_finalize_and_can_take_more_rows(splitter):
    tangent = ia.PCATangent(splitter, nb_concepts=2).partial_fit(rows(1))
    assert "unfitted" in repr(tangent)
    with pytest.raises(InvalidInputError, match=r"\b2 activation rows"):
        tangent.finalize()
    with pytest.warns(DegenerateStatisticsWarning, match=r"nb_concepts=2.*\b2 activation rows"):
        tangent.partial_fit(rows(1, seed=1)).finalize()
    tangent.partial_fit(rows(3, seed=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateStatisticsWarning)
        assert tangent.subspace.rank == 2


def test_a_refused_fit_leaves_the_tangent_unfitted(splitter):
    tangent = ia.PCATangent(splitter, nb_concepts=2)
    with pytest.raises(InvalidInputError):
        tangent.fit(rows(1))
    assert not tangent.is_fitted and "unfitted" in repr(tangent)


# ------------------------------------------------------------------------------------------------ the probe
@pytest.fixture(scope="module")
def subspace() -> ia.Subspace:
    return ia.Subspace.random(D, 4, seed=0)


def _probe(splitter, texts, subspace) -> tuple[ia.ProbeResult, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ia.GradientProbe(splitter).run(texts, subspace, n_controls=3, n_bootstrap=50, progress=False)
    return result, _degenerate_warnings(caught)


def test_a_probe_of_one_sequence_has_no_interval_and_warns(splitter, texts, subspace):
    result, messages = _probe(splitter, texts[:1], subspace)
    assert result.n_sequences == 1 and math.isnan(result.ci_low) and math.isnan(result.ci_high)
    assert messages and "1 probe sequence(s)" in messages[0] and "more probe texts" in messages[0]
    data = result.to_dict()
    assert data["ci_low"] is None and data["ci_high"] is None
    json.dumps(data, allow_nan=False)  # valid JSON
    again = ia.ProbeResult.from_dict(data)
    assert math.isnan(again.ci_low) and np.isfinite(again.energy_share)
    assert "nan" in str(result)


def test_a_probe_of_five_sequences_warns(splitter, texts, subspace):
    result, messages = _probe(splitter, texts[:5], subspace)
    assert result.n_sequences == 5 and result.ci_low < result.ci_high
    assert len(messages) == 1 and f"5 probe sequence(s), fewer than {MIN_BOOTSTRAP_SEQUENCES}" in messages[0]


def test_a_probe_of_enough_sequences_does_not_warn(splitter, texts, subspace):
    result, messages = _probe(splitter, texts[:MIN_BOOTSTRAP_SEQUENCES], subspace)
    assert result.n_sequences == MIN_BOOTSTRAP_SEQUENCES and messages == []


def test_a_sweep_probing_one_sequence_writes_valid_rows_and_plots(toy_checkpoints, fit_texts, texts, tmp_path):
    with pytest.warns(DegenerateStatisticsWarning, match="1 probe sequence"):
        table = ia.CheckpointSweep(
            ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[:2],
            split_point=1,
            texts=fit_texts[:8],
            probe_texts=texts[:1],
            nb_concepts=2,
            n_controls=3,
            max_fit_tokens=400,
            max_metric_tokens=200,
            results_dir=tmp_path / "sweep",
            progress=False,
        ).run()
    assert table.rows and all(row["ci_low"] is None and row["ci_high"] is None for row in table.rows)
    written = list((tmp_path / "sweep").rglob("*.jsonl"))
    assert written
    for path in written:
        for text in path.read_text().splitlines():
            json.loads(text, parse_constant=_not_json)
    assert ia.write_report(table, tmp_path / "report", dpi=30).exists()
