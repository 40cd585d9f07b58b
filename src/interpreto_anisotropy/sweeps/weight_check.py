# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A checkpoint's config checked against its weights' names and shapes before any real tensor is allocated.

Examples:
    >>> check_config("runs/toy/checkpoint-8", config, model_class, label="step-8")  # doctest: +SKIP
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from ..commons.json_files import load_json
from ..errors import CheckpointError, RandomWeightsWarning

__all__ = ["check_config", "check_config_file", "weight_shapes"]

#: A numbered block in a weight name (`gpt_neox.layers.3.`, `model.layers.3.`, `transformer.h.3.`,
#: `bert.encoder.layer.3.`): the container's path and the block's index.
_BLOCK = re.compile(r"^(?P<container>(?:.*\.)?(?:layers|layer|h|blocks|block))\.(?P<index>\d+)\.")
#: Input embedding weights, whose second dimension is the hidden size.
_EMBEDDINGS = (
    "embed_in.weight",
    "embed_tokens.weight",
    "wte.weight",
    "word_embeddings.weight",
    "tok_embeddings.weight",
)


#: config.json's spellings of the sizes checked (GPT-2's, T5's and others' next to the usual one).
_SIZES = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "num_heads"),
    "kv_heads": ("num_key_value_heads",),
    "positions": ("max_position_embeddings", "n_positions"),
}


def check_config_file(folder: str | Path, *, label: str) -> None:
    """Refuses a config.json whose sizes cannot describe a model, before transformers reads it.

    Args:
        folder: The checkpoint's folder.
        label: The checkpoint's name, for messages.

    Raises:
        CheckpointError: Naming the folder, the key and its value.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        return
    values = load_json(
        path, error=CheckpointError, advice=f"Fix or replace the config.json of checkpoint {label}.", finite=False
    )
    if not isinstance(values, dict):
        return
    where = f"Checkpoint {label} ({folder})"
    found = {size: next(((k, values[k]) for k in keys if k in values), None) for size, keys in _SIZES.items()}
    for key, value in filter(None, found.values()):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(
                f"{where}: config.json gives {key} = {value!r}, which must be a positive integer. Fix config.json "
                "(compare it with the config of the run that wrote the weights)."
            )
    architectures = values.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list) or not all(isinstance(name, str) for name in architectures)
    ):
        raise CheckpointError(
            f"{where}: config.json gives architectures = {architectures!r}, which must be a list of class names "
            '(e.g. ["GPTNeoXForCausalLM"]). Fix config.json.'
        )
    _check_divides(found["heads"], found["hidden"], where, only_if=values.get("head_dim") is None)
    _check_divides(found["kv_heads"], found["heads"], where)


def _check_divides(
    part: tuple[str, int] | None, whole: tuple[str, int] | None, where: str, only_if: bool = True
) -> None:
    if part is not None and whole is not None and only_if and whole[1] % part[1]:
        raise CheckpointError(
            f"{where}: config.json gives {whole[0]} = {whole[1]}, which {part[0]} = {part[1]} does not divide. "
            "Fix config.json."
        )


def check_config(folder: str | Path, config: Any, model_class: Any, *, label: str, strict: bool = True) -> None:
    """Refuses a config that contradicts its checkpoint's weights, before the model is built.

    Args:
        folder: The checkpoint's folder (its weight files are read there).
        config: Its loaded `PretrainedConfig`.
        model_class: The class that will load it (an `AutoModel*` or a model class).
        label: The checkpoint's name, for messages.
        strict: As `load_checkpoint`'s: a config naming layers the weights lack is refused (False: a warning, and
            every layer is built, the missing ones random).

    Raises:
        CheckpointError: More layers than the weights hold (`strict`), an embedding of another width than the
            hidden size, a config the model class cannot build, or a weight whose shape is not the config's; the
            message names the folder, the config key and what the weights say.
    """
    where = f"Checkpoint {label} ({folder})"
    shapes = weight_shapes(folder)
    if not shapes:
        return
    _check_embedding(config, shapes, where)
    if _check_layers(config, shapes, where, strict):  # else (strict=False) the build is as long as the config says
        _check_meta_build(config, model_class, shapes, where)


def weight_shapes(folder: str | Path) -> dict[str, tuple[int, ...]] | None:
    """The name and shape of every weight of a checkpoint folder, read without the tensors' data."""
    root = Path(folder)
    for suffix, reader in ((".safetensors", _safetensors_shapes), (".bin", _bin_shapes)):
        files = _weight_files(root, suffix)
        if files:
            try:
                return {name: shape for file in files for name, shape in reader(file).items()}
            except Exception:  # noqa: BLE001  (unreadable files: from_pretrained names the failure)
                return None
    return None


# --------------------------------------------------------------------------------------------------------------------
# reading the weights


def _weight_files(root: Path, suffix: str) -> list[Path]:
    """The weight files of one format: a sharded checkpoint's from its index, else the unsharded file."""
    stem = "model" if suffix == ".safetensors" else "pytorch_model"
    index = root / f"{stem}{suffix}.index.json"
    if index.is_file():
        try:
            shards = sorted(set(load_json(index, error=CheckpointError, finite=False)["weight_map"].values()))
        except (KeyError, AttributeError, TypeError):
            return []
        return [root / shard for shard in shards if (root / shard).is_file()]
    single = [root / f"{stem}{suffix}", root / f"model{suffix}"]
    return [path for path in single if path.is_file()][:1]


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118


def _bin_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    import torch

    state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
    return {name: tuple(value.shape) for name, value in state.items() if isinstance(value, torch.Tensor)}


# --------------------------------------------------------------------------------------------------------------------
# the checks


def _key(config: Any, attribute: str) -> str:
    """How config.json spells an attribute (GPT-2's `n_layer` for `num_hidden_layers`)."""
    spelled = {value: key for key, value in (getattr(config, "attribute_map", None) or {}).items()}.get(attribute)
    return f"{spelled} ({attribute})" if spelled else attribute


def _check_layers(config: Any, shapes: dict[str, tuple[int, ...]], where: str, strict: bool) -> bool:
    """No more layers in the config than the weights hold (counted in their one container of numbered blocks);
    False when there are more and `strict` is off (a warning)."""
    claimed = getattr(config, "num_hidden_layers", None)
    blocks: dict[str, set[int]] = {}
    for name in shapes:
        if match := _BLOCK.match(name):
            blocks.setdefault(match["container"], set()).add(int(match["index"]))
    if claimed is None or len(blocks) != 1:  # none, or several stacks (encoder and decoder): left to the build
        return True
    container, indices = next(iter(blocks.items()))
    if claimed <= len(indices):
        return True
    message = (
        f"{where}: config.json gives {_key(config, 'num_hidden_layers')} = {claimed}, but its weights hold "
        f"{len(indices)} layer(s) ({container}.{min(indices)} to {container}.{max(indices)}): the config does not "
        "belong to these weights."
    )
    if strict:
        raise CheckpointError(
            f"{message} Fix config.json, or pass strict=False to build every layer it names anyway (the missing "
            "ones random)."
        )
    warnings.warn(
        f"{message} Building all {claimed} layers, the missing ones random (strict=False).",
        RandomWeightsWarning,
        stacklevel=5,
    )
    return False


def _check_embedding(config: Any, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """The input embedding's width is the config's hidden size (or its `embedding_size`, for factorised ones)."""
    width = getattr(config, "embedding_size", None) or getattr(config, "hidden_size", None)
    found = [(name, shape) for name, shape in shapes.items() if name.endswith(_EMBEDDINGS) and len(shape) == 2]
    if width is None or len(found) != 1 or found[0][1][1] == width:
        return
    name, shape = found[0]
    key = "embedding_size" if getattr(config, "embedding_size", None) else _key(config, "hidden_size")
    raise CheckpointError(
        f"{where}: config.json gives {key} = {width}, but the weights' embedding {name} has shape {list(shape)} "
        f"(width {shape[1]}): the config does not belong to these weights. Fix config.json."
    )


def _check_meta_build(config: Any, model_class: Any, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """The model built on the meta device has the weights' shapes wherever their names agree."""
    model = _meta_model(config, model_class, where)
    if model is None:
        return
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    for name, parameter in model.state_dict().items():
        saved = next((shapes[key] for key in (name, prefix + name, name.removeprefix(prefix)) if key in shapes), None)
        if saved is not None and tuple(parameter.shape) != saved:
            raise CheckpointError(
                f"The weights of {where[0].lower()}{where[1:]} do not have the shapes its config.json gives: {name} "
                f"is {list(saved)} in the weights and {list(parameter.shape)} for the config. Fix config.json, or "
                "check that the weight files belong to it (their tensors do not have this architecture's shapes)."
            )


def _meta_model(config: Any, model_class: Any, where: str) -> Any:
    """The model of `config`, on the meta device (no memory); None for a class that cannot build from a config."""
    import torch

    build = getattr(model_class, "from_config", None) or getattr(model_class, "_from_config", None)
    if build is None:
        return None
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return build(config)
    except Exception as err:  # noqa: BLE001  (whatever the architecture raises for a config it cannot build)
        raise CheckpointError(
            f"{where}: its config.json does not describe a model {getattr(model_class, '__name__', model_class)} can "
            f"build ({type(err).__name__}: {str(err)[:200]}). Fix config.json."
        ) from err
