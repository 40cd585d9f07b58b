# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Which positions of a training batch are rows, and how many loss terms a mean divides by.

Recomputed another way: the number of loss terms is what the model's own mean loss divides by (its `loss` times
the count equals the summed cross-entropy); the rows of a batch without prompt masking are the probe's
(`CausalLMObjective.probed_tokens` and the token policy); with prompt masking, the positions before a target.
"""

from __future__ import annotations

import copy

import torch

from interpreto_anisotropy.live.tokens import loss_rows, loss_terms
from interpreto_anisotropy.probing.objectives import CausalLMObjective, ObjectiveName
from interpreto_anisotropy.reading.batching import special_token_ids, token_rows

NONE = torch.zeros(0, dtype=torch.long)


def _batch():
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, :2] = -100  # a prompt: tokens 0 and 1 are not targets
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def test_causal_rows_are_the_positions_before_a_target():
    batch = _batch()
    rows = loss_rows(batch, ObjectiveName.CAUSAL_LM, NONE, include_special=False)
    assert rows.tolist() == [[False, True, True, True, False], [True, True, False, False, False]]
    unmasked = {**batch, "labels": batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)}
    probe_rows = CausalLMObjective().probed_tokens(unmasked) & token_rows(
        unmasked["input_ids"], unmasked["attention_mask"], NONE
    )
    assert torch.equal(loss_rows(unmasked, ObjectiveName.CAUSAL_LM, NONE, include_special=False), probe_rows)


def test_masked_rows_read_the_original_tokens_and_leave_special_ones_out(eurobert_training_model):
    _, tokenizer = eurobert_training_model
    specials = special_token_ids(tokenizer)
    ids = torch.tensor([[tokenizer.bos_token_id, 20, 21, 22, tokenizer.eos_token_id]])
    corrupted = ids.clone()
    corrupted[0, 2] = tokenizer.mask_token_id
    labels = torch.full_like(ids, -100)
    labels[0, 2] = 21
    batch = {"input_ids": corrupted, "attention_mask": torch.ones_like(ids), "labels": labels}
    rows = loss_rows(batch, ObjectiveName.MASKED_LM, specials, include_special=False)
    assert rows.tolist() == [[False, True, True, True, False]]  # the masked position is a row, BOS and EOS are not
    assert int(loss_terms(batch, ObjectiveName.MASKED_LM)) == 1


def test_loss_terms_are_what_the_models_mean_divides_by(gpt_neox_training_model):
    model = copy.deepcopy(gpt_neox_training_model[0]).double().requires_grad_(True)  # a wrapped fixture is frozen
    batch = _batch()
    output = model(**batch)
    logits = output.logits[:, :-1].flatten(0, 1)
    summed = torch.nn.functional.cross_entropy(logits, batch["labels"][:, 1:].flatten(), reduction="sum")
    terms = loss_terms(batch, ObjectiveName.CAUSAL_LM)
    assert int(terms) == 5
    assert torch.allclose(output.loss.double() * terms, summed, rtol=1e-6)  # the model reduces in float32
