# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Atomic file writes: a crash or a kill never leaves half a file behind, the old version stays until the new one
is complete. Appends that a failed write never leaves half done, for files that grow line by line.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from ..errors import ResultsStoreError

__all__ = ["write_atomically", "append_whole", "cut_unterminated_tail", "default_file_mode", "give_default_modes"]


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, flush it to disk, then rename it over `path`."""
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


def append_whole(path: str | os.PathLike, data: str) -> Path:
    """Append `data` (whole lines) to `path` and flush it to disk; on a failed write, cut the file back to its size."""
    path = Path(path)
    payload = data.encode("utf-8")
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, default_file_mode())
    except OSError as error:
        raise _unwritable(path, error) from error
    try:
        size = os.fstat(descriptor).st_size
        try:
            written = 0
            while written < len(payload):
                written += os.write(descriptor, payload[written:])
            os.fsync(descriptor)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, size)
            if isinstance(error, OSError):
                raise _unwritable(path, error) from error
            raise
    finally:
        os.close(descriptor)
    return path


def cut_unterminated_tail(path: str | os.PathLike) -> bool:
    """Remove an unterminated last line from a file written with `append_whole` (a write its writer did not finish)."""
    path = Path(path)
    try:
        with open(path, "rb+") as handle:
            data = handle.read()
            if not data or data.endswith(b"\n"):
                return False
            handle.truncate(data.rfind(b"\n") + 1)
            handle.flush()
            os.fsync(handle.fileno())
    except FileNotFoundError:
        return False
    except OSError as error:
        raise _unwritable(path, error) from error
    return True


#: Where Linux (4.7 and later) shows the process umask, the line ``Umask:\t0022``.
_PROC_STATUS = "/proc/self/status"


def default_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file: 0o666 less the process umask (0o644 typically)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(_PROC_STATUS).read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    with tempfile.TemporaryDirectory() as folder:
        probe = os.path.join(folder, "probe")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o666))  # the kernel applies the umask
        return stat.S_IMODE(os.stat(probe).st_mode)


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
