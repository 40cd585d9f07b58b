# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Nonsense options are our errors, naming the option, instead of silent defaults or raw tracebacks."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError


@pytest.fixture(scope="module")
def sweep_arguments(toy_checkpoints, fit_texts, texts, tmp_path_factory):
    return {
        "checkpoints": str(toy_checkpoints.out_dir / "checkpoint-*"),
        "split_point": 1,
        "texts": fit_texts[:8],
        "probe_texts": texts[:8],
        "nb_concepts": 4,
        "results_dir": tmp_path_factory.mktemp("options") / "sweep",
        "progress": False,
    }


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"texts": "one long string"}, r"\btexts\b.*string"),
        ({"probe_texts": "one long string"}, "probe_texts.*string"),
        ({"batch_size": 0}, r"batch_size.*\b0\b"),
        ({"n_controls": 0}, r"n_controls.*\b0\b"),
        ({"seed": None}, r"seed.*\[0, 2\*\*32\).*None"),
        ({"seed": 2**70}, r"seed.*2\*\*32"),
        ({"seed": "abc"}, "seed.*'abc'"),
        ({"max_fit_tokens": 0}, r"max_fit_tokens.*\b0\b"),
        ({"max_tokens": 0}, r"\bmax_tokens.*\b0\b"),
        ({"max_metric_tokens": -5}, "max_metric_tokens.*-5"),
        ({"nb_concepts": 0}, r"nb_concepts.*\b0\b"),
        (
            {"checkpoints": 5},
            r"checkpoints.*Checkpoint.*\bint\b",
        ),
        ({"split_point": None}, "split_point.*None"),
        ({"split_point": 1.5}, r"split_point.*1\.5"),
        ({"method": "xyz"}, "method.*'pca'.*'xyz'"),
        ({"results_dir": None}, "results_dir.*None"),
        ({"device": "quantum"}, "device.*'quantum'"),
        ({"method_kwargs": 5}, r"method_kwargs.*\b5\b"),
        (
            {"method": "ica", "method_kwargs": {"bogus": 1}},
            "'ica'.*'bogus'.*random_state",
        ),
        *[
            ({name: value}, rf"{name}.*{re.escape(repr(value))}")
            for name, value in [
                ("overwrite", "yes"),
                ("progress", "yes"),
                ("include_special", 2),
                ("recompute_changed", 1),
                ("skip_bad_checkpoints", "no"),
                ("early_without_init", None),
            ]
        ],
    ],
)
def test_sweep_options(sweep_arguments, change, named):
    with pytest.raises(InvalidInputError, match=named):
        ia.CheckpointSweep(**{**sweep_arguments, **change})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"batch_size": 0}, r"batch_size.*\b0\b"),
        ({"max_length": 0}, r"max_length.*\b0\b"),
        ({"max_length": 10**6}, r"max_length=1000000.*GPTNeoXForCausalLM.*max_length <= 512"),
        ({"seed": -1}, "seed.*-1"),
        ({"include_special": "no"}, "include_special.*'no'"),
        ({"distributed": 1}, r"distributed.*\b1\b"),
        # the causal objective uses no mask, but a bad masking rate is still refused, not ignored
        ({"objective": "causal_lm", "mlm_probability": float("nan")}, r"mlm_probability.*> 0 and < 1.*nan"),
        ({"mlm_probability": 1.5}, r"mlm_probability.*> 0 and < 1.*1\.5"),
        ({"mlm_probability": "0.2"}, r"mlm_probability.*> 0 and < 1.*'0\.2'"),
    ],
)
def test_probe_options(gpt_neox_mwsp, options, named):
    with pytest.raises(InvalidInputError, match=named):
        ia.GradientProbe(gpt_neox_mwsp, **options)


def test_reader_and_tangent_options(gpt_neox_mwsp, fit_texts):
    with pytest.raises(InvalidInputError, match=r"batch_size.*\b0\b"):
        ia.token_activations(gpt_neox_mwsp, fit_texts[:2], batch_size=0)
    with pytest.raises(InvalidInputError, match=r"max_length.*\b0\b"):
        ia.token_activations(gpt_neox_mwsp, fit_texts[:2], max_length=0)
    with pytest.raises(InvalidInputError, match=r"seed.*2\*\*32"):
        ia.TangentExplainer(gpt_neox_mwsp, nb_concepts=4, method="ica", seed=2**40)
    with pytest.raises(InvalidInputError, match="include_special.*'x'"):
        ia.token_activations(gpt_neox_mwsp, fit_texts[:2], include_special="x")
    with pytest.raises(InvalidInputError, match="nb_concepts.*True"):
        ia.PCATangent(gpt_neox_mwsp, nb_concepts=True)
    for rtol in (float("nan"), -1):
        with pytest.raises(InvalidInputError, match=rf"rtol.*{re.escape(repr(rtol))}"):
            ia.PCATangent(gpt_neox_mwsp, nb_concepts=4, rtol=rtol)
    with pytest.raises(InvalidInputError, match="device.*'quantum'"):
        ia.PCATangent(gpt_neox_mwsp, nb_concepts=4, device="quantum")


def test_a_keyword_the_tangent_method_does_not_take_is_refused_when_the_tangent_is_made(gpt_neox_mwsp):
    with pytest.raises(InvalidInputError, match="'ica'.*'bogus'.*random_state"):
        ia.ICATangent(gpt_neox_mwsp, nb_concepts=2, bogus=1)
    with pytest.raises(InvalidInputError, match="'pca'.*'top_k'"):
        ia.PCATangent(gpt_neox_mwsp, nb_concepts=2, top_k=3)
    with pytest.raises(InvalidInputError, match="'topk_sae'.*'colour'.*dictionary_params.*top_k"):
        ia.TopKSAETangent(gpt_neox_mwsp, nb_concepts=2, colour="red")
    assert ia.TopKSAETangent(gpt_neox_mwsp, nb_concepts=2, top_k=1).method_kwargs == {"top_k": 1}
    assert ia.ICATangent(gpt_neox_mwsp, nb_concepts=2, random_state=3).method_kwargs == {"random_state": 3}
    # overcomplete's NMF signatures end with **kwargs: they cannot say what they take, so nothing is refused
    assert ia.SemiNMFTangent(gpt_neox_mwsp, nb_concepts=2, max_iter=30).method_kwargs == {"max_iter": 30}


def test_too_many_controls_is_refused_before_any_memory_is_taken():
    tangent = ia.Subspace.random(768, 16, seed=0)
    with pytest.raises(InvalidInputError, match=r"n_controls=1000000.*91\.6 GiB"):
        ia.controls.normal_controls(tangent, n=10**6)


def test_complex_bases_and_activations_are_refused_naming_them():
    basis = torch.linalg.qr(torch.randn(8, 3, dtype=torch.complex64))[0]
    with pytest.raises(InvalidInputError, match=r"basis.*torch\.complex64"):
        ia.Subspace(basis)
    with pytest.raises(InvalidInputError, match=r"\bX\b.*complex64"):
        ia.metrics.isoscore_star(torch.randn(20, 4, dtype=torch.complex64))


NAN, INF = float("nan"), float("inf")
TRAINING_PROBE_BAD_OPTIONS = [  # (option, bad value, what the message must name besides them: the values allowed)
    *[("max_pending_bytes", value, "") for value in ("1GB", 0, -1, 1.5, NAN, INF, True)],
    *[("flush_seconds", value, "") for value in ("10", -1, NAN, INF, -INF, None)],
    *[("confidence", value, "") for value in ("0.9", 0, 1, 1.5, NAN)],
    *[("loss_scale", value, "") for value in ("1", 0, -1, NAN, INF)],
    *[("early_fraction", value, "") for value in ("0.3", 0, 1.5, NAN)],
    *[
        (name, value, "")
        for name in ("nb_concepts", "every", "n_controls", "n_bootstrap")
        for value in ("4", 0, -1, 1.5, NAN)
    ],
    *[("start_step", value, "") for value in ("3", -1, 1.5, NAN)],
    *[(name, value, "") for name in ("overwrite", "include_special") for value in ("no", 0, None)],
    ("results_dir", 3, ""),
    ("seed", NAN, r"2\*\*32"),
    *[
        (name, value, "")
        for name in ("early_steps", "total_steps", "refit_every", "n_random")
        for value in ("4", 0, 1.5, NAN)
    ],
    *[("call", value, "'first'.*'last'") for value in ("middle", 1.5, True)],
    ("on_nonfinite", "ignore", "'raise'.*'skip'"),
    ("reduction", "avg", "'sum'.*'mean'"),
    ("objective", "seq2seq", "'auto'.*'causal_lm'"),
]


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    TRAINING_PROBE_BAD_OPTIONS,
    ids=[f"{name}={value!r}" for name, value, _ in TRAINING_PROBE_BAD_OPTIONS],
)
def test_every_training_probe_option_is_checked(gpt_neox_training_model, name, value, allowed):
    model, tokenizer = gpt_neox_training_model
    options = {"total_steps": 10} if name == "early_fraction" else {"early_steps": 2}
    options[name] = value
    with pytest.raises(InvalidInputError, match=rf"\b{name}\b.*{allowed}.*{re.escape(repr(value))}"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, **options)


def test_a_training_probe_tokenizer_is_a_tokenizer_or_none(gpt_neox_training_model):
    model, tokenizer = gpt_neox_training_model
    for given in (5, "gpt2"):
        with pytest.raises(InvalidInputError, match=rf"tokenizer.*{type(given).__name__}"):
            ia.TrainingProbe(model, 1, tokenizer=given, early_steps=2)
    with_special = ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=2).special_ids
    assert sorted(with_special.tolist()) == sorted(set(tokenizer.all_special_ids))
    # None is by design: the tokenizer only names the special tokens left out, so every token is a row
    assert ia.TrainingProbe(model, 1, tokenizer=None, early_steps=2).special_ids.numel() == 0


LIVE_CONFIG_BAD_OPTIONS = [  # TrainingProbe's own arguments (start_step, overwrite, results_dir) are no settings
    case for case in TRAINING_PROBE_BAD_OPTIONS if case[0] not in ("start_step", "overwrite", "results_dir")
]


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    LIVE_CONFIG_BAD_OPTIONS,
    ids=[f"{name}={value!r}" for name, value, _ in LIVE_CONFIG_BAD_OPTIONS],
)
def test_every_live_setting_is_checked_when_the_config_is_made(name, value, allowed):
    with pytest.raises(InvalidInputError, match=rf"\b{name}\b.*{allowed}.*{re.escape(repr(value))}"):
        ia.LiveConfig(**{name: value})


def test_a_config_and_keywords_make_the_same_probe(gpt_neox_training_model):
    model, tokenizer = gpt_neox_training_model
    config = ia.LiveConfig(every=2, early_steps=4, n_controls=5, call="first", flush_seconds=0)
    by_config = ia.TrainingProbe(model, 1, tokenizer=tokenizer, config=config)
    by_keywords = ia.TrainingProbe(
        model, 1, tokenizer=tokenizer, every=2, early_steps=4, n_controls=5, call="first", flush_seconds=0
    )
    assert by_config.settings == by_keywords.settings == config
    assert by_config.config == by_keywords.config and by_config.config["call"] == "first"
    replaced = ia.TrainingProbe(model, 1, tokenizer=tokenizer, config=config, every=4, seed=7)
    assert (replaced.settings.every, replaced.settings.seed, replaced.settings.n_controls) == (4, 7, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.every = 3  # type: ignore[misc]
    with pytest.raises(InvalidInputError, match=r"\bn_control\b.*n_controls"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=4, n_control=5)
    with pytest.raises(InvalidInputError, match=r"config.*LiveConfig.*\bdict\b"):
        ia.TrainingProbe(model, 1, tokenizer=tokenizer, config={"every": 2})


def test_the_live_config_json_keeps_the_keys_results_written_before_call_have(gpt_neox_training_model):
    """A results directory written before `call` existed resumes: without `call`, config.json has the same keys."""
    model, tokenizer = gpt_neox_training_model
    probe = ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=4)
    assert list(probe.config) == [
        "live", "model", "split_points", "objective", "reduction", "reference", "every", "nb_concepts",
        "n_controls", "seed", "fit_until", "n_bootstrap", "confidence", "include_special",
    ]  # fmt: skip


def test_the_pending_bound_message_shows_small_sizes_in_bytes(gpt_neox_training_model, texts):
    from helpers.live_kit import float64_copy, micro_batch, train_step

    model, tokenizer = float64_copy(gpt_neox_training_model)
    probe = ia.TrainingProbe(model, 1, tokenizer=tokenizer, early_steps=100, max_pending_bytes=1000)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with pytest.raises(
        InvalidInputError,
        match=r"\d+(\.\d+)? [KMG]iB.*max_pending_bytes=1000 \(1000 bytes\)",
    ):
        with probe:
            train_step(model, probe, [micro_batch(tokenizer, texts[:2], start=0)], optimizer)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        *[({"confidence": value}, rf"confidence.*{re.escape(repr(value))}") for value in ("0.9", 0, 1, NAN)],
        *[({"max_tokens": value}, rf"max_tokens.*{re.escape(repr(value))}") for value in ("10", 0, 1.5)],
        *[({"n_controls": value}, rf"n_controls.*{re.escape(repr(value))}") for value in (True, 0, NAN)],
        *[({"seed": value}, rf"seed.*\[0, 2\*\*32\).*{re.escape(repr(value))}") for value in (NAN, -1, 1.5)],
    ],
)
def test_probe_run_options(gpt_neox_mwsp, texts, options, named):
    tangent = ia.Subspace.random(64, 2, seed=0)
    with pytest.raises(InvalidInputError, match=named):
        ia.GradientProbe(gpt_neox_mwsp).run(texts[:4], tangent, **{"n_controls": 2, "progress": False, **options})
