# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Beside a results directory's rows: provenance.jsonl, the top-tokens files; checkpoint fingerprints."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path
from typing import Any

from ..commons.files import checked_lines, load_json, read_whole_lines, write_atomically
from ..errors import ResultsStoreError
from ..tangents.top_tokens import DirectionTokens
from .schema import fits, row_key

#: The provenance of a sweep's rows, one JSON object a line, in its results directory.
PROVENANCE_FILE = "provenance.jsonl"
_ADVICE = "Delete the file (the rows stay valid, their versions are then unknown)."
#: The libraries whose versions are recorded (Python's is added).
VERSIONED = ("interpreto-anisotropy", "interpreto", "torch", "transformers")

Key = tuple[int, str, str]
_REAL = (int, float, type(None))
#: The shape of a provenance record (`schema.fits`), and of a top-tokens file: its tokens as `TOKEN_FIELDS` lists.
_RECORD = {"versions": {str: str}, "rows?": [[int, (int, str), str]], "files?": {str: str}}
_TOKENS = [[str, str, str, _REAL, int, int]]
_DIRECTIONS = [{"direction": int, "variance_share": _REAL, "high": _TOKENS, "low": _TOKENS}]
_TOP_TOKENS = {"step": int, "n_rows": int, "split_point": str, "layer": (int, str), "tangents": {str: _DIRECTIONS}}


def software_versions() -> dict[str, str]:
    """The installed versions of the libraries behind the numbers, and Python's."""
    versions = dict.fromkeys(VERSIONED, "not installed")
    for name in VERSIONED:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions | {"python": platform.python_version()}


def record_provenance(results_dir: Path, keys: Iterable[Key], files: dict[str, str] | None = None) -> None:
    """Append the line saying this process computes the rows of `keys` (a line cut short by a kill dropped first)."""
    written = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {"written": written, "versions": software_versions(), "rows": [list(key) for key in keys]}
    record |= {"files": files} if files else {}
    path = results_dir / PROVENANCE_FILE
    existing = read_whole_lines(path, advice=_ADVICE)[0] if path.exists() else ""
    write_atomically(path, existing + json.dumps(record) + "\n")


def file_digest(data: bytes | Path) -> str:
    """``"sha256:<hex>"`` of some bytes, or of a file's bytes."""
    data = data if isinstance(data, bytes) else data.read_bytes()  # tangents and top tokens: files of a few MB
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def recorded_digests(results_dir: str | Path) -> dict[str, str]:
    """The digest each file of a results directory was last written with, as provenance.jsonl records it."""
    recorded: dict[str, str] = {}
    for record in read_provenance(Path(results_dir) / PROVENANCE_FILE):
        recorded.update(record.get("files", {}))
    return recorded


def read_provenance(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``provenance.jsonl`` (none when the file is absent: results written before it existed)."""
    path = Path(path)
    if not path.exists():
        return []
    complete, _ = read_whole_lines(path, advice=_ADVICE)  # the part after the last newline: empty, or a line cut short

    def wrong(record: Any) -> str | None:
        return None if fits(record, _RECORD) else "missing or mistyped fields"

    return checked_lines(complete, path, wrong, what="a provenance record", advice=_ADVICE)


def versions_of_rows(
    results_dir: str | Path | None, rows: Sequence[dict[str, Any]]
) -> list[tuple[dict[str, str] | None, int]]:
    """The versions that computed `rows`, with how many rows each, in order of first appearance."""
    by_key: dict[Key, dict[str, str]] = {}
    if results_dir is not None:
        for record in read_provenance(Path(results_dir) / PROVENANCE_FILE):
            for step, layer, kind in record.get("rows", []):
                by_key[(int(step), str(layer), str(kind))] = record["versions"]
    groups: dict[str, list[Any]] = {}
    for row in rows:
        versions = by_key.get(row_key(row)) if "layer" in row else None  # rows never stored may lack the key
        groups.setdefault(json.dumps(versions, sort_keys=True), [versions, 0])[1] += 1
    return [(versions, count) for versions, count in groups.values()]


#: The folder of the top tokens, in a results directory.
TOP_TOKENS_DIR = "top_tokens"
_STEP_FILE = re.compile(r"step-(\d{1,15})\.(?:json|safetensors)")


def folder_name(layer: int | str) -> str:
    """A split point as a file or folder name (characters other than letters, digits, ``_.-`` become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(layer))


def top_tokens_path(results_dir: str | Path, layer: int | str, step: int) -> Path:
    """Where the top tokens of a checkpoint and split point go."""
    return Path(results_dir) / TOP_TOKENS_DIR / folder_name(layer) / f"step-{step}.json"


def read_top_tokens(results_dir: str | Path, layer: int | str, step: int) -> dict[str, Any] | None:
    """The top tokens of a checkpoint and split point, None when none are saved."""
    path = top_tokens_path(results_dir, layer, step)
    if not path.exists():
        return None
    advice = "Delete it (it is written again when its checkpoint is recomputed)."
    recorded = recorded_digests(results_dir).get(path.relative_to(results_dir).as_posix())
    if recorded is not None and path.is_file() and file_digest(path) != recorded:
        raise ResultsStoreError(
            f"{path} does not hold the top tokens the sweep wrote there (its sha256 is not the one provenance.jsonl "
            "records). Rerun the sweep: it computes that checkpoint again."
        )
    content = load_json(path, advice=advice)
    if not fits(content, _TOP_TOKENS) or min(content["step"], content["n_rows"]) < 0 or content["step"] != step:
        raise ResultsStoreError(f"{path} holds no top tokens of step {step}. {advice}")
    content["tangents"] = {
        kind: [DirectionTokens.from_dict(entry) for entry in found] for kind, found in content["tangents"].items()
    }
    return content


def step_of(path: Path) -> int:
    """The step of a ``step-<step>.json`` or ``.safetensors`` file of a results directory."""
    match = _STEP_FILE.fullmatch(path.name)
    if match is None:
        raise ResultsStoreError(
            f"{path} is not named step-<step>{path.suffix} with <step> an integer: the package did not write it. "
            "Delete or rename it, or rerun with overwrite=True."
        )
    return int(match[1])


def saved_steps(results_dir: str | Path, layer: int | str) -> list[int]:
    """The steps whose top tokens are saved for a split point, in order."""
    folder = top_tokens_path(results_dir, layer, 0).parent
    return sorted(step_of(path) for path in folder.glob("step-*.json"))


#: Files of a checkpoint folder that determine the model and its tokenizer (glob patterns on the file name).
MODEL_FILES: tuple[str, ...] = ("config.json", "*.safetensors", "pytorch_model*.bin", "model*.bin", "*.index.json")
MODEL_FILES += ("tokenizer*", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json", "*.model")
MODEL_FILES += ("*.tiktoken",)
#: Files up to this size are hashed whole.
WHOLE_FILE_BYTES = 64 * 2**20
#: Blocks of 64 KiB sampled evenly from a larger file (besides its header and its first and last MiB).
SAMPLED_BLOCKS = 32

_BLOCK = 64 * 2**10
_EDGE = 2**20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def fingerprint(checkpoint: Any, *, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The checkpoint's content fingerprint, or None when it cannot be taken without downloading."""
    if checkpoint.is_local:
        return folder_fingerprint(Path(checkpoint.source).expanduser())
    revision = checkpoint.revision or "main"
    if _COMMIT.match(revision):
        return f"commit:{revision}"
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(checkpoint.source, "config.json", cache_dir=cache_dir, revision=revision)
    except ValueError:  # not a valid repository id: nothing cached under it
        return None
    commit = Path(cached).parent.name if isinstance(cached, str) else ""  # <cache>/.../snapshots/<commit>/config.json
    return f"commit:{commit}" if _COMMIT.match(commit) else None


def folder_fingerprint(folder: Path) -> str:
    """The fingerprint of a folder's model and tokenizer files: path, size and bytes (a header and a sample if big)."""
    digest = hashlib.sha256()
    files = (path for path in folder.rglob("*") if any(fnmatch(path.name, pattern) for pattern in MODEL_FILES))
    for path in sorted(path for path in files if path.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with path.open("rb") as handle:
            if size <= WHOLE_FILE_BYTES:
                while chunk := handle.read(_EDGE):
                    digest.update(chunk)
                continue
            if path.suffix == ".safetensors":
                header_size = int.from_bytes(handle.read(8), "little")
                digest.update(handle.read(min(header_size, size - 8)))
            offsets = [0, size - _EDGE] + [(size - _BLOCK) * i // (SAMPLED_BLOCKS - 1) for i in range(SAMPLED_BLOCKS)]
            for offset, length in zip(offsets, [_EDGE, _EDGE] + [_BLOCK] * SAMPLED_BLOCKS, strict=True):
                handle.seek(offset)
                digest.update(handle.read(length))
    return f"sha256:{digest.hexdigest()[:16]}"
