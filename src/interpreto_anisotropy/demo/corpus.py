# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A toy corpus of real English text available offline: the docstrings of the installed Python standard library."""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import itertools
import json
import logging
import os
import platform
import sys
import sysconfig
import tokenize
import warnings
from enum import Enum
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..commons.progress import progress_bar
from ..errors import EnvironmentWarning, InvalidInputError

logger = logging.getLogger(__name__)

CACHE_ENV_VAR = "INTERPRETO_ANISOTROPY_CACHE"
"""Environment variable that overrides the cache directory."""

_FORMAT_VERSION = 1
_MAX_TEXT_CHARS = 2000  # size cap of one text; longer docstrings are cut at a paragraph or line break
_MAX_TOTAL_CHARS = 20_000_000  # size cap of the whole harvest
_HARVEST_MIN_CHARS = 16  # texts shorter than this are never stored
_SPLIT_ENDS = (("fit", 10), ("probe", 20), ("train", 100))  # the splits' last hash bucket (excluded), of 100
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)  # the nodes with a docstring

# Folders of the standard library that hold no prose worth learning from (tests, generated code, bundles).
_SKIPPED_DIRS = frozenset(
    "test tests idle_test idlelib site-packages dist-packages lib2to3 turtledemo ensurepip encodings pydoc_data "
    "lib-dynload __pycache__ __phello__".split()
)


class Split(str, Enum):
    """Splits of the toy corpus: ``fit`` (tangent subspaces), ``probe`` (gradients), ``train`` (toy training)."""

    TRAIN = "train"
    FIT = "fit"
    PROBE = "probe"
    ALL = "all"


def parse_choice(value: object, kind: type[Enum], what: str) -> Any:
    """`value` as a member of the enum `kind`, with an error of ours naming `what` and the choices when unknown."""
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(repr(member.value) for member in kind)
        raise InvalidInputError(f"Unknown {what} {value!r}; choose one of {known}.") from None


def check_int(name: str, value: object, *, minimum: int = 1) -> None:
    """Refuses a `value` that is not an integer (bools aside) >= `minimum`, with an error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}; got {value!r}.")


def default_cache_dir() -> Path:
    """The cache directory: ``$INTERPRETO_ANISOTROPY_CACHE`` if set, else ``~/.cache/interpreto_anisotropy``."""
    return Path(os.environ.get(CACHE_ENV_VAR) or "~/.cache/interpreto_anisotropy").expanduser()


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"] or os.path.dirname(os.__file__)).resolve()


def _python_tag() -> str:
    return f"{platform.python_implementation().lower()}-{sys.version_info.major}.{sys.version_info.minor}"


def corpus_cache_path(*, include_comments: bool = False, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of the cache file of the harvest for this Python version."""
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    kind = "docstrings+comments" if include_comments else "docstrings"
    return directory / f"stdlib-{kind}-{_python_tag()}-v{_FORMAT_VERSION}.json"


def _source_files(root: Path) -> list[Path]:
    """The standard library's ``.py`` files worth harvesting, sorted by their path relative to ``root``."""
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(
            d for d in subdirs if d not in _SKIPPED_DIRS and not d.startswith(("test", "config-", "."))
        )
        skipped = ("test", "_test", "_sysconfigdata")
        files += [Path(directory) / name for name in names if name.endswith(".py") and not name.startswith(skipped)]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _cap(text: str) -> str:
    """Cuts ``text`` to the size cap, at the last paragraph (or line) break before it when there is one."""
    if len(text) <= _MAX_TEXT_CHARS:
        return text
    head = text[:_MAX_TEXT_CHARS]
    for separator in ("\n\n", "\n"):
        cut = head.rfind(separator)
        if cut >= _MAX_TEXT_CHARS // 2:
            return head[:cut].rstrip()
    return head.rstrip()


def _comment_blocks(source: str) -> list[str]:
    """Runs of comment lines on consecutive lines, joined into one text each (shebangs, licences and pragmas dropped)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    comments = [token for token in tokens if token.type == tokenize.COMMENT]
    blocks = []
    for _, run in itertools.groupby(enumerate(comments), key=lambda pair: pair[1].start[0] - pair[0]):
        bodies = [token.string.lstrip("#").strip() for _, token in run]
        skipped = ("!", "-*-", "type:", "noqa", "pragma", "fmt:")
        blocks.append(" ".join(body for body in bodies if body and not body.startswith(skipped)))
    return [b for b in blocks if b and "copyright" not in b.lower() and "license" not in b.lower()]


def _harvest(root: Path, *, include_comments: bool, progress: bool) -> list[str]:
    """All cleaned, deduplicated texts of the standard library under ``root``, in file order."""
    texts: list[str] = []
    seen: set[str] = set()
    total = 0
    files = _source_files(root)
    for path in progress_bar(files, progress=progress, desc="Harvesting stdlib docstrings"):
        try:
            source = path.read_bytes().decode("utf-8")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source, filename=str(path))
        except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
            continue
        documented = [node for node in ast.walk(tree) if isinstance(node, _DOCUMENTED)]
        candidates = [doc for node in documented if (doc := ast.get_docstring(node, clean=True))]
        if include_comments:
            candidates += _comment_blocks(source)
        for raw in candidates:
            text = _cap(inspect.cleandoc(raw).strip())
            if len(text) < _HARVEST_MIN_CHARS or text in seen:
                continue
            seen.add(text)
            texts.append(text)
            total += len(text)
            if total >= _MAX_TOTAL_CHARS:
                return texts
    return texts


def _split_of(key: bytes) -> str:
    bucket = int.from_bytes(key[:4], "big") % 100
    return next(name for name, end in _SPLIT_ENDS if bucket < end)


def _read_cache(path: Path, stdlib: Path) -> list[str] | None:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or any(payload.get(key) != value for key, value in _header(stdlib).items()):
        return None
    return payload["texts"] if isinstance(payload.get("texts"), list) else None


def _header(stdlib: Path) -> dict[str, object]:
    """What a cache file must say to be read back (format, Python version, standard library)."""
    return {"format_version": _FORMAT_VERSION, "python": _python_tag(), "stdlib": str(stdlib)}


_MEMORY: dict[tuple[str, str], list[str]] = {}


def _all_texts(*, include_comments: bool, cache_dir: str | os.PathLike | None, progress: bool) -> list[str]:
    """The harvest, from memory, from the disk cache, or harvested now (and cached)."""
    path = corpus_cache_path(include_comments=include_comments, cache_dir=cache_dir)
    stdlib = _stdlib_dir()
    key = (str(path), str(stdlib))
    if key in _MEMORY:
        return _MEMORY[key]
    texts = _read_cache(path, stdlib)
    if texts is None:
        logger.info("Harvesting the docstrings of %s (once: the corpus is then cached in %s).", stdlib, path)
        texts = _harvest(stdlib, include_comments=include_comments, progress=progress)
        payload = {**_header(stdlib), "include_comments": include_comments, "texts": texts}
        try:
            write_atomically(path, json.dumps(payload, ensure_ascii=False))
        except OSError as error:
            message = f"Could not write the corpus cache {path} ({error}); the harvest will be redone next time. Set {CACHE_ENV_VAR} to a writable directory to avoid this."
            warnings.warn(message, EnvironmentWarning, stacklevel=3)
    _MEMORY[key] = texts
    return texts


def load_corpus(
    split: str | Split = "train",
    *,
    max_texts: int | None = None,
    min_chars: int = 64,
    include_comments: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[str]:
    """Loads the toy corpus: docstrings of the installed Python standard library, one text a docstring.

    The split of a text depends only on a SHA-1 hash of its content: 80 % ``"train"``, 10 % ``"fit"`` and
    10 % ``"probe"``, disjoint. Within a split, texts are ordered by that hash (a fixed pseudo-random order),
    so ``max_texts`` takes a varied sample rather than the first modules alphabetically. The first call on a
    machine harvests the standard library (tens of seconds, with a progress bar) and caches the result;
    later calls read the cache (well under a second).

    Args:
        split: ``"train"`` (toy training), ``"fit"`` (fitting tangent subspaces), ``"probe"`` (probing
            gradients) or ``"all"``.
        max_texts: Keep at most this many texts (the first in the split's order); ``None`` keeps all.
        min_chars: Drop texts shorter than this many characters.
        include_comments: Also harvest blocks of consecutive ``#`` comments (cached separately).
        cache_dir: Cache directory; defaults to ``$INTERPRETO_ANISOTROPY_CACHE`` or
            ``~/.cache/interpreto_anisotropy``. An unwritable cache only costs a warning.
        progress: Show a progress bar while harvesting.

    Returns:
        A new list of texts (plain ``str``), the same for the same arguments and Python version.

    Raises:
        InvalidInputError: If ``split`` is unknown, or ``max_texts`` or ``min_chars`` is not a non-negative integer.

    Examples:
        >>> texts = load_corpus("fit", max_texts=100, progress=False)
        >>> len(texts), all(len(t) >= 64 for t in texts)
        (100, True)
    """
    split = parse_choice(split, Split, "corpus split")
    for name, value in (("max_texts", 0 if max_texts is None else max_texts), ("min_chars", min_chars)):
        check_int(name, value, minimum=0)

    texts = _all_texts(include_comments=include_comments, cache_dir=cache_dir, progress=progress)
    keyed = sorted((hashlib.sha1(text.encode("utf-8")).digest(), text) for text in texts if len(text) >= min_chars)
    if split is not Split.ALL:
        keyed = [(key, text) for key, text in keyed if _split_of(key) == split.value]
    selected = [text for _, text in keyed]
    return selected if max_texts is None else selected[:max_texts]
