# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A checkpoint's content fingerprint: cheap enough to take on every resume, sharp enough to see a retrained folder.

Examples:
    >>> fingerprint(Checkpoint(0, "runs/toy/checkpoint-0"))  # doctest: +SKIP
    'sha256:5f0c2e9a41d7b3c8'
"""

from __future__ import annotations

import hashlib
import os
import re
from fnmatch import fnmatch
from pathlib import Path

from .checkpoints import Checkpoint

__all__ = ["MODEL_FILES", "SAMPLED_BLOCKS", "WHOLE_FILE_BYTES", "fingerprint", "folder_fingerprint"]

#: Files of a checkpoint folder that determine the model and its tokenizer (glob patterns on the file name).
MODEL_FILES: tuple[str, ...] = (
    "config.json",
    "*.safetensors",
    "pytorch_model*.bin",
    "model*.bin",
    "*.index.json",
    "tokenizer*",
    "vocab*",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "*.model",
    "*.tiktoken",
)
#: Files up to this size are hashed whole.
WHOLE_FILE_BYTES = 64 * 2**20
#: Blocks of 64 KiB sampled evenly from a larger file (besides its header and its first and last MiB).
SAMPLED_BLOCKS = 32

_BLOCK = 64 * 2**10
_EDGE = 2**20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def fingerprint(checkpoint: Checkpoint, *, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The checkpoint's content fingerprint, or None when it cannot be taken without downloading.

    Args:
        checkpoint: A local folder or a Hub checkpoint.
        cache_dir: The Hugging Face cache to resolve a Hub revision in (None: the default cache).

    Returns:
        ``"sha256:<16 hex>"`` for a local folder, ``"commit:<40 hex>"`` for a Hub checkpoint, or None.
    """
    if checkpoint.is_local:
        return folder_fingerprint(Path(checkpoint.source).expanduser())
    return _hub_commit(checkpoint, cache_dir)


def folder_fingerprint(folder: Path) -> str:
    """The fingerprint of a checkpoint folder's model and tokenizer files (see the module docstring)."""
    digest = hashlib.sha256()
    files = sorted(path for path in folder.rglob("*") if path.is_file() and _is_model_file(path.name))
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with path.open("rb") as handle:
            for chunk in _content(handle, size, safetensors=path.suffix == ".safetensors"):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()[:16]}"


def _is_model_file(name: str) -> bool:
    return name != "training_args.bin" and any(fnmatch(name, pattern) for pattern in MODEL_FILES)


def _content(handle, size: int, *, safetensors: bool):
    """The bytes of an open file that enter its fingerprint: all of it, or its header and a sample."""
    if size <= WHOLE_FILE_BYTES:
        while chunk := handle.read(_EDGE):
            yield chunk
        return
    if safetensors:
        header_size = int.from_bytes(handle.read(8), "little")
        yield handle.read(min(header_size, size - 8))
    offsets = [0, size - _EDGE] + [(size - _BLOCK) * index // (SAMPLED_BLOCKS - 1) for index in range(SAMPLED_BLOCKS)]
    for offset, length in zip(offsets, [_EDGE, _EDGE] + [_BLOCK] * SAMPLED_BLOCKS, strict=True):
        handle.seek(offset)
        yield handle.read(length)


def _hub_commit(checkpoint: Checkpoint, cache_dir: str | os.PathLike | None) -> str | None:
    revision = checkpoint.revision or "main"
    if _COMMIT.match(revision):
        return f"commit:{revision}"
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(checkpoint.source, "config.json", cache_dir=cache_dir, revision=revision)
    except ValueError:  # not a valid repository id: nothing cached under it
        return None
    if not isinstance(cached, str):
        return None
    commit = Path(cached).parent.name  # <cache>/models--org--name/snapshots/<commit>/config.json
    return f"commit:{commit}" if _COMMIT.match(commit) else None
