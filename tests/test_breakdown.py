# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The energy breakdown by token frequency and position: buckets against explicit loops, sums that add up."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.breakdown import (
    Breakdown,
    frequency_bucket_of_ids,
    frequency_labels,
    position_buckets,
    position_labels,
)


def _bucket_loop(counts, edges):
    """Walk the types from the most frequent, accumulating their share; a type's bucket is where it starts."""
    total = sum(counts)
    order = sorted(range(len(counts)), key=lambda i: (-counts[i], i))
    buckets, before = [0] * len(counts), 0.0
    for index in order:
        buckets[index] = len(edges) if counts[index] == 0 else sum(edge <= before / total for edge in edges)
        before += counts[index]
    return buckets


@given(st.lists(st.integers(0, 50), min_size=1, max_size=60).filter(lambda counts: sum(counts) > 0))
def test_frequency_buckets_follow_the_cumulated_share_of_occurrences(counts):
    edges = (0.5, 0.75, 0.9)
    assert frequency_bucket_of_ids(torch.tensor(counts), edges=edges).tolist() == _bucket_loop(counts, edges)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=50))
def test_position_buckets_count_the_edges_at_or_below(positions):
    edges = (1, 4, 16, 64, 256)
    expected = [sum(edge <= position for edge in edges) for position in positions]
    assert position_buckets(torch.tensor(positions)).tolist() == expected


def test_labels_name_every_bucket():
    assert frequency_labels() == [
        "0-50 % of occurrences",
        "50-75 % of occurrences",
        "75-90 % of occurrences",
        "90-100 % of occurrences",
    ]
    assert position_labels() == ["0", "1-3", "4-15", "16-63", "64-255", "256+"]


@pytest.mark.parametrize("edges", [(0.5, 0.5), (0.0, 0.5), (0.9, 0.5), (1.0,)])
def test_bad_edges_are_refused(edges):
    with pytest.raises(InvalidInputError, match="increasing shares in"):
        frequency_bucket_of_ids(torch.tensor([3, 2, 1]), edges=edges)


@given(st.integers(0, 2**31 - 1))
def test_bucket_sums_add_up_to_the_whole_and_match_a_loop(seed):
    generator = torch.Generator().manual_seed(seed)
    n, columns, vocab = 40, 3, 12
    counts = torch.randint(0, 9, (vocab,), generator=generator)
    counts[0] += 1
    ids = torch.randint(0, vocab + 3, (n,), generator=generator)  # some ids beyond the table: rarest bucket
    positions = torch.randint(0, 300, (n,), generator=generator)
    energy = torch.rand(n, columns, generator=generator, dtype=torch.float64)
    total = energy.sum(1) + torch.rand(n, generator=generator, dtype=torch.float64)
    probed = torch.rand(n, generator=generator) < 0.7
    breakdown = Breakdown(frequency_bucket_of_ids(counts), columns, "cpu")
    breakdown.add(ids, positions, energy, total, probed)
    for sums in (breakdown.frequency, breakdown.position):
        torch.testing.assert_close(sums.energy.sum(0), energy[probed].sum(0))
        torch.testing.assert_close(sums.total.sum(), total[probed].sum())
        assert int(sums.tokens.sum()) == int(probed.sum())
    bucket_of_id = frequency_bucket_of_ids(counts).tolist()
    for bucket in range(4):
        members = [i for i in range(n) if probed[i] and (bucket_of_id[ids[i]] if ids[i] < vocab else 3) == bucket]
        expected = (
            sum(float(energy[i, 1]) for i in members) / sum(float(total[i]) for i in members) if members else None
        )
        assert breakdown.frequency.shares([1])[0][bucket] == (pytest.approx(expected) if members else None)
