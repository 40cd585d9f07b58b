# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Atomic file writes: a crash or a kill never leaves half a file behind, the old version stays until the new one
is complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ..errors import ResultsStoreError

__all__ = ["write_atomically", "default_file_mode", "give_default_modes"]


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, flush it to disk, then rename it over `path`.

    Args:
        path: The file to (re)write; its folder is created if needed.
        data: Bytes, or text written as UTF-8.

    Returns:
        The path written.

    Raises:
        ResultsStoreError: The folder cannot be created or written (read-only, full disk, a file in the way, `path`
            a folder), naming the path. The temporary file is removed and the old file, if any, is left as it was.
            It is an `OSError` (with the original `errno`), so callers catching `OSError` keep working.

    Examples:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
        >>> write_atomically(target, '{"step": 0}\\n').read_text()
        '{"step": 0}\\n'
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    except OSError as error:
        raise _unwritable(path, error) from error
    try:
        with handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, default_file_mode())  # NamedTemporaryFile creates 0600
        os.replace(handle.name, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            Path(handle.name).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _unwritable(path, error) from error
        raise
    return path


def default_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file: 0o666 less the process umask (0o644 typically)."""
    umask = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(umask)
    return 0o666 & ~umask


def give_default_modes(folder: str | os.PathLike) -> None:
    """Give the files directly in `folder` `default_file_mode` (libraries that write through temporary files, such
    as safetensors under ``save_pretrained``, leave them 0600)."""
    mode = default_file_mode()
    for path in Path(folder).iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


def _unwritable(path: Path, error: OSError) -> ResultsStoreError:
    """Our error for a failed write of `path`, keeping the system's errno."""
    unwritable = ResultsStoreError(
        f"Cannot write {path}: {error.strerror or error}. Check that {path.parent} is a folder you can write to and "
        "that its disk has free space."
    )
    unwritable.errno = error.errno
    return unwritable
