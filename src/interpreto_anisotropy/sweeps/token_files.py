# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The top-tokens files of a results directory: ``top_tokens/<split point>/step-<step>.json``.

One file per checkpoint and split point holds the top-activating tokens of every direction of the tangents the
checkpoint was probed with (`interpreto_anisotropy.tangents.top_tokens`): its step, split point, the number of rows
ranked, and per tangent kind one entry per direction, each token in the compact form of `TOKEN_FIELDS`. The store
writes them (`SweepStore.save_top_tokens`); `SweepResult.top_tokens` and the report read them.

Examples:
    >>> read_top_tokens("runs/toy/sweep", 1, 300)["tangents"]["early"][0].high  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..errors import ResultsStoreError
from ..tangents.top_tokens import TOKEN_FIELDS, DirectionTokens

__all__ = ["TOP_TOKENS_DIR", "folder_name", "top_tokens_path", "write_top_tokens", "read_top_tokens", "saved_steps"]

#: The folder of the top tokens, in a results directory.
TOP_TOKENS_DIR = "top_tokens"


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
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_atomically(path, text.encode("utf-8"))


def read_top_tokens(results_dir: str | Path, layer: int | str, step: int) -> dict[str, Any] | None:
    """The top tokens of a checkpoint and split point, None when none are saved.

    Returns:
        The file's content, with each tangent kind's entries as `DirectionTokens`.

    Raises:
        ResultsStoreError: A file that is not such JSON.
    """
    path = top_tokens_path(results_dir, layer, step)
    if not path.exists():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
        content["tangents"] = {
            kind: [DirectionTokens.from_dict(entry) for entry in found] for kind, found in content["tangents"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ResultsStoreError(
            f"{path} holds no top tokens ({type(error).__name__}: {error}); delete it (it is written again when its "
            "checkpoint is recomputed)."
        ) from None
    return content


def saved_steps(results_dir: str | Path, layer: int | str) -> list[int]:
    """The steps whose top tokens are saved for a split point, in order."""
    folder = top_tokens_path(results_dir, layer, 0).parent
    return sorted(int(path.stem.removeprefix("step-")) for path in folder.glob("step-*.json"))
