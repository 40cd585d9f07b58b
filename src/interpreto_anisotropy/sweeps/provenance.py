# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Which software computed a sweep's rows, and what its tangent and top-tokens files held: ``provenance.jsonl``,
one line per write of rows (and of a reference tangent), naming the files written with them by their sha256.

Examples:
    >>> versions_of_rows("runs/toy/sweep", table.rows)  # doctest: +SKIP
    [({'interpreto-anisotropy': '0.4.0', 'interpreto': '0.5.2', ...}, 32)]
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ..commons.json_files import parse_json, read_whole_lines
from ..errors import ResultsStoreError

__all__ = [
    "PROVENANCE_FILE",
    "VERSIONED",
    "software_versions",
    "provenance_line",
    "file_digest",
    "read_provenance",
    "recorded_digests",
    "versions_of_rows",
]

#: The provenance of a sweep's rows, one JSON object a line, in its results directory.
PROVENANCE_FILE = "provenance.jsonl"
#: The libraries whose versions are recorded (Python's is added).
VERSIONED = ("interpreto-anisotropy", "interpreto", "torch", "transformers")

Key = tuple[int, str, str]


def _key(row: dict[str, Any]) -> Key:
    """A row's (step, split point as given, tangent kind), as `sweeps.rows_file.row_key` (which imports nothing here)."""
    return int(row["step"]), str(row["layer"]), str(row.get("tangent", "early"))


def software_versions() -> dict[str, str]:
    """The installed versions of the libraries behind the numbers, and Python's.

    Returns:
        Library name -> version ("not installed" when absent), then "python".

    Examples:
        >>> sorted(software_versions())
        ['interpreto', 'interpreto-anisotropy', 'python', 'torch', 'transformers']
    """
    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    versions["python"] = platform.python_version()
    return versions


def provenance_line(keys: Iterable[Key], files: dict[str, str] | None = None) -> str:
    """The line recording that this process computed the rows of `keys` (with a newline).

    Args:
        keys: (step, split point as given, tangent kind) of the rows about to be written.
        files: The files written with them: path relative to the results directory (``/``-separated) -> its
            `file_digest`; a resume checks them (`recorded_digests`).

    Returns:
        One JSON object: the time (UTC), the versions, the keys and (when given) the files.
    """
    record: dict[str, Any] = {
        "written": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": software_versions(),
        "rows": [list(key) for key in keys],
    }
    if files:
        record["files"] = files
    return json.dumps(record) + "\n"


def file_digest(data: bytes | Path) -> str:
    """``"sha256:<hex>"`` of some bytes, or of a file's bytes.

    Examples:
        >>> file_digest(b"") == "sha256:" + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        True
    """
    digest = hashlib.sha256()
    if isinstance(data, bytes):
        digest.update(data)
    else:
        with open(data, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def recorded_digests(results_dir: str | Path) -> dict[str, str]:
    """The digest each file of a results directory was last written with, as provenance.jsonl records it.

    Returns:
        Path relative to the results directory (``/``-separated) -> `file_digest`; empty for results written
        before files were recorded.

    Raises:
        ResultsStoreError: An unreadable provenance file.
    """
    recorded: dict[str, str] = {}
    for record in read_provenance(Path(results_dir) / PROVENANCE_FILE):
        recorded.update(record.get("files", {}))
    return recorded


def read_provenance(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``provenance.jsonl`` (none when the file is absent: results written before it existed).

    Raises:
        ResultsStoreError: A complete line that is not a provenance record.
    """
    path = Path(path)
    if not path.exists():
        return []
    advice = "Delete the file (the rows stay valid, their versions are then unknown)."
    complete, _ = read_whole_lines(path, advice=advice)  # the part after the last newline: empty, or a line cut short
    records = []
    for number, line in enumerate(complete.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, path, line=number, advice=advice)
        except ResultsStoreError as error:
            raise ResultsStoreError(f"Line {number} of {path} is not a provenance record: {error}") from None
        problem = _record_problem(record)
        if problem is not None:
            raise ResultsStoreError(f"Line {number} of {path} is not a provenance record ({problem}). {advice}")
        records.append(record)
    return records


def _record_problem(record: Any) -> str | None:
    """What makes `record` no provenance record (None when it is one)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    versions = record.get("versions")
    if not isinstance(versions, dict) or not all(isinstance(value, str) for value in versions.values()):
        return "its versions are not an object of strings"
    rows = record.get("rows", [])
    if not isinstance(rows, list) or not all(_is_key(key) for key in rows):
        return "its rows are not [step, split point, tangent kind] triples"
    files = record.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(value, str) for value in files.values()):
        return "its files are not an object of digests"
    return None


def _is_key(key: Any) -> bool:
    if not isinstance(key, list) or len(key) != 3:
        return False
    step, layer, kind = key
    integer = isinstance(step, int) and not isinstance(step, bool)
    return integer and isinstance(layer, (int, str)) and not isinstance(layer, bool) and isinstance(kind, str)


def versions_of_rows(
    results_dir: str | Path | None, rows: Sequence[dict[str, Any]]
) -> list[tuple[dict[str, str] | None, int]]:
    """The versions that computed `rows`, with how many rows each, in order of first appearance.

    Args:
        results_dir: The sweep's folder (None: rows that were never stored).
        rows: The rows (their step, layer and tangent name them).

    Returns:
        (versions, number of rows) pairs; versions is None for rows no record names (written before provenance was
        recorded, or not stored).

    Raises:
        ResultsStoreError: An unreadable provenance file.
    """
    by_key: dict[Key, dict[str, str]] = {}
    if results_dir is not None:
        for record in read_provenance(Path(results_dir) / PROVENANCE_FILE):
            for step, layer, kind in record.get("rows", []):
                by_key[(int(step), str(layer), str(kind))] = record["versions"]
    groups: dict[str, tuple[dict[str, str] | None, int]] = {}
    for row in rows:
        versions = by_key.get(_key(row)) if "layer" in row else None  # rows never stored may lack the key
        label = json.dumps(versions, sort_keys=True)
        known, count = groups.get(label, (versions, 0))
        groups[label] = (known, count + 1)
    return list(groups.values())
