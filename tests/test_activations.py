# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The activation reader against one full forward per unpadded text, and its early stop at the split point."""

from __future__ import annotations

import pytest
import torch

from interpreto_anisotropy.reading.activations import iter_token_activations, token_activations

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
