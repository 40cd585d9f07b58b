# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The activation reader against one full forward per unpadded text, its early stop at the split point, and the
token ids it refuses (beyond the model's embedding)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from interpreto_anisotropy.errors import InvalidInputError, ReadingWarning
from interpreto_anisotropy.probing.probe import GradientProbe
from interpreto_anisotropy.reading.activations import iter_token_activations, token_activations
from interpreto_anisotropy.tangents.subspace import Subspace

ARCHS = ["gpt_neox", "llama", "eurobert"]


def _one_text_at_a_time(mwsp, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of every non-special token, from a full forward of each text alone (no padding, no batching)."""
    model, tokenizer = mwsp._model, mwsp.tokenizer
    store: dict = {}

    def hook(module, args, output):
        store["h"] = output[0] if isinstance(output, tuple) else output

    handle = model.get_submodule(mwsp.split_point).register_forward_hook(hook)
    rows, ids = [], []
    special = set(tokenizer.all_special_ids)
    try:
        for text in texts:
            input_ids = tokenizer(text, return_tensors="pt")["input_ids"]
            with torch.no_grad():
                model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
            keep = torch.tensor([token not in special for token in input_ids[0].tolist()])
            rows.append(store["h"][0][keep])
            ids.append(input_ids[0][keep])
    finally:
        handle.remove()
    return torch.cat(rows), torch.cat(ids)


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_equal_a_full_forward_of_each_text_alone(arch, request, texts):
    mwsp = request.getfixturevalue(f"{arch}_mwsp")
    expected_rows, expected_ids = _one_text_at_a_time(mwsp, texts[:7])
    rows, ids = token_activations(mwsp, texts[:7], batch_size=3)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(rows, expected_rows, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("max_tokens", [1, 37, 10_000])
def test_a_token_cap_keeps_the_first_rows(gpt_neox_mwsp, texts, max_tokens):
    everything, _ = token_activations(gpt_neox_mwsp, texts[:7], batch_size=2)
    capped, ids = token_activations(gpt_neox_mwsp, texts[:7], batch_size=2, max_tokens=max_tokens)
    assert capped.shape[0] == min(max_tokens, everything.shape[0]) == ids.shape[0]
    torch.testing.assert_close(capped, everything[: capped.shape[0]])


def test_the_layers_above_the_split_point_are_not_run(gpt_neox_mwsp, texts):
    model = gpt_neox_mwsp._model
    calls = {"head": 0, "split": 0}

    def count(name):
        def hook(module, args, output):
            calls[name] += 1

        return hook

    handles = [
        model.get_output_embeddings().register_forward_hook(count("head")),
        model.get_submodule(gpt_neox_mwsp.split_point).register_forward_hook(count("split")),
    ]
    try:
        batches = list(iter_token_activations(gpt_neox_mwsp, texts[:6], batch_size=2))
    finally:
        for handle in handles:
            handle.remove()
    assert len(batches) == 3 and calls == {"head": 0, "split": 3}
    model(input_ids=torch.tensor([[1, 2, 3]]))  # the model itself is left working
    assert calls["head"] == 0  # and unhooked


# ---------------------------------------------------------------------------------------------- another model's tokens
@pytest.fixture(scope="module")
def too_small_model(gpt_neox_model):
    """A 64-token GPT-NeoX with the 512-token toy tokenizer: its ids run past the embedding."""
    from interpreto import ModelWithSplitPoints

    from interpreto_anisotropy.demo import build_model

    _, tokenizer = gpt_neox_model
    model = build_model("gpt_neox", vocab_size=64, hidden_size=16, num_layers=2, num_heads=2, seed=0)
    return ModelWithSplitPoints(model, split_point=1, tokenizer=copy.deepcopy(tokenizer), batch_size=4)


def test_a_tokenizer_larger_than_the_embedding_is_our_error(too_small_model, texts):
    with pytest.raises(InvalidInputError, match=r"64 rows.*512 tokens"):
        token_activations(too_small_model, texts[:4])
    with pytest.raises(InvalidInputError, match="resize_token_embeddings"):
        GradientProbe(too_small_model, objective="causal_lm").run(texts[:4], Subspace.random(16, 2))


@pytest.mark.parametrize("bad_id", [64, -100])
def test_token_ids_outside_the_embedding_are_refused_before_any_forward(too_small_model, bad_id):
    ids = torch.tensor([[1, 2, 3], [4, bad_id, 5]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with pytest.raises(InvalidInputError, match=rf"id {bad_id}\b"):
        token_activations(too_small_model, inputs)
    inputs["input_ids"] = ids.clamp(0, 63)
    assert token_activations(too_small_model, inputs, include_special=True)[0].shape == (6, 16)


def test_the_reader_names_the_truncated_texts_once(gpt_neox_mwsp, texts):
    tokenizer = gpt_neox_mwsp.tokenizer
    lengths = [len(tokenizer(text)["input_ids"]) for text in texts[:6]]
    limit = sorted(lengths)[2]  # a text of exactly this length fits: it is not counted
    cut = sum(length > limit for length in lengths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows, _ = token_activations(gpt_neox_mwsp, texts[:6], max_length=limit, batch_size=2)
    notes = [str(item.message) for item in caught if "truncated to" in str(item.message)]
    assert [item.category for item in caught if "truncated to" in str(item.message)] == [ReadingWarning]
    assert 0 < cut < 6 and notes == [
        f"{cut} text(s) were longer than max_length={limit} tokens and were truncated to {limit} tokens (their "
        "later tokens are not read). Pass a larger max_length (up to the model's positions and its tokenizer's "
        "model_max_length), or split the texts."
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        token_activations(gpt_neox_mwsp, texts[:6], max_tokens=3, max_length=limit, batch_size=2)  # stops early
    read = sum(len(tokenizer(text)["input_ids"]) > limit for text in texts[:4])  # 2 batches read: 1 ahead
    notes = [str(item.message) for item in caught if "truncated to" in str(item.message)]
    assert [note.split(" text(s)")[0] for note in notes] == ([str(read)] if read else [])
