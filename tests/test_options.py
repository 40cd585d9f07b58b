# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Nonsense options are our errors, naming the option, instead of silent defaults or raw tracebacks."""

from __future__ import annotations

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
        ({"texts": "one long string"}, "texts must be a list of texts, not a single string"),
        ({"probe_texts": "one long string"}, "probe_texts must be a list of texts"),
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"n_controls": 0}, "n_controls must be a positive integer"),
        ({"seed": None}, r"seed must be an integer in \[0, 2\*\*32\), got None"),
        ({"seed": 2**70}, "seed must be an integer"),
        ({"seed": "abc"}, "seed must be an integer"),
        ({"max_fit_tokens": 0}, "max_fit_tokens must be a positive integer, got 0"),
        ({"max_tokens": 0}, "max_tokens must be a positive integer, got 0"),
        ({"max_metric_tokens": -5}, "max_metric_tokens must be a positive integer, got -5"),
        ({"nb_concepts": 0}, "nb_concepts must be a positive integer, got 0"),
    ],
)
def test_sweep_options(sweep_arguments, change, named):
    with pytest.raises(InvalidInputError, match=named):
        ia.CheckpointSweep(**{**sweep_arguments, **change})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"max_length": 0}, "max_length must be a positive integer, got 0"),
        ({"max_length": 10**6}, r"max_length=1000000 exceeds what GPTNeoXForCausalLM takes \(512 tokens"),
        ({"seed": -1}, "seed must be an integer"),
    ],
)
def test_probe_options(gpt_neox_mwsp, options, named):
    with pytest.raises(InvalidInputError, match=named):
        ia.GradientProbe(gpt_neox_mwsp, **options)


def test_reader_and_tangent_options(gpt_neox_mwsp, fit_texts):
    with pytest.raises(InvalidInputError, match="batch_size must be a positive integer, got 0"):
        ia.token_activations(gpt_neox_mwsp, fit_texts[:2], batch_size=0)
    with pytest.raises(InvalidInputError, match="max_length must be a positive integer, got 0"):
        ia.token_activations(gpt_neox_mwsp, fit_texts[:2], max_length=0)
    with pytest.raises(InvalidInputError, match="seed must be an integer"):
        ia.TangentExplainer(gpt_neox_mwsp, nb_concepts=4, method="ica", seed=2**40)


def test_too_many_controls_is_refused_before_any_memory_is_taken():
    tangent = ia.Subspace.random(768, 16, seed=0)
    with pytest.raises(InvalidInputError, match=r"n_controls=1000000 .* need 91.6 GiB .*fewer controls"):
        ia.normal_controls(tangent, n=10**6)


def test_complex_bases_and_activations_are_refused_naming_them():
    basis = torch.linalg.qr(torch.randn(8, 3, dtype=torch.complex64))[0]
    with pytest.raises(InvalidInputError, match="basis must be real, got dtype torch.complex64"):
        ia.Subspace(basis)
    with pytest.raises(InvalidInputError, match="must be real"):
        ia.metrics.isoscore_star(torch.randn(20, 4, dtype=torch.complex64))
