# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Atomic file writes: a crash or a kill never leaves half a file behind, the old version stays until the new one
is complete."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, flush it to disk, then rename it over `path`.

    Args:
        path: The file to (re)write; its folder is created if needed.
        data: Bytes, or text written as UTF-8.

    Returns:
        The path written.

    Examples:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
        >>> write_atomically(target, '{"step": 0}\\n').read_text()
        '{"step": 0}\\n'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, 0o644)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path
