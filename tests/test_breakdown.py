# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The energy breakdown by token frequency and position: buckets against explicit loops, sums that add up."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.statistics import (
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
    with pytest.raises(InvalidInputError, match=rf"edges.*{re.escape(str(edges))}"):
        frequency_bucket_of_ids(torch.tensor([3, 2, 1]), edges=edges)


@given(st.integers(0, 2**31 - 1))
def test_bucket_sums_add_up_to_the_whole_and_match_a_loop(seed):
    generator = torch.Generator().manual_seed(seed)
    n, vocab = 40, 12
    energy = torch.rand(n, 5, generator=generator, dtype=torch.float64)  # a tangent, 2 controls, another, 1 control
    total = energy.sum(1) + torch.rand(n, generator=generator, dtype=torch.float64)
    ids = torch.randint(0, vocab, (n,), generator=generator)
    positions = torch.randint(0, 300, (n,), generator=generator)
    probed = torch.rand(n, generator=generator) < 0.7
    counts = torch.randint(0, 9, (vocab,), generator=generator)
    counts[0] += 1
    breakdown = Breakdown(vocab, [0, 3], [slice(1, 3), slice(4, 5)], "cpu")
    breakdown.add(ids, positions, energy, total, probed)
    fields = breakdown.fields(0, counts, (0.5, 0.75, 0.9))
    assert sum(fields["frequency_n_tokens"]) == sum(fields["position_n_tokens"]) == int(probed.sum())
    bucket_of_id = frequency_bucket_of_ids(counts).tolist()
    position_of = position_buckets(positions).tolist()
    for prefix, bucket_of_row in (
        ("frequency", lambda i: bucket_of_id[ids[i]]),
        ("position", lambda i: position_of[i]),
    ):
        for bucket, (share, control) in enumerate(
            zip(fields[f"{prefix}_energy_share"], fields[f"{prefix}_control_share"], strict=True)
        ):
            members = [i for i in range(n) if probed[i] and bucket_of_row(i) == bucket]
            if not members:
                assert share is None and control is None
                continue
            norm = sum(float(total[i]) for i in members)
            assert share == pytest.approx(sum(float(energy[i, 0]) for i in members) / norm)
            assert control == pytest.approx(sum(float(energy[i, 1:3].mean()) for i in members) / norm)
    default = breakdown.fields(1, None, (0.5,))  # buckets from the probed tokens themselves
    assert len(default["frequency_buckets"]) == 2 and sum(default["frequency_n_tokens"]) == int(probed.sum())


@pytest.mark.parametrize("arch", ["gpt_neox", "eurobert"])  # a causal LM, and a masked LM (ids before masking)
def test_the_probe_s_breakdown_equals_a_direct_computation_from_the_raw_gradients(arch, request, fit_texts, texts):
    import interpreto_anisotropy as ia
    from interpreto_anisotropy.metrics import count_token_frequencies
    from interpreto_anisotropy.tangents.controls import normal_control_bases

    mwsp = request.getfixturevalue(f"{arch}_mwsp")
    tangent = ia.PCATangent(mwsp, nb_concepts=4).fit(fit_texts[:12]).subspace
    probe = ia.GradientProbe(mwsp, seed=1)
    counts = count_token_frequencies(fit_texts[:12], mwsp.tokenizer)
    result = probe.run(texts[:10], tangent, n_controls=4, seed=2, token_counts=counts, progress=False)
    raw = probe.gradients(texts[:10])
    gradients = raw.gradients.double()
    energy = (gradients @ tangent.basis.double()).square().sum(1)
    controls = normal_control_bases(tangent, 4, seed=2).double()
    control_energy = torch.stack([(gradients @ basis).square().sum(1) for basis in controls]).mean(0)
    total = gradients.square().sum(1)
    table = torch.zeros(probe.point.vocab_size, dtype=torch.long)
    table[: counts.numel()] = counts[: table.numel()]
    for prefix, buckets in (
        ("frequency", frequency_bucket_of_ids(table)[raw.input_ids.cpu()]),
        ("position", position_buckets(raw.positions.cpu())),
    ):
        for bucket, (share, control, n_tokens) in enumerate(
            zip(
                result.to_dict()[f"{prefix}_energy_share"],
                result.to_dict()[f"{prefix}_control_share"],
                result.to_dict()[f"{prefix}_n_tokens"],
                strict=True,
            )
        ):
            members = (buckets == bucket).to(total.device)
            assert n_tokens == int(members.sum()), (prefix, bucket)
            if n_tokens == 0:
                assert share is None
                continue
            assert share == pytest.approx(float(energy[members].sum() / total[members].sum()), rel=1e-5)
            assert control == pytest.approx(float(control_energy[members].sum() / total[members].sum()), rel=1e-5)
    assert sum(result.frequency_n_tokens) == result.n_tokens
