# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tiny tokenizers and models that mimic the paper's model families, for demos and tests."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerFast

from ..errors import InvalidInputError
from .corpus import check_int, parse_choice


class Arch(str, Enum):
    """Architectures of the toy models."""

    GPT_NEOX = "gpt_neox"
    LLAMA = "llama"
    EUROBERT = "eurobert"


class Task(str, Enum):
    """Heads a toy model can carry."""

    LM = "lm"
    SEQUENCE_CLASSIFICATION = "sequence_classification"


ENCODER_ARCHS = frozenset({Arch.EUROBERT})

# Special tokens, in the order they take the first vocabulary ids.
_DECODER_SPECIALS = {"eos": "<|endoftext|>", "pad": "<|padding|>", "replace": "[REPLACE]"}
_ENCODER_SPECIALS = {
    "bos": "<|begin_of_text|>",
    "eos": "<|end_of_text|>",
    "pad": "<|pad|>",
    "mask": "<|mask|>",
    "unk": "<|unk|>",
}

MIN_VOCAB_SIZE = 256 + len(_ENCODER_SPECIALS) + 1


def train_tokenizer(
    texts: Iterable[str], *, arch: str | Arch = "gpt_neox", vocab_size: int = 512, model_max_length: int = 512
) -> PreTrainedTokenizerFast:
    """Trains a tiny byte-level BPE tokenizer on ``texts``, with the special tokens of ``arch``'s family.

    Decoders (``"gpt_neox"``, ``"llama"``) get ``<|endoftext|>`` as bos/eos/unk and a ``<|padding|>`` pad token,
    padding on the right like Pythia's, plus a reserved ``[REPLACE]`` token (Interpreto's perturbation attributions
    mask words with it, and would otherwise add it and resize the embeddings). The encoder (``"eurobert"``) gets
    ``<|begin_of_text|>`` (bos, cls), ``<|end_of_text|>`` (eos, sep), ``<|pad|>``, ``<|mask|>`` and ``<|unk|>``, and
    wraps every text as ``<|begin_of_text|> ... <|end_of_text|>``. Byte-level BPE encodes any string (no text maps
    to the unknown token); the same texts give the same vocabulary.

    Args:
        texts: Training texts (at least one non-empty string).
        arch: Architecture family whose special tokens to use.
        vocab_size: Target vocabulary size, specials and the 256 byte symbols included.
        model_max_length: Length at which ``truncation=True`` cuts a text.

    Returns:
        A `transformers.PreTrainedTokenizerFast` that always has a pad token (save it with ``save_pretrained``).

    Raises:
        InvalidInputError: If ``arch`` is unknown, ``vocab_size`` is too small, or ``texts`` holds no non-empty string.

    Examples:
        >>> tok = train_tokenizer(["def f(x):\\n    return x"] * 10, arch="gpt_neox", vocab_size=300)
        >>> tok.pad_token
        '<|padding|>'
    """
    arch = parse_choice(arch, Arch, "toy architecture")
    check_int("vocab_size", vocab_size, minimum=MIN_VOCAB_SIZE)
    texts = [t for t in texts if isinstance(t, str) and t]
    if not texts:
        raise InvalidInputError("train_tokenizer needs at least one non-empty text.")

    specials = _ENCODER_SPECIALS if arch in ENCODER_ARCHS else _DECODER_SPECIALS
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(specials.values()), initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if arch in ENCODER_ARCHS:
        bos, eos = specials["bos"], specials["eos"]
        ids = [(bos, tokenizer.token_to_id(bos)), (eos, tokenizer.token_to_id(eos))]
        pair = f"{bos} $A {eos} $B:1 {eos}:1"
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A {eos}", pair=pair, special_tokens=ids
        )
        roles = {"bos_token": bos, "eos_token": eos, "cls_token": bos, "sep_token": eos, "pad_token": specials["pad"]}
        roles.update(mask_token=specials["mask"], unk_token=specials["unk"])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
        eos = specials["eos"]
        roles = {"bos_token": eos, "eos_token": eos, "unk_token": eos, "pad_token": specials["pad"]}
    padding = {"padding_side": "right", "model_max_length": model_max_length}
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **roles, **padding)


def _special_ids(arch: Arch, tokenizer: PreTrainedTokenizerFast | None, vocab_size: int) -> dict[str, int]:
    """Special token ids for the model config: the tokenizer's when given, else the ids `train_tokenizer` uses."""
    names = ("bos", "eos", "pad", "mask") if arch in ENCODER_ARCHS else ("bos", "eos", "pad")
    if tokenizer is None:
        order = list(_ENCODER_SPECIALS if arch in ENCODER_ARCHS else _DECODER_SPECIALS)
        return {name: order.index(name if name in order else "eos") for name in names}
    if tokenizer.pad_token_id is None:
        raise InvalidInputError(
            "The tokenizer has no pad token; set one (e.g. tokenizer.pad_token = tokenizer.eos_token)."
        )
    if arch in ENCODER_ARCHS and tokenizer.mask_token_id is None:
        raise InvalidInputError("A masked-LM encoder needs a tokenizer with a mask token.")
    if len(tokenizer) > vocab_size:
        raise InvalidInputError(f"vocab_size={vocab_size} is smaller than the tokenizer's {len(tokenizer)} tokens.")
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    ids = {"bos": bos if bos is not None else eos, "eos": eos if eos is not None else pad, "pad": pad}
    return {**ids, "mask": tokenizer.mask_token_id} if arch in ENCODER_ARCHS else ids


def _build_config(arch: Arch, common: dict[str, int], special_ids: dict[str, int]) -> PretrainedConfig:
    """The model config of `arch` for the `common` sizes (vocab_size, ..., num_labels) and the special ids."""
    hidden_size, num_heads = common["hidden_size"], common["num_attention_heads"]
    ids = {f"{name}_token_id": special_ids[name] for name in ("bos", "eos", "pad")}
    heads = {"num_key_value_heads": num_heads, "head_dim": hidden_size // num_heads}  # EuroBERT: no grouping
    if arch is Arch.GPT_NEOX:  # Pythia: parallel residual, rotary on a quarter of each head, untied embeddings
        extra = {"rotary_pct": 0.25, "use_parallel_residual": True, "hidden_dropout": 0.0, "attention_dropout": 0.0}
    elif arch is Arch.LLAMA:  # SmolLM2: pre-norm, tied embeddings, grouped-query attention when heads allow
        kv_heads = num_heads // 2 if num_heads % 2 == 0 and num_heads > 1 else num_heads
        extra = {**heads, "num_key_value_heads": kv_heads, "tie_word_embeddings": True}
    else:
        extra = {**heads, "mask_token_id": special_ids["mask"]}
    config = _transformers_class(arch, _MODEL_PREFIXES[arch] + "Config")
    return config(**{**common, **ids, "use_cache": False, "tie_word_embeddings": False, **extra})


# Names, not classes: they are looked up when a model is built, so that a transformers without EuroBERT (4.x)
# still builds the decoders.
_MODEL_PREFIXES = {Arch.GPT_NEOX: "GPTNeoX", Arch.LLAMA: "Llama", Arch.EUROBERT: "EuroBert"}


def _transformers_class(arch: Arch, name: str) -> type:
    """The class ``name`` of the installed transformers, or our error when that version lacks it (EuroBERT: 4.x)."""
    try:
        return getattr(transformers, name)
    except AttributeError:
        raise InvalidInputError(
            f"The toy architecture {arch.value!r} needs transformers.{name}, which transformers {transformers.__version__} does not have (EuroBERT comes with transformers 5): upgrade with `pip install 'transformers>=5,<6'`, or choose 'gpt_neox' or 'llama'."
        ) from None


def check_sizes(**sizes: object) -> None:
    """Checks sizes and counts (each None or a positive integer), and that the heads divide the width evenly."""
    for name, value in sizes.items():
        if value is not None:
            check_int(name, value)
    hidden_size, num_heads = sizes.get("hidden_size"), sizes.get("num_heads")
    if hidden_size is not None and num_heads is not None:
        if hidden_size % num_heads:
            raise InvalidInputError(f"hidden_size={hidden_size} must be a multiple of num_heads={num_heads}.")
        if (hidden_size // num_heads) % 2:
            raise InvalidInputError(
                f"The head size hidden_size / num_heads = {hidden_size // num_heads} must be even."
            )


def build_model(
    arch: str | Arch = "gpt_neox",
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position: int = 512,
    seed: int = 0,
    tokenizer: PreTrainedTokenizerFast | None = None,
    task: str | Task = "lm",
    num_labels: int = 2,
) -> PreTrainedModel:
    """Builds a randomly initialised tiny model of ``arch``, in float32 and eval mode.

    With ``task="lm"`` the decoders get a causal-LM head (``GPTNeoXForCausalLM``, ``LlamaForCausalLM``) and the
    encoder a masked-LM head (``EuroBertForMaskedLM``); with ``task="sequence_classification"`` each gets its
    ``...ForSequenceClassification`` head, as Interpreto's ``SplitterForClassification`` expects.
    The initialisation depends only on ``seed`` and leaves the global torch random state untouched.

    Args:
        arch: ``"gpt_neox"`` (Pythia-like), ``"llama"`` (SmolLM2-like) or ``"eurobert"`` (EuroBERT-like).
        vocab_size: Size of the embedding table; at least ``len(tokenizer)`` when a tokenizer is given.
        hidden_size: Width d of the residual stream; a multiple of ``num_heads``.
        num_layers: Number of transformer blocks.
        num_heads: Number of attention heads.
        intermediate_size: Width of the MLP; defaults to ``4 * hidden_size``.
        max_position: Longest sequence the model accepts.
        seed: Seed of the weight initialisation.
        tokenizer: Tokenizer whose bos/eos/pad/mask ids go into the config; without one, the ids that
            `train_tokenizer` gives for ``arch`` are used.
        task: ``"lm"`` or ``"sequence_classification"``.
        num_labels: Number of classes of a classification head.

    Returns:
        A `transformers.PreTrainedModel` in eval mode, float32, on the CPU.

    Raises:
        InvalidInputError: If ``arch`` or ``task`` is unknown, or a size is not a positive integer, or
            ``hidden_size`` is not a multiple of ``num_heads``, or ``vocab_size`` is below the tokenizer's size, or
            ``arch`` is ``"eurobert"`` under transformers 4.x (EuroBERT comes with transformers 5).
        InvalidInputError: If the tokenizer has no pad token (or no mask token, for the encoder).

    Examples:
        >>> tok = train_tokenizer(["Return the sum of x and y."] * 20, arch="llama", vocab_size=300)
        >>> model = build_model("llama", vocab_size=len(tok), hidden_size=32, num_heads=4, tokenizer=tok)
        >>> model.config.hidden_size
        32
    """
    arch, task = parse_choice(arch, Arch, "toy architecture"), parse_choice(task, Task, "task")
    if intermediate_size is None:
        intermediate_size = 4 * hidden_size if isinstance(hidden_size, int) else hidden_size
    sizes = {"hidden_size": hidden_size, "num_layers": num_layers, "num_heads": num_heads}
    sizes.update(intermediate_size=intermediate_size, max_position=max_position, num_labels=num_labels)
    check_sizes(vocab_size=vocab_size, **sizes)
    common = {"vocab_size": vocab_size, "hidden_size": hidden_size, "num_hidden_layers": num_layers}
    common.update(
        num_attention_heads=num_heads, intermediate_size=intermediate_size, max_position_embeddings=max_position
    )
    config = _build_config(arch, {**common, "num_labels": num_labels}, _special_ids(arch, tokenizer, vocab_size))
    head = "ForMaskedLM" if arch in ENCODER_ARCHS else "ForCausalLM"
    if task is Task.SEQUENCE_CLASSIFICATION:
        head = "ForSequenceClassification"
    model_class = _transformers_class(arch, _MODEL_PREFIXES[arch] + head)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    return model.to(dtype=torch.float32).eval()
