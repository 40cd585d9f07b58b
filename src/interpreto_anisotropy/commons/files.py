# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Files written whole or not at all (atomic writes, whole-line appends) and read safely (bounded, strict JSON, each
failure our error naming the file)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import AnisotropyError, ResultsStoreError


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, flush it to disk, then rename it over `path`."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with _writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    with _writing(path, undo=lambda: Path(handle.name).unlink(missing_ok=True)):
        with handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, default_file_mode())  # NamedTemporaryFile creates 0600
        os.replace(handle.name, path)
    return path


def append_whole(path: str | os.PathLike, data: str) -> Path:
    """Append `data` (whole lines) to `path` and flush it to disk; on a failed write, cut the file back to its size."""
    path, payload = Path(path), data.encode("utf-8")
    with _writing(path):
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, default_file_mode())
    try:
        size = os.fstat(descriptor).st_size
        with _writing(path, undo=lambda: os.ftruncate(descriptor, size)):
            written = 0
            while written < len(payload):
                written += os.write(descriptor, payload[written:])
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


def cut_unterminated_tail(path: str | os.PathLike) -> bool:
    """Remove an unterminated last line from a file written with `append_whole` (a write its writer did not finish)."""
    path = Path(path)
    with _writing(path), contextlib.suppress(FileNotFoundError), open(path, "rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)
            handle.flush()
            os.fsync(handle.fileno())
            return True
    return False


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
    """Give the files directly in `folder` `default_file_mode` (safetensors' ``save_pretrained`` leaves them 0600)."""
    mode = default_file_mode()
    for path in Path(folder).iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


@contextlib.contextmanager
def _writing(path: Path, undo: Callable[[], Any] | None = None) -> Iterator[None]:
    """On any failure inside the block, `undo` (if given); an `OSError` becomes our error naming `path` (same errno)."""
    try:
        yield
    except BaseException as error:
        if undo is not None:
            with contextlib.suppress(OSError):
                undo()
        if not isinstance(error, OSError):
            raise
        unwritable = ResultsStoreError(
            f"Cannot write {path}: {error.strerror or error}. Check that {path.parent} is a folder you can write to "
            "and that its disk has free space."
        )
        unwritable.errno = error.errno
        raise unwritable from error


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
) -> str:
    """The text of a file, decoded strictly, refused when larger than `MAX_BYTES`."""
    return _read(Path(path), error, advice, encoding)[0]


def read_whole_lines(
    path: str | os.PathLike, *, error: type[AnisotropyError] = ResultsStoreError, advice: str = _ADVICE
) -> tuple[str, bool]:
    """The text of a file that grows by appends, up to its last newline: (text, whether a tail was left out)."""
    return _read(Path(path), error, advice, "utf-8", whole_lines=True)


def _read(path: Path, error: type[AnisotropyError], advice: str, encoding: str, whole_lines: bool = False) -> Any:
    try:
        if (size := path.stat().st_size) > MAX_BYTES:
            raise error(f"{path} is {size:,} bytes, more than the {MAX_BYTES:,} read at most. {advice}")
        data = path.read_bytes()
    except OSError as failure:
        raise error(f"Cannot read {path}: {failure.strerror or failure}. {advice}") from failure
    whole = data[: data.rfind(b"\n") + 1] if whole_lines else data
    try:
        return whole.decode(encoding), len(whole) < len(data)
    except UnicodeDecodeError as failure:
        line = whole[: failure.start].count(b"\n") + 1
        raise error(f"{path} is not UTF-8 text (line {line}: {failure.reason}). {advice}") from None


def parse_json(
    text: str | bytes,
    path: str | os.PathLike,
    *,
    line: int | None = None,
    error: type[AnisotropyError] = ResultsStoreError,
    advice: str = _ADVICE,
    finite: bool = True,
) -> Any:
    """The JSON value of `text` (a file's content, or one of its lines), nested at most `MAX_DEPTH` deep."""
    where = f"Line {line} of {path}" if line is not None else str(path)

    def unreadable(why: Any) -> AnisotropyError:
        return error(f"{where} is not JSON that can be read ({why}). {advice}")

    try:
        value = json.loads(text, parse_constant=_refuse_constant if finite else None)
    except json.JSONDecodeError as failure:
        place = "" if line is not None else f" at line {failure.lineno}, column {failure.colno}"
        raise error(f"{where} is not JSON ({failure.msg}{place}). {advice}") from None
    except RecursionError:
        raise unreadable(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as failure:  # NaN, an integer of more than 4300 digits, bytes not UTF-8
        raise unreadable(failure) from None
    depth, all_finite = _depth(value)
    if depth > MAX_DEPTH or (finite and not all_finite):
        raise unreadable(
            f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else "a number beyond a float's range"
        )
    return value


def load_json(
    path: str | os.PathLike,
    *,
    error: type[AnisotropyError] = ResultsStoreError,
    advice: str = _ADVICE,
    finite: bool = True,
) -> Any:
    """The JSON value of a whole file (`read_text` then `parse_json`)."""
    text = read_text(path, error=error, advice=advice)
    return parse_json(text, path, error=error, advice=advice, finite=finite)


def json_lines(
    text: str, path: str | os.PathLike, *, error: type[AnisotropyError] = ResultsStoreError, advice: str = _ADVICE
) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line of a JSON-lines text (lines end at "\\n" only)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, parse_json(line, path, line=number, error=error, advice=advice)


def checked_lines(
    text: str, path: str | os.PathLike, problem: Callable[[Any], str | None], *, what: str, advice: str
) -> list[Any]:
    """The JSON value of each non-blank line of a JSON-lines text (lines end at "\\n" only), refused with the line's
    number when it is no JSON or `problem` names what is wrong with it."""
    lines, values = text.split("\n"), []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            wrong = problem(value := parse_json(line, path, line=number))
        except ResultsStoreError:
            wrong = "not JSON"
        if wrong is not None:
            torn = " (an interrupted or edited last line)" if number == len(lines) else ""  # no newline after it
            raise ResultsStoreError(f"Line {number} of {path} is not {what}{torn}: {wrong}. {advice}")
        values.append(value)
    return values


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is no JSON number; a missing value is null")


def _depth(value: Any) -> tuple[int, bool]:
    """(the nesting depth of a parsed value, counted without recursion up to `MAX_DEPTH` + 1; whether it is finite)."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, float) and not math.isfinite(item):
            return deepest, False
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest, True
