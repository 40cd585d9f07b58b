# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a report can say about the swept model and the software, without loading a model or touching the network.

Examples:
    >>> card = model_card({"checkpoints": [{"step": 0, "source": "runs/demo/toy/checkpoint-0"}]})  # doctest: +SKIP
    >>> card["architecture"]  # doctest: +SKIP
    'GPTNeoXForCausalLM (gpt_neox)'
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..commons.files import load_json, parse_json
from ..errors import CheckpointError
from ..results.records import software_versions

__all__ = ["model_name", "model_card", "software_versions", "layer_count", "count_tokens", "UNKNOWN"]

#: What the card says of a field it cannot know.
UNKNOWN = "unknown"

# Hugging Face configs name the same quantity differently across families.
_WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "dim")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads")


def _checkpoints(config: dict[str, Any], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sweep's checkpoints (step, source, revision), from its config or else from its rows."""
    listed = config.get("checkpoints")
    if isinstance(listed, list) and listed:
        return [entry for entry in listed if isinstance(entry, dict)]
    return [{key: row.get(key) for key in ("step", "source", "revision")} for row in rows if row.get("source")]


def model_name(config: dict[str, Any], rows: Sequence[dict[str, Any]] = ()) -> str | None:
    """The swept model's name: a hub id as it is, local checkpoints by the folder that holds them.

    Args:
        config: The sweep's settings (``config.json``).
        rows: Its rows, read when the config lists no checkpoint.

    Returns:
        The name, or None if the sweep records no checkpoint source.
    """
    checkpoints = [entry for entry in _checkpoints(config, rows) if isinstance(entry.get("source"), str)]
    if not checkpoints:
        return None
    if checkpoints[0].get("revision"):
        return checkpoints[0]["source"]
    parents = {Path(entry["source"]).parent for entry in checkpoints}
    folder = parents.pop() if len(parents) == 1 else Path(checkpoints[0]["source"]).parent
    return folder.name or folder.resolve().name


def model_card(config: dict[str, Any], rows: Sequence[dict[str, Any]] = ()) -> dict[str, str]:
    """The model's description, for the report: architecture, width d, layers, heads, vocabulary, parameters.

    Args:
        config: The sweep's settings (``config.json``).
        rows: Its rows (for the width d and when the config lists no checkpoint).

    Returns:
        Field name to text, in display order.
    """
    first = next(iter(_checkpoints(config, rows)), {})
    local = isinstance(first.get("source"), str) and not first.get("revision") and Path(first["source"]).is_dir()
    folder = Path(first["source"]) if local else None
    model_config = _read_json(folder / "config.json") if folder is not None else {}
    width = _first(model_config, _WIDTH_KEYS)
    if width is None:
        width = next((row.get("dim") for row in rows if row.get("dim")), None)
    architecture = (model_config.get("architectures") or [model_config.get("model_type")])[0]
    if architecture and model_config.get("model_type") and architecture != model_config["model_type"]:
        architecture = f"{architecture} ({model_config['model_type']})"
    where = "its first checkpoint's config.json" if model_config else "not readable here (a hub or moved checkpoint)"
    return {
        "model": model_name(config, rows) or UNKNOWN,
        "architecture": str(architecture or UNKNOWN),
        "width d": _text(width),
        "layers": _text(_first(model_config, _LAYER_KEYS)),
        "attention heads": _text(_first(model_config, _HEAD_KEYS)),
        "vocabulary": _text(model_config.get("vocab_size")),
        "parameters": _parameters_text(_parameter_count(folder) if folder is not None else None),
        "described from": where,
    }


def layer_count(source: str | Path) -> int | None:
    """The number of layers a local checkpoint's ``config.json`` declares, or None (no such folder or field)."""
    folder = Path(source)
    count = _first(_read_json(folder / "config.json"), _LAYER_KEYS) if folder.is_dir() else None
    return count if isinstance(count, int) and count > 0 else None


def count_tokens(source: str | Path, texts: Sequence[str]) -> int | None:
    """How many tokens a local checkpoint's tokenizer makes of `texts` (no truncation, no warning), or None."""
    folder = Path(source)
    if not folder.is_dir() or not texts:
        return None
    from transformers import AutoTokenizer

    from ..commons.progress import quiet_transformers

    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            encoded = tokenizer(list(texts), verbose=False)["input_ids"]
    except Exception:  # noqa: BLE001  (only an estimate: a config transformers cannot read, e.g. 0 heads, which
        return None  # divide by, or nested too deep, is refused with our error when the checkpoint loads)
    return sum(len(ids) for ids in encoded)


def _first(config: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((config[key] for key in keys if config.get(key) is not None), None)


def _text(value: Any) -> str:
    return UNKNOWN if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _parameters_text(count: int | None) -> str:
    if count is None:
        return UNKNOWN
    for scale, suffix in ((1e9, " billion"), (1e6, " million"), (1e3, " thousand")):
        if count >= scale:
            return f"{count:,} ({count / scale:.3g}{suffix})"
    return f"{count:,}"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = load_json(path, error=CheckpointError, finite=False)
    except CheckpointError:
        return {}  # the card says "unknown"; loading the checkpoint itself reports the damaged file
    return value if isinstance(value, dict) else {}


def _parameter_count(folder: Path) -> int | None:
    """Parameters in the folder's ``.safetensors`` files, from their headers; None without one, or one unreadable."""
    total = None
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with path.open("rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                text = handle.read(length) if length <= 100_000_000 else b""
            header = parse_json(text, path, error=CheckpointError, finite=False) if text else None
        except (OSError, struct.error, CheckpointError):
            return None
        if not isinstance(header, dict):
            return None
        total = (total or 0) + sum(math.prod(value["shape"]) for key, value in header.items() if key != "__metadata__")
    return total
