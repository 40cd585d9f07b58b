# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What depends on the installed transformers: the toy decoders build on 4.x and 5.x, the EuroBERT toy encoder needs
5.x and, under 4.x, is our error saying to upgrade (`make test-compat` runs this on both)."""

from __future__ import annotations

import pytest
import transformers

from interpreto_anisotropy.demo import build_model
from interpreto_anisotropy.errors import InvalidInputError

SIZES = {"vocab_size": 300, "hidden_size": 32, "num_heads": 4}


@pytest.mark.parametrize(("arch", "model_class"), [("gpt_neox", "GPTNeoXForCausalLM"), ("llama", "LlamaForCausalLM")])
def test_the_toy_decoders_build_on_any_supported_transformers(arch, model_class):
    assert type(build_model(arch, **SIZES)).__name__ == model_class


def test_the_eurobert_toy_encoder_builds_on_transformers_5_and_says_to_upgrade_on_4():
    if hasattr(transformers, "EuroBertConfig"):
        assert type(build_model("eurobert", **SIZES)).__name__ == "EuroBertForMaskedLM"
        return
    with pytest.raises(InvalidInputError, match=r"(?s)'eurobert'.*EuroBertConfig.*transformers>=5"):
        build_model("eurobert", **SIZES)
