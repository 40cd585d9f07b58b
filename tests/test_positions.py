# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Position schemes per family, right alignment, fits on texts, and the warning on left-padded reads."""

from __future__ import annotations

import warnings

import pytest
import torch
from architectures import FAMILIES, VOCAB, build
from hypothesis import given, settings
from hypothesis import strategies as st
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer
from interpreto_anisotropy.reading.positions import (
    PositionConvention,
    PositionScheme,
    right_align,
    uses_absolute_positions,
)


@pytest.fixture(scope="module")
def tokenizers(corpus_texts):
    return {
        "decoder": train_tokenizer(corpus_texts, arch="gpt_neox", vocab_size=VOCAB),
        "wrapped": train_tokenizer(corpus_texts, arch="eurobert", vocab_size=VOCAB),
    }


@pytest.mark.parametrize(
    ("family", "convention", "absolute"),
    [
        ("gpt2", PositionConvention.FROM_ZERO, True),
        ("opt", PositionConvention.FROM_ZERO, True),
        ("bert", PositionConvention.FROM_ZERO, True),
        ("distilbert", PositionConvention.FROM_ZERO, True),
        ("roberta", PositionConvention.AFTER_PADDING_IDX, True),
        ("xlm_roberta", PositionConvention.AFTER_PADDING_IDX, True),
        ("camembert", PositionConvention.AFTER_PADDING_IDX, True),
        ("llama", PositionConvention.FROM_ZERO, False),
        ("eurobert", PositionConvention.FROM_ZERO, False),
        ("deberta_v2", PositionConvention.FROM_ZERO, False),
    ],
)
def test_each_family_gets_its_convention(family, convention, absolute, tokenizers):
    tokenizer = tokenizers[FAMILIES[family].tokenizer]
    model = build(FAMILIES[family], tokenizer)
    scheme = PositionScheme.of(model)
    assert scheme.convention is convention
    if convention is PositionConvention.AFTER_PADDING_IDX:
        assert scheme.padding_idx == tokenizer.pad_token_id == 2
    assert uses_absolute_positions(model) is absolute


def test_roberta_positions_equal_the_models_own_derivation():
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    ids = torch.tensor([[5, 6, 7, 1, 1], [8, 9, 1, 1, 1]])
    mask = (ids != 1).long()
    expected = RobertaEmbeddings.create_position_ids_from_input_ids(ids, padding_idx=1)
    assert torch.equal(
        PositionScheme(PositionConvention.AFTER_PADDING_IDX, padding_idx=1).position_ids(mask), expected
    )


def test_a_model_without_position_ids_in_its_forward_is_left_to_number_tokens():
    class NoPositions(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None):
            return input_ids

    assert PositionScheme.of(NoPositions()).position_ids(torch.ones(1, 3, dtype=torch.long)) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=5), st.integers(0, 3), st.booleans())
def test_right_align_keeps_each_rows_tokens_in_order(lengths, extra, left):
    width = max(lengths) + extra
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        columns = slice(width - length, width) if left else slice(0, length)
        ids[row, columns] = torch.arange(1, length + 1) * 10 + row
        mask[row, columns] = 1
    aligned = right_align({"input_ids": ids, "attention_mask": mask, "labels": torch.arange(len(lengths))})
    for row, length in enumerate(lengths):
        assert aligned["attention_mask"][row].tolist() == [1] * length + [0] * (width - length)
        assert aligned["input_ids"][row, :length].tolist() == (torch.arange(1, length + 1) * 10 + row).tolist()
    assert torch.equal(aligned["labels"], torch.arange(len(lengths)))


@pytest.mark.parametrize("method", ["pca", "svd"])
def test_fit_on_texts_equals_fit_on_the_readers_rows(method, tokenizers, fit_texts):
    family = FAMILIES["roberta"]
    model = build(family, tokenizers["wrapped"]).float()
    mwsp = ModelWithSplitPoints(model, split_point=family.split_point, tokenizer=tokenizers["wrapped"], batch_size=4)
    rows, _ = ia.token_activations(mwsp, fit_texts[:10], max_tokens=300)
    from_texts = ia.TangentExplainer(mwsp, nb_concepts=4, method=method).fit(fit_texts[:10], max_tokens=300).subspace
    from_rows = ia.TangentExplainer(mwsp, nb_concepts=4, method=method).fit(rows).subspace
    assert from_texts.principal_angles(from_rows).max() < 1e-4
    streamed = ia.PCATangent(mwsp, nb_concepts=4).partial_fit(fit_texts[:5]).partial_fit(fit_texts[5:10]).subspace
    assert streamed.principal_angles(ia.PCATangent(mwsp, nb_concepts=4).fit(fit_texts[:10]).subspace).max() < 1e-4


def test_fitting_on_a_left_padded_read_of_an_absolute_position_model_warns(tokenizers, fit_texts):
    family = FAMILIES["gpt2"]
    tokenizer = tokenizers["decoder"]
    mwsp = ModelWithSplitPoints(build(family, tokenizer).float(), split_point=family.split_point, tokenizer=tokenizer)
    token = ModelWithSplitPoints.activation_granularities.TOKEN
    try:
        activations, _ = mwsp.get_activations(fit_texts[:6], activation_granularity=token)
        assert mwsp.tokenizer.padding_side == "left"  # what Interpreto 0.5.2 leaves behind
        with pytest.warns(ia.errors.ReadingWarning, match=r"GPT2LMHeadModel.*tangent\.fit\(texts\)"):
            ia.PCATangent(mwsp, nb_concepts=4).fit(activations)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ia.PCATangent(mwsp, nb_concepts=4).fit(fit_texts[:6])  # texts are read right whatever the tokenizer
        assert mwsp.tokenizer.padding_side == "left"  # and the tokenizer is left as it was
    finally:
        tokenizer.padding_side = "right"
