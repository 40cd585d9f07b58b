# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The one way the package reads the JSON files it is given or finds: results folders (config.json, rows.jsonl,
provenance.jsonl, top tokens), texts files and checkpoint configs."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import AnisotropyError, ResultsStoreError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "read_text", "read_whole_lines", "parse_json", "json_lines", "load_json"]

#: The largest file read (1 GiB): a results folder's rows of a very long sweep are a few hundred MiB at most.
MAX_BYTES = 2**30
#: The deepest nesting accepted: the package's own files are 4 levels deep at most.
MAX_DEPTH = 64

_ADVICE = "Rerun with overwrite=True to start afresh, or delete the file."


def read_text(
    path: str | os.PathLike,
    *,
    error: type[AnisotropyError] = ResultsStoreError,
    advice: str = _ADVICE,
    encoding: str = "utf-8",
    max_bytes: int = MAX_BYTES,
) -> str:
    """The text of a file, decoded strictly, refused when larger than `max_bytes`."""
    return _decoded(Path(path), _read_bytes(Path(path), error, advice, max_bytes), error, advice, encoding)


def read_whole_lines(
    path: str | os.PathLike, *, error: type[AnisotropyError] = ResultsStoreError, advice: str = _ADVICE
) -> tuple[str, bool]:
    """The text of a file that grows by appends, up to its last newline: (text, whether a tail was left out)."""
    data = _read_bytes(Path(path), error, advice, MAX_BYTES)
    whole = data[: data.rfind(b"\n") + 1]
    return _decoded(Path(path), whole, error, advice, "utf-8"), len(whole) < len(data)


def _read_bytes(path: Path, error: type[AnisotropyError], advice: str, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise error(f"{path} is {size:,} bytes, more than the {max_bytes:,} read at most. {advice}")
        return path.read_bytes()
    except OSError as failure:
        raise error(f"Cannot read {path}: {failure.strerror or failure}. {advice}") from failure


def _decoded(path: Path, data: bytes, error: type[AnisotropyError], advice: str, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as failure:
        line = data[: failure.start].count(b"\n") + 1
        raise error(f"{path} is not UTF-8 text (line {line}: {failure.reason}). {advice}") from None


def parse_json(
    text: str | bytes,
    path: str | os.PathLike,
    *,
    line: int | None = None,
    error: type[AnisotropyError] = ResultsStoreError,
    advice: str = _ADVICE,
    max_depth: int = MAX_DEPTH,
    finite: bool = True,
) -> Any:
    """The JSON value of `text` (a file's content, or one of its lines), nested at most `max_depth` deep."""
    where = f"Line {line} of {path}" if line is not None else str(path)
    try:
        value = json.loads(text, parse_constant=_refuse_constant if finite else None)
    except _NonFiniteConstant as failure:
        raise error(
            f"{where} is not JSON that can be read ({failure.args[0]} is no JSON number; a missing value is null). "
            f"{advice}"
        ) from None
    except json.JSONDecodeError as failure:
        place = "" if line is not None else f" at line {failure.lineno}, column {failure.colno}"
        raise error(f"{where} is not JSON ({failure.msg}{place}). {advice}") from None
    except RecursionError:
        raise error(
            f"{where} is not JSON that can be read (nested deeper than {max_depth} levels). {advice}"
        ) from None
    except (ValueError, UnicodeDecodeError) as failure:  # an integer of more than 4300 digits, bytes not UTF-8
        raise error(f"{where} is not JSON that can be read ({failure}). {advice}") from None
    depth, all_finite = _depth(value, max_depth)
    if depth > max_depth:
        raise error(f"{where} is not JSON that can be read (nested deeper than {max_depth} levels). {advice}")
    if finite and not all_finite:
        raise error(f"{where} is not JSON that can be read (a number beyond a float's range). {advice}")
    return value


def load_json(
    path: str | os.PathLike,
    *,
    error: type[AnisotropyError] = ResultsStoreError,
    advice: str = _ADVICE,
    encoding: str = "utf-8",
    finite: bool = True,
) -> Any:
    """The JSON value of a whole file (`read_text` then `parse_json`)."""
    text = read_text(path, error=error, advice=advice, encoding=encoding)
    return parse_json(text, path, error=error, advice=advice, finite=finite)


def json_lines(
    text: str, path: str | os.PathLike, *, error: type[AnisotropyError] = ResultsStoreError, advice: str = _ADVICE
) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line of a JSON-lines text (lines end at "\\n" only)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, parse_json(line, path, line=number, error=error, advice=advice)


class _NonFiniteConstant(ValueError):
    """`NaN`, `Infinity` or `-Infinity` in a JSON text (carries the constant)."""


def _refuse_constant(constant: str) -> Any:
    raise _NonFiniteConstant(constant)


def _depth(value: Any, limit: int) -> tuple[int, bool]:
    """The nesting depth of a parsed value (1 for a scalar), counted without recursion, up to `limit` + 1, and
    whether its floats are all finite (`1e999` parses as infinity)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest, True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, float) and not math.isfinite(item):
            return deepest, False
    return deepest, True
