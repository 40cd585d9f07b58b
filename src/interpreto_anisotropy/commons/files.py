# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Files read and written safely. Atomic writes: a crash or a kill never leaves half a file behind, the old version
stays until the new one is complete; appends that a failed write never leaves half done, for files that grow line by
line. Reads: the one way the package reads the JSON files it is given or finds (results folders, texts files,
checkpoint configs), bounded in size and depth, each failure our error naming the file."""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import AnisotropyError, ResultsStoreError


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


# -------------------------------------------------------------------------------------------------------------- reads
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

    def unreadable(why: Any) -> AnisotropyError:
        return error(f"{where} is not JSON that can be read ({why}). {advice}")

    try:
        value = json.loads(text, parse_constant=_refuse_constant if finite else None)
    except _NonFiniteConstant as failure:
        raise unreadable(f"{failure.args[0]} is no JSON number; a missing value is null") from None
    except json.JSONDecodeError as failure:
        place = "" if line is not None else f" at line {failure.lineno}, column {failure.colno}"
        raise error(f"{where} is not JSON ({failure.msg}{place}). {advice}") from None
    except RecursionError:
        raise unreadable(f"nested deeper than {max_depth} levels") from None
    except (ValueError, UnicodeDecodeError) as failure:  # an integer of more than 4300 digits, bytes not UTF-8
        raise unreadable(failure) from None
    depth, all_finite = _depth(value, max_depth)
    if depth > max_depth or (finite and not all_finite):
        raise unreadable(
            f"nested deeper than {max_depth} levels" if depth > max_depth else "a number beyond a float's range"
        )
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
