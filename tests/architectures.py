# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tiny, randomly initialised models of 24 Hugging Face architectures, built from configs (no Hub), float64.

Each `Family` names a model class, its config, the split point to probe (the first block's output, so that a
block, the final norm and the head lie above it), the objective it is trained with, and the tokenizer flavour:
"decoder" (byte-level BPE, no special token added to a text: Pythia-like) or "wrapped" (every text wrapped as
BOS ... EOS, with pad, mask and unk tokens: BERT-like, used by the encoders and by some decoders so that BOS
handling is checked on decoders too). Pad ids differ from 0 (1 or 2), so RoBERTa-style position offsets
(`padding_idx + 1`) are exercised with a non-zero padding index.

Used by the conformance matrix (`test_conformance.py`) and the docs-snippet test (`test_docs_snippets.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers as hf
from helpers.versions import skip_without

HIDDEN = 32
HEADS = 4
LAYERS = 2
FFN = 64
POSITIONS = 512
VOCAB = 384


@dataclass(frozen=True)
class Family:
    """One architecture of the matrix.

    Attributes:
        name: Short name, used as test id and in the docs table.
        model_class: The transformers class to build (with its head).
        config: Builds the config from (vocab size, pad id, bos id, eos id).
        split_point: Module path of the first block.
        objective: The probe's objective ("auto" resolves to the head's; a callable for headless models).
        tokenizer: "decoder" or "wrapped".
        kind: "decoder", "encoder" or "classifier" / "headless" (the docs table's grouping).
        positions: How the family numbers positions (the docs table's column).
        call: For a split point that runs several times per forward (ALBERT's shared layer), the call read and
            probed ("first", "last"); None for the others.
    """

    name: str
    model_class: str
    config: Callable[[int, int, int, int], Any]
    split_point: str
    objective: Any = "auto"
    tokenizer: str = "decoder"
    kind: str = "decoder"
    positions: str = "rotary"
    extra: dict = field(default_factory=dict)
    call: Any = None


def _common(vocab: int, pad: int, bos: int, eos: int) -> dict:
    return {"vocab_size": vocab, "pad_token_id": pad, "bos_token_id": bos, "eos_token_id": eos}


def _decoder(config_class: str, **extra: Any) -> Callable[[int, int, int, int], Any]:
    def build(vocab: int, pad: int, bos: int, eos: int) -> Any:
        return getattr(hf, config_class)(
            hidden_size=HIDDEN,
            intermediate_size=FFN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            max_position_embeddings=POSITIONS,
            tie_word_embeddings=False,
            **_common(vocab, pad, bos, eos),
            **extra,
        )

    return build


def _bert_like(config_class: str, **extra: Any) -> Callable[[int, int, int, int], Any]:
    def build(vocab: int, pad: int, bos: int, eos: int) -> Any:
        positions = POSITIONS + pad + 1 if config_class in _PADDING_OFFSET_CONFIGS else POSITIONS
        return getattr(hf, config_class)(
            hidden_size=HIDDEN,
            intermediate_size=FFN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            max_position_embeddings=positions,
            **_common(vocab, pad, bos, eos),
            **extra,
        )

    return build


_PADDING_OFFSET_CONFIGS = {"RobertaConfig", "XLMRobertaConfig", "CamembertConfig"}


def _gpt2(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.GPT2Config(
        n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=POSITIONS, **_common(vocab, pad, bos, eos)
    )


def _opt(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.OPTConfig(
        hidden_size=HIDDEN,
        ffn_dim=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=POSITIONS,
        word_embed_proj_dim=HIDDEN,
        **_common(vocab, pad, bos, eos),
    )


def _distilbert(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.DistilBertConfig(
        dim=HIDDEN,
        n_layers=LAYERS,
        n_heads=HEADS,
        hidden_dim=FFN,
        max_position_embeddings=POSITIONS,
        vocab_size=vocab,
        pad_token_id=pad,
    )


def _electra(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.ElectraConfig(
        embedding_size=HIDDEN,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=POSITIONS,
        vocab_size=vocab,
        pad_token_id=pad,
    )


def _modernbert(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.ModernBertConfig(
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=POSITIONS,
        local_attention=8,  # a sliding window shorter than the texts: local layers are exercised
        global_attn_every_n_layers=2,
        cls_token_id=bos,
        sep_token_id=eos,
        **_common(vocab, pad, bos, eos),
    )


def _deberta_v2(vocab: int, pad: int, bos: int, eos: int) -> Any:
    return hf.DebertaV2Config(
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=POSITIONS,
        relative_attention=True,
        position_buckets=16,
        max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        vocab_size=vocab,
        pad_token_id=pad,
    )


DECODERS = [
    Family("gpt2", "GPT2LMHeadModel", _gpt2, "transformer.h.0", positions="learned absolute"),
    Family(
        "opt",
        "OPTForCausalLM",
        _opt,
        "model.decoder.layers.0",
        tokenizer="wrapped",
        positions="learned absolute (offset 2)",
    ),
    Family("gpt_neox", "GPTNeoXForCausalLM", _decoder("GPTNeoXConfig"), "gpt_neox.layers.0"),
    Family(
        "llama",
        "LlamaForCausalLM",
        _decoder("LlamaConfig", num_key_value_heads=2),
        "model.layers.0",
        tokenizer="wrapped",
    ),
    Family(
        "mistral",
        "MistralForCausalLM",
        _decoder("MistralConfig", num_key_value_heads=2, sliding_window=8),
        "model.layers.0",
        positions="rotary, sliding window",
    ),
    Family(
        "qwen2",
        "Qwen2ForCausalLM",
        _decoder("Qwen2Config", num_key_value_heads=2),
        "model.layers.0",
        tokenizer="wrapped",
    ),
    Family("qwen3", "Qwen3ForCausalLM", _decoder("Qwen3Config", num_key_value_heads=2, head_dim=8), "model.layers.0"),
    Family(
        "gemma3",
        "Gemma3ForCausalLM",
        _decoder("Gemma3TextConfig", num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8, sliding_window=8),
        "model.layers.0",
        tokenizer="wrapped",
        positions="rotary, sliding window",
    ),
    Family(
        "phi",
        "PhiForCausalLM",
        _decoder("PhiConfig", partial_rotary_factor=0.5),
        "model.layers.0",
        positions="partial rotary",
    ),
    Family("olmo", "OlmoForCausalLM", _decoder("OlmoConfig"), "model.layers.0", tokenizer="wrapped"),
    Family("olmo2", "Olmo2ForCausalLM", _decoder("Olmo2Config"), "model.layers.0"),
]

ENCODERS = [
    Family(
        "bert",
        "BertForMaskedLM",
        _bert_like("BertConfig"),
        "bert.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute",
    ),
    Family(
        "roberta",
        "RobertaForMaskedLM",
        _bert_like("RobertaConfig"),
        "roberta.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute from padding_idx + 1",
    ),
    Family(
        "xlm_roberta",
        "XLMRobertaForMaskedLM",
        _bert_like("XLMRobertaConfig"),
        "roberta.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute from padding_idx + 1",
    ),
    Family(
        "camembert",
        "CamembertForMaskedLM",
        _bert_like("CamembertConfig"),
        "roberta.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute from padding_idx + 1",
    ),
    Family(
        "distilbert",
        "DistilBertForMaskedLM",
        _distilbert,
        "distilbert.transformer.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute",
    ),
    Family(
        "modernbert",
        "ModernBertForMaskedLM",
        _modernbert,
        "model.layers.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="rotary, local + global attention",
    ),
    Family(
        "eurobert",
        "EuroBertForMaskedLM",
        _bert_like("EuroBertConfig"),
        "model.layers.0",
        tokenizer="wrapped",
        kind="encoder",
    ),
    Family(
        "electra",
        "ElectraForMaskedLM",
        _electra,
        "electra.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute",
    ),
    Family(
        "deberta_v2",
        "DebertaV2ForMaskedLM",
        _deberta_v2,
        "deberta.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="relative (buckets)",
    ),
]


def _albert(call: str) -> Family:
    """ALBERT: one layer shared by all LAYERS layers, so its split point runs LAYERS times per forward."""
    return Family(
        f"albert_{call}",
        "AlbertForMaskedLM",
        _bert_like("AlbertConfig", embedding_size=HIDDEN),
        "albert.encoder.albert_layer_groups.0.albert_layers.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute",
        call=call,
    )


ENCODERS += [
    _albert("first"),
    _albert("last"),
    Family(
        "big_bird_full",
        "BigBirdForMaskedLM",
        _bert_like("BigBirdConfig", attention_type="original_full"),  # block-sparse attention pads inside: refused
        "bert.encoder.layer.0",
        tokenizer="wrapped",
        kind="encoder",
        positions="learned absolute",
    ),
]


def first_feature_loss(output: Any, batch: dict) -> torch.Tensor:
    """A custom objective for a headless encoder: per-token (h_0 - 1)^2 of the last hidden state, (b, l).

    (Not the squared norm: after the final LayerNorm it is nearly constant, and its gradient nearly zero.)
    """
    return (output.last_hidden_state[..., 0] - 1).square()


OTHERS = [
    Family(
        "gpt2_classifier",
        "GPT2ForSequenceClassification",
        _gpt2,
        "transformer.h.0",
        kind="classifier",
        positions="learned absolute",
    ),
    Family(
        "bert_headless",
        "BertModel",
        _bert_like("BertConfig"),
        "encoder.layer.0",
        objective=first_feature_loss,
        tokenizer="wrapped",
        kind="headless",
        positions="learned absolute",
    ),
]

FAMILIES = {family.name: family for family in [*DECODERS, *ENCODERS, *OTHERS]}


def build(family: Family, tokenizer: Any, *, seed: int = 0, layers: int = LAYERS) -> torch.nn.Module:
    """The family's model for `tokenizer`, float64, eval mode, the default (sdpa) attention, fixed seed.

    (Eager attention in float64 turns the padding rows of sliding-window layers into NaN: transformers adds two
    float64 minima into -inf. Float32 and sdpa are not affected.)
    """
    skip_without(family.model_class)
    torch.manual_seed(seed)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    config = family.config(len(tokenizer), tokenizer.pad_token_id, bos, tokenizer.eos_token_id)
    for name in ("num_hidden_layers", "n_layers"):
        if hasattr(config, name):
            setattr(config, name, layers)
    if family.kind == "classifier":
        config.num_labels = 2
    model = getattr(hf, family.model_class)(config)
    return model.double().eval()
