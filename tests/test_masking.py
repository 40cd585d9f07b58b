# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Masking as a setting: `MaskedLM`'s rate and split measured over many draws, its draws identical to the code it
replaced (the probe's per-sequence masks and the toy trainer's per-batch masks), and the objective accepted wherever
an objective is."""

from __future__ import annotations

import json
import math

import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.masking import MaskedLM, resolve_masking, special_tokens_mask
from interpreto_anisotropy.probing.objectives import MaskedLMObjective, make_objective

N_DRAWS = 200_000
SIGMAS = 5  # a binomial count off by more than 5 standard deviations happens with probability < 1e-6


def _within_binomial(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= SIGMAS * math.sqrt(n * p * (1 - p)) + 1


class _Tokenizer:
    """The tokenizer fields the objective reads: a mask id, the special ids and the vocabulary size."""

    mask_token_id = 3
    all_special_ids = [0, 1, 2, 3]

    def __len__(self) -> int:
        return 500


# --------------------------------------------------------------------------------------------------------------------
# the rate and the split, measured


@pytest.mark.parametrize("rate", [0.15, 0.3, 0.5])
def test_the_selected_share_is_the_rate_within_a_binomial_band(rate):
    generator = torch.Generator().manual_seed(0)
    selected = MaskedLM(rate=rate).select(torch.ones(N_DRAWS, dtype=torch.bool), generator)
    assert _within_binomial(int(selected.sum()), N_DRAWS, rate)


@pytest.mark.parametrize(("mask", "random", "keep"), [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.5, 0.25, 0.25)])
def test_the_corruption_split_is_measured_back(mask, random, keep):
    vocab_size = 2**40  # a random token equals the original with probability 2**-40: never, here
    ids = torch.arange(N_DRAWS, dtype=torch.long) + 10
    generator = torch.Generator().manual_seed(1)
    masking = MaskedLM(rate=0.5, mask=mask, random=random, keep=keep)
    corrupted = masking.corrupt(ids, torch.ones_like(ids, dtype=torch.bool), generator, vocab_size=vocab_size,
                                mask_token_id=-1)  # fmt: skip
    masked = int((corrupted == -1).sum())
    kept = int((corrupted == ids).sum())
    randomised = N_DRAWS - masked - kept
    for count, share in ((masked, mask), (randomised, random), (kept, keep)):
        assert _within_binomial(count, N_DRAWS, share), (count, share)


def test_only_candidates_are_selected_and_unselected_tokens_are_untouched():
    generator = torch.Generator().manual_seed(2)
    candidates = torch.rand(1000, generator=generator) < 0.5
    masking = MaskedLM(rate=0.4)
    selected = masking.select(candidates, generator)
    assert not (selected & ~candidates).any()
    ids = torch.arange(1000) + 5
    corrupted = masking.corrupt(ids, selected, generator, vocab_size=50, mask_token_id=0)
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_at_least_one_selects_the_candidate_with_the_smallest_draw():
    candidates = torch.tensor([False, True, True, False, True])
    draws = torch.rand(5, generator=torch.Generator().manual_seed(3))
    expected = int(torch.where(candidates, draws, 2.0).argmin())
    selected = MaskedLM(rate=1e-9).select(candidates, torch.Generator().manual_seed(3), at_least_one=True)
    assert selected.tolist() == [i == expected for i in range(5)]
    none = MaskedLM(rate=1e-9).select(torch.zeros(4, dtype=torch.bool), torch.Generator(), at_least_one=True)
    assert not none.any()


def test_special_tokens_mask_finds_every_special_id():
    ids = torch.tensor([[0, 7, 3], [9, 2, 1]])
    assert special_tokens_mask(ids, [3, 0, 1, 2, 3]).tolist() == [[True, False, True], [False, True, True]]


# --------------------------------------------------------------------------------------------------------------------
# the draws are those of the code the helper replaced (golden files and toy checkpoints keep their numbers)


def _old_probe_prepare(input_ids, attention, sequence_ids, tokenizer, *, rate, seed):
    """The masked-LM objective's masking before `MaskedLM` existed (80/10/10 hard-coded), kept as the reference."""
    candidates = attention.bool() & ~torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    labels = torch.full_like(input_ids, -100)
    corrupted = input_ids.clone()
    for row, sequence_id in enumerate(sequence_ids.tolist()):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + int(sequence_id))
        positions = candidates[row].nonzero().flatten()
        if positions.numel() == 0:
            continue
        draws = torch.rand(positions.numel(), generator=generator)
        chosen = draws < rate
        if not chosen.any():
            chosen[draws.argmin()] = True
        selected = positions[chosen]
        replacement = torch.rand(selected.numel(), generator=generator)
        random_tokens = torch.randint(len(tokenizer), (selected.numel(),), generator=generator)
        labels[row, selected] = input_ids[row, selected]
        values = input_ids[row, selected].clone()
        values[replacement < 0.8] = tokenizer.mask_token_id
        randomised = (replacement >= 0.8) & (replacement < 0.8 + 0.1)
        values[randomised] = random_tokens[randomised]
        corrupted[row, selected] = values
    return corrupted, labels


def _old_trainer_masking(input_ids, tokenizer, *, rate, generator):
    """The toy trainer's masking before `MaskedLM` existed, kept as the reference."""
    labels = input_ids.clone()
    special = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < rate) & ~special
    labels[~chosen] = -100
    draw = torch.rand(input_ids.shape, generator=generator)
    random_tokens = torch.randint(len(tokenizer), input_ids.shape, generator=generator)
    corrupted = input_ids.clone()
    corrupted[chosen & (draw < 0.8)] = tokenizer.mask_token_id
    randomised = chosen & (draw >= 0.8) & (draw < 0.8 + 0.1)
    corrupted[randomised] = random_tokens[randomised]
    return corrupted, labels


def _batch(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 500, (6, 40), generator=generator)
    ids[:, 0], ids[:, -1] = 1, 2
    attention = torch.ones_like(ids)
    attention[2, 30:] = 0
    return ids, attention


@pytest.mark.parametrize("rate", [0.15, 0.3, 0.02])
def test_the_probe_masks_are_those_of_the_code_it_replaced(rate):
    ids, attention = _batch()
    sequence_ids = torch.arange(10, 16)
    objective = make_objective(MaskedLM(rate=rate), seed=5)
    prepared = objective.prepare({"input_ids": ids, "attention_mask": attention}, sequence_ids=sequence_ids,
                                 tokenizer=_Tokenizer())  # fmt: skip
    corrupted, labels = _old_probe_prepare(ids, attention, sequence_ids, _Tokenizer(), rate=rate, seed=5)
    assert torch.equal(prepared["input_ids"], corrupted)
    assert torch.equal(prepared["labels"], labels)
    assert torch.equal(prepared["original_input_ids"], ids)


@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_the_trainer_masks_are_those_of_the_code_it_replaced(rate):
    from interpreto_anisotropy.demo.train import _mask_tokens

    ids, _ = _batch(1)
    new = _mask_tokens(ids, _Tokenizer(), masking=MaskedLM(rate=rate), generator=torch.Generator().manual_seed(9))
    old = _old_trainer_masking(ids, _Tokenizer(), rate=rate, generator=torch.Generator().manual_seed(9))
    assert torch.equal(new[0], old[0]) and torch.equal(new[1], old[1])


def test_a_sequence_mask_depends_on_the_seed_and_its_index_only():
    ids, attention = _batch()
    objective = make_objective(MaskedLM(rate=0.3), seed=2)
    whole = objective.prepare({"input_ids": ids, "attention_mask": attention}, sequence_ids=torch.arange(6),
                              tokenizer=_Tokenizer())  # fmt: skip
    alone = objective.prepare({"input_ids": ids[4:5], "attention_mask": attention[4:5]},
                              sequence_ids=torch.tensor([4]), tokenizer=_Tokenizer())  # fmt: skip
    assert torch.equal(whole["input_ids"][4], alone["input_ids"][0])
    other_seed = make_objective(MaskedLM(rate=0.3), seed=3).prepare(
        {"input_ids": ids, "attention_mask": attention}, sequence_ids=torch.arange(6), tokenizer=_Tokenizer()
    )
    assert not torch.equal(whole["labels"], other_seed["labels"])


# --------------------------------------------------------------------------------------------------------------------
# the setting: checked, described, accepted wherever an objective is


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"rate": 0.0}, "rate"),
        ({"rate": 1.0}, "rate"),
        ({"rate": "0.3"}, "rate"),
        ({"rate": True}, "rate"),
        ({"mask": -0.1, "random": 0.6, "keep": 0.5}, "mask"),
        ({"random": float("nan")}, "random"),
        ({"mask": 0.8, "random": 0.1, "keep": 0.2}, r"mask \+ random \+ keep.*= 1\.1"),
    ],
)
def test_bad_settings_raise_our_error_naming_the_option(options, named):
    with pytest.raises(InvalidInputError, match=named):
        MaskedLM(**options)


def test_the_description_is_stable_json_and_round_trips():
    masking = MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0)
    assert json.loads(json.dumps(masking.to_dict())) == {
        "objective": "masked_lm", "rate": 0.3, "mask": 1.0, "random": 0.0, "keep": 0.0,
    }  # fmt: skip
    assert MaskedLM.from_dict(masking.to_dict()) == masking
    assert str(MaskedLM()) == "masked_lm(rate=0.15, mask=0.8, random=0.1, keep=0.1)"
    assert MaskedLM().is_bert_split and not masking.is_bert_split
    with pytest.raises(InvalidInputError, match="'ratio'"):
        MaskedLM.from_dict({"rate": 0.3, "ratio": 0.1})
    with pytest.raises(InvalidInputError, match="causal_lm"):
        MaskedLM.from_dict({"objective": "causal_lm"})


def test_the_default_is_what_masked_lm_always_was():
    assert make_objective("masked_lm").masking == MaskedLM(rate=0.15, mask=0.8, random=0.1, keep=0.1)
    assert make_objective("masked_lm", mlm_probability=0.3).masking == MaskedLM(rate=0.3)
    described = make_objective(MaskedLM(rate=0.3), seed=7).describe()
    assert described == {
        "objective": "masked_lm", "reduction": "sum", "mlm_probability": 0.3,
        "mask_split": {"mask": 0.8, "random": 0.1, "keep": 0.1}, "mask_seed": 7,
    }  # fmt: skip


def test_the_rate_is_given_once():
    assert resolve_masking(MaskedLM(rate=0.3), 0.3) == MaskedLM(rate=0.3)
    with pytest.raises(InvalidInputError, match=r"mlm_probability=0\.15.*rate=0\.3"):
        make_objective(MaskedLM(rate=0.3), mlm_probability=0.15)
    with pytest.raises(InvalidInputError, match="mlm_probability"):
        MaskedLMObjective(mlm_probability=1.5)
    with pytest.raises(InvalidInputError, match="MaskedLM"):
        MaskedLMObjective(masking=0.3)


def test_masked_lm_settings_are_checked_against_the_model_head(gpt_neox_model):
    model, _ = gpt_neox_model
    with pytest.raises(InvalidInputError, match="causal_lm"):
        make_objective(MaskedLM(rate=0.3), model=model)


def test_the_probe_takes_masked_lm_settings_and_masks_at_that_rate(eurobert_mwsp, texts):
    default = ia.GradientProbe(eurobert_mwsp, objective="masked_lm", seed=1).gradients(texts[:8])
    same = ia.GradientProbe(eurobert_mwsp, objective=MaskedLM(), seed=1).gradients(texts[:8])
    assert torch.equal(default.gradients, same.gradients) and torch.equal(default.masked, same.masked)
    heavy = ia.GradientProbe(eurobert_mwsp, objective=MaskedLM(rate=0.5), seed=1).gradients(texts)
    n = heavy.masked.numel()
    assert _within_binomial(int(heavy.masked.sum()), n, 0.5)
    assert not torch.equal(heavy.masked[: default.masked.numel()], default.masked)


def test_the_trainer_takes_masked_lm_settings(tmp_path):
    from interpreto_anisotropy.demo import train_toy

    tiny = {"arch": "eurobert", "steps": 2, "checkpoint_steps": [2], "hidden_size": 16, "num_layers": 1,
            "num_heads": 2, "vocab_size": 300, "seq_len": 16, "batch_size": 2, "max_train_texts": 60,
            "progress": False}  # fmt: skip
    shorthand = train_toy(tmp_path / "a", mlm_probability=0.3, **tiny)
    setting = train_toy(tmp_path / "b", masking=MaskedLM(rate=0.3), **tiny)
    assert shorthand.losses == setting.losses
    state = json.loads((tmp_path / "b" / "trainer_state.json").read_text())["toy_config"]
    assert state["mlm_probability"] == 0.3 and "mlm_split" not in state  # BERT's split, recorded as before
    other = train_toy(tmp_path / "c", masking=MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0), **tiny)
    state = json.loads((tmp_path / "c" / "trainer_state.json").read_text())["toy_config"]
    assert state["mlm_split"] == {"mask": 1.0, "random": 0.0, "keep": 0.0}
    assert other.losses != setting.losses
    with pytest.raises(InvalidInputError, match=r"mlm_probability=0\.2.*rate=0\.3"):
        train_toy(tmp_path / "d", masking=MaskedLM(rate=0.3), mlm_probability=0.2, **tiny)


def test_a_sweep_takes_masked_lm_settings_seeded_by_its_seed(tmp_path, fit_texts, texts):
    from interpreto_anisotropy.demo import train_toy

    run = train_toy(tmp_path / "enc", arch="eurobert", steps=2, checkpoint_steps=[0, 2], hidden_size=16,
                    num_layers=2, num_heads=2, vocab_size=300, seq_len=16, batch_size=2, max_train_texts=60,
                    progress=False)  # fmt: skip

    def rows(objective, name):
        sweep = ia.CheckpointSweep(
            str(run.out_dir / "checkpoint-*"), split_point=1, texts=fit_texts[:8], probe_texts=texts[:6],
            objective=objective, nb_concepts=2, n_controls=2, seed=4, max_fit_tokens=300, max_metric_tokens=200,
            results_dir=tmp_path / name, progress=False,
        )  # fmt: skip
        return [row["energy_share"] for row in sweep.run().rows]

    assert rows(MaskedLM(), "default") == rows("masked_lm", "named")
    assert rows(MaskedLM(rate=0.5), "heavy") != rows("masked_lm", "named")


def test_an_objective_is_described_stably_for_a_sweeps_settings():
    from interpreto_anisotropy.probing.objectives import ObjectiveName, describe_objective

    def eos_logit(output, batch):
        return output.logits.sum()

    assert describe_objective("auto") == "auto" and describe_objective(ObjectiveName.CAUSAL_LM) == "causal_lm"
    assert describe_objective(MaskedLM()) == describe_objective("masked_lm") == "masked_lm"
    described = describe_objective(MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0))
    assert json.loads(json.dumps(described)) == described
    assert MaskedLM.from_dict(described) == MaskedLM(rate=0.3, mask=1.0, random=0.0, keep=0.0)
    assert describe_objective(MaskedLM(rate=0.3)) != describe_objective(MaskedLM(rate=0.5))
    assert describe_objective(eos_logit) == "eos_logit" and describe_objective(MaskedLMObjective()) == "callable"
