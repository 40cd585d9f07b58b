# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of the streamed moments (MomentAccumulator, merge) and top_eigenvectors against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreto_anisotropy.commons.accumulators import MomentAccumulator, top_eigenvectors
from interpreto_anisotropy.errors import InvalidInputError

FAST = settings(max_examples=20, deadline=None)


def data(n: int, d: int, *, seed: int = 0, offset: float = 0.0) -> np.ndarray:
    """Correlated rows with a large common offset, the case where a naive E[xx^T] - mm^T loses digits."""
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((d, d)) / np.sqrt(d)
    return rng.standard_normal((n, d)) @ mixing + offset + rng.standard_normal(d)


def accumulate(x: np.ndarray, splits: list[int], **kwargs) -> MomentAccumulator:
    acc = MomentAccumulator(x.shape[1], **kwargs)
    for part in np.split(x, splits):
        acc.update(torch.from_numpy(part))
    return acc


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_moments_match_numpy(dtype):
    x = data(500, 12, offset=100.0).astype(dtype)
    acc = accumulate(x, [7, 100, 100, 333])  # uneven batches, one of them empty
    reference = x.astype(np.float64)
    tolerance = 1e-10 if dtype == np.float64 else 1e-5
    assert acc.count == 500
    np.testing.assert_allclose(acc.mean.numpy(), reference.mean(0), rtol=1e-7, atol=tolerance)
    np.testing.assert_allclose(acc.covariance().numpy(), np.cov(reference, rowvar=False, bias=True), atol=tolerance)
    np.testing.assert_allclose(acc.covariance(unbiased=True).numpy(), np.cov(reference, rowvar=False), atol=tolerance)
    np.testing.assert_allclose(
        acc.second_moment().numpy(), reference.T @ reference / 500, rtol=1e-6 if dtype == np.float32 else 1e-12
    )
    assert acc.mean.dtype == acc.covariance().dtype == torch.float64


def test_covariance_is_symmetric_and_stable_under_a_large_offset():
    x = data(2000, 8, seed=1, offset=1e4).astype(np.float32)
    acc = accumulate(x, [1000])
    cov = acc.covariance()
    assert torch.equal(cov, cov.T)
    reference = np.cov(x.astype(np.float64), rowvar=False, bias=True)
    # Relative to the covariance's own scale (~1), not to the offset's (1e8): the shift keeps the digits.
    assert np.abs(cov.numpy() - reference).max() < 1e-4


def test_given_shift_is_used_and_kept():
    x = data(50, 4, seed=2)
    shift = torch.full((4,), 3.0)
    acc = accumulate(x, [20], shift=shift)
    assert torch.equal(acc.shift, shift.double())
    np.testing.assert_allclose(acc.covariance().numpy(), np.cov(x, rowvar=False, bias=True), atol=1e-12)


@FAST
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 60),
    cuts=st.lists(st.integers(0, 60), max_size=5),
)
def test_batching_does_not_change_the_moments(seed, n, cuts):
    x = data(n, 5, seed=seed, offset=10.0)
    one_shot = accumulate(x, [])
    batched = accumulate(x, sorted(min(c, n) for c in cuts))
    assert batched.count == one_shot.count == n
    np.testing.assert_allclose(batched.mean.numpy(), one_shot.mean.numpy(), atol=1e-11)
    np.testing.assert_allclose(batched.covariance().numpy(), one_shot.covariance().numpy(), atol=1e-10)


def test_merge_of_accumulators_with_different_shifts_matches_numpy():
    a = data(300, 6, seed=3, offset=-50.0)
    b = data(200, 6, seed=4, offset=80.0)  # another region: its first-batch shift is far from a's
    left, right = accumulate(a, [100]), accumulate(b, [50])
    assert not torch.allclose(left.shift, right.shift)
    merged = left.merge(right)
    assert merged is left and merged.count == 500
    both = np.vstack([a, b])
    np.testing.assert_allclose(merged.mean.numpy(), both.mean(0), atol=1e-10)
    np.testing.assert_allclose(merged.covariance().numpy(), np.cov(both, rowvar=False, bias=True), atol=1e-9)
    np.testing.assert_allclose(merged.second_moment().numpy(), both.T @ both / 500, rtol=1e-11)
    # The merged sums equal those of a single accumulator fed both blocks.
    single = accumulate(both, [300])
    np.testing.assert_allclose(merged.covariance().numpy(), single.covariance().numpy(), atol=1e-9)


def test_merge_is_order_independent():
    parts = [data(40 + 10 * i, 5, seed=10 + i, offset=5.0 * i) for i in range(4)]
    forward, backward = MomentAccumulator(5), MomentAccumulator(5)
    for part in parts:
        forward.merge(accumulate(part, []))
    for part in reversed(parts):
        backward.merge(accumulate(part, []))
    np.testing.assert_allclose(forward.covariance().numpy(), backward.covariance().numpy(), atol=1e-10)
    np.testing.assert_allclose(forward.mean.numpy(), backward.mean.numpy(), atol=1e-12)


def test_merge_with_empty_accumulators():
    x = data(30, 4, seed=5)
    full = accumulate(x, [])
    empty_into_full = accumulate(x, []).merge(MomentAccumulator(4))
    full_into_empty = MomentAccumulator(4).merge(accumulate(x, []))
    for acc in (empty_into_full, full_into_empty):
        assert acc.count == 30
        np.testing.assert_allclose(acc.covariance().numpy(), full.covariance().numpy(), atol=1e-12)
        np.testing.assert_allclose(acc.mean.numpy(), full.mean.numpy(), atol=1e-12)


def test_merge_rejects_another_dimension():
    with pytest.raises(InvalidInputError):
        MomentAccumulator(4).merge(accumulate(data(5, 3), []))


def test_update_rejects_wrong_shapes():
    acc = MomentAccumulator(4)
    with pytest.raises(InvalidInputError):
        acc.update(torch.zeros(3, 5))
    with pytest.raises(InvalidInputError):
        acc.update(torch.zeros(4))


def test_empty_accumulator_raises_empty_input():
    acc = MomentAccumulator(3).update(torch.zeros(0, 3))
    for read in (lambda: acc.mean, acc.covariance, acc.second_moment):
        with pytest.raises(InvalidInputError):
            read()
    with pytest.raises(InvalidInputError):
        MomentAccumulator(3).update(torch.ones(1, 3)).covariance(unbiased=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_rows_are_accumulated_in_float32(dtype):
    """Half-precision products would round every Gram entry to 8-11 bits; the rows are upcast first."""
    rows = torch.from_numpy(data(4000, 8, seed=8, offset=3.0)).to(dtype)
    acc = MomentAccumulator(8)
    for batch in rows.split(1000):
        acc.update(batch)
    exact = rows.double().numpy()  # the half-precision values, exactly
    reference = np.cov(exact, rowvar=False, bias=True)
    assert np.abs(acc.covariance().numpy() - reference).max() < 1e-5 * np.abs(reference).max()
    np.testing.assert_allclose(acc.mean.numpy(), exact.mean(0), atol=1e-6)


def test_integer_rows_are_accepted():
    acc = MomentAccumulator(2).update(torch.tensor([[1, 2], [3, 4], [5, 9]]))
    np.testing.assert_allclose(acc.mean.numpy(), [3.0, 5.0])


def test_state_size_is_independent_of_the_number_of_rows():
    small = accumulate(data(10, 16), [])
    large = accumulate(data(5000, 16), [1000, 2000, 3000, 4000])
    state = [(t.shape, t.dtype) for t in (small.s1, small.s2, small.shift)]
    assert state == [(t.shape, t.dtype) for t in (large.s1, large.s2, large.shift)]
    assert small.s2.shape == (16, 16)


# --------------------------------------------------------------------------- top_eigenvectors
def test_top_eigenvectors_match_numpy_eigh():
    x = data(400, 10, seed=6)
    matrix = torch.from_numpy(np.cov(x, rowvar=False))
    values, vectors = top_eigenvectors(matrix, 4)
    ref_values, ref_vectors = np.linalg.eigh(matrix.numpy())
    ref_values, ref_vectors = ref_values[::-1][:4], ref_vectors[:, ::-1][:, :4]
    np.testing.assert_allclose(values.numpy(), ref_values, rtol=1e-12)
    assert values.dtype == vectors.dtype == torch.float64 and vectors.shape == (10, 4)
    for column, reference in zip(vectors.numpy().T, ref_vectors.T, strict=True):
        assert abs(abs(column @ reference) - 1.0) < 1e-10  # same vector up to sign
        assert column[np.abs(column).argmax()] > 0  # deterministic sign: largest entry positive
    np.testing.assert_allclose((matrix @ vectors).numpy(), vectors.numpy() * values.numpy(), atol=1e-12)


def test_all_eigenpairs_when_k_equals_d():
    matrix = torch.from_numpy(np.cov(data(100, 5, seed=9), rowvar=False))
    values, vectors = top_eigenvectors(matrix, 5)
    np.testing.assert_allclose(values.numpy(), np.linalg.eigvalsh(matrix.numpy())[::-1], rtol=1e-12)
    np.testing.assert_allclose((vectors.T @ vectors).numpy(), np.eye(5), atol=1e-12)


@pytest.mark.parametrize("k", [0, 7])
def test_top_eigenvectors_rejects_bad_k(k):
    with pytest.raises(InvalidInputError):
        top_eigenvectors(torch.eye(6), k)
