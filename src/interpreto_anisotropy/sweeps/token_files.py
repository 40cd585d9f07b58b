# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The top-tokens files of a results directory: ``top_tokens/<split point>/step-<step>.json``.

Examples:
    >>> read_top_tokens("runs/toy/sweep", 1, 300)["tangents"]["early"][0].high  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..commons.json_files import load_json
from ..errors import ResultsStoreError
from ..tangents.top_tokens import TOKEN_FIELDS, DirectionTokens
from .provenance import file_digest, recorded_digests

__all__ = [
    "TOP_TOKENS_DIR",
    "folder_name",
    "top_tokens_path",
    "write_top_tokens",
    "read_top_tokens",
    "saved_steps",
    "step_of",
]

#: The folder of the top tokens, in a results directory.
TOP_TOKENS_DIR = "top_tokens"
_STEP_FILE = re.compile(r"step-(\d{1,15})\.(?:json|safetensors)")


def folder_name(layer: int | str) -> str:
    """A split point as a file or folder name (characters other than letters, digits, ``_.-`` become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(layer))


def top_tokens_path(results_dir: str | Path, layer: int | str, step: int) -> Path:
    """Where the top tokens of a checkpoint and split point go."""
    return Path(results_dir) / TOP_TOKENS_DIR / folder_name(layer) / f"step-{step}.json"


def write_top_tokens(
    path: Path,
    *,
    step: int,
    layer: int | str,
    split_point: str,
    n_rows: int,
    directions: dict[str, list[DirectionTokens]],
) -> None:
    """Write a top-tokens file atomically, unless it already holds the same content.

    Args:
        path: The file (`top_tokens_path`).
        step: The checkpoint's step.
        layer: The split point as given to the sweep.
        split_point: Its module path.
        n_rows: How many rows were ranked.
        directions: Tangent kind -> one `DirectionTokens` per direction.
    """
    content = {
        "step": step,
        "layer": layer if isinstance(layer, int) else str(layer),
        "split_point": split_point,
        "n_rows": n_rows,
        "token_fields": list(TOKEN_FIELDS),
        "tangents": {kind: [direction.to_dict() for direction in found] for kind, found in directions.items()},
    }
    text = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    if not path.exists() or path.read_bytes() != text.encode("utf-8"):
        write_atomically(path, text.encode("utf-8"))


def read_top_tokens(results_dir: str | Path, layer: int | str, step: int) -> dict[str, Any] | None:
    """The top tokens of a checkpoint and split point, None when none are saved.

    Returns:
        The file's content, with each tangent kind's entries as `DirectionTokens`.

    Raises:
        ResultsStoreError: A file that is not such JSON (unreadable, nested too deep, fields of other types), or
            not the bytes the sweep wrote there (`provenance.recorded_digests`), naming it and what is wrong.
    """
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
    problem = _content_problem(content)
    if problem is None and content["step"] != step:
        problem = f"its step is {content['step']}, but its name says {step}"
    if problem is not None:
        raise ResultsStoreError(f"{path} holds no top tokens ({problem}). {advice}")
    content["tangents"] = {
        kind: [DirectionTokens.from_dict(entry) for entry in found] for kind, found in content["tangents"].items()
    }
    return content


def _content_problem(content: Any) -> str | None:
    """What makes `content` no top-tokens file (None when it is one)."""
    if not isinstance(content, dict):
        return "not a JSON object"
    for name, kinds in (("step", int), ("n_rows", int), ("split_point", str), ("layer", (int, str))):
        if not isinstance(content.get(name), kinds) or isinstance(content.get(name), bool):
            return f"its {name} is {type(content.get(name)).__name__}"
    if content["step"] < 0 or content["n_rows"] < 0:
        return "a negative step or n_rows"
    if not isinstance(content.get("tangents"), dict):
        return "its tangents are not a JSON object"
    for kind, found in content["tangents"].items():
        if not isinstance(found, list) or not all(_direction_problem(entry) is None for entry in found):
            problems = [_direction_problem(entry) for entry in found] if isinstance(found, list) else ["not a list"]
            return f"tangent {kind!r}: {next(problem for problem in problems if problem)}"
    return None


def _direction_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "a direction that is not a JSON object"
    if not _integer(entry.get("direction")) or not _real(entry.get("variance_share")):
        return "a direction without an integer direction and a number variance_share"
    for end in ("high", "low"):
        tokens = entry.get(end)
        if not isinstance(tokens, list) or not all(_token_problem(token) is None for token in tokens):
            return f"its {end} tokens are not lists of {', '.join(TOKEN_FIELDS)}"
    return None


def _token_problem(token: Any) -> str | None:
    if not isinstance(token, list) or len(token) != len(TOKEN_FIELDS):
        return "not a list"
    name, before, after, score, text, position = token
    if not all(isinstance(value, str) for value in (name, before, after)):
        return "texts that are not strings"
    if not _real(score) or not _integer(text) or not _integer(position):
        return "numbers that are not numbers"
    return None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def step_of(path: Path) -> int:
    """The step of a ``step-<step>.json`` or ``.safetensors`` file of a results directory.

    Raises:
        ResultsStoreError: A name of another form (``step-abc.json``), naming the file.
    """
    match = _STEP_FILE.fullmatch(path.name)
    if match is None:
        raise ResultsStoreError(
            f"{path} is not named step-<step>{path.suffix} with <step> an integer: the package did not write it. "
            "Delete or rename it, or rerun with overwrite=True."
        )
    return int(match[1])


def saved_steps(results_dir: str | Path, layer: int | str) -> list[int]:
    """The steps whose top tokens are saved for a split point, in order.

    Raises:
        ResultsStoreError: A file ``step-*.json`` whose step is not an integer, naming it.
    """
    folder = top_tokens_path(results_dir, layer, 0).parent
    return sorted(step_of(path) for path in folder.glob("step-*.json"))
