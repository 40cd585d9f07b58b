# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The Hugging Face Hub, as every part of the package talks to it: fetching checkpoints, checking a sweep's revisions
before it starts, pushing and loading tangents, the cache a sweep fetches into, and saying what went wrong."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from huggingface_hub import constants
from huggingface_hub import errors as hub_errors
from huggingface_hub.utils import _http as _hub_http
from tqdm.auto import tqdm

from ..errors import AnisotropyError, CheckpointError, EnvironmentWarning, ResultsStoreError
from .files import load_json, write_atomically
from .options import POSITIVE_NUMBER

logger = logging.getLogger(__name__)

#: Files fetched with every checkpoint: config, generation config, tokenizer files, weight indexes.
CONFIG_PATTERNS: tuple[str, ...] = ("*.json", "*.txt", "*.model", "*.tiktoken")
#: Weight files, in order of preference: safetensors, else PyTorch pickles (never optimizer or trainer state).
WEIGHT_PATTERNS: tuple[tuple[str, ...], ...] = (("*.safetensors",), ("pytorch_model*.bin", "model*.bin"))
#: Seconds every Hub request may wait to connect, or for its next bytes (`hub_timeout`, `--hub-timeout`): a per-read
#: deadline, and a request that waited it out is not sent again (`bounded`; docs/reliability.md).
DEFAULT_HUB_TIMEOUT = 10.0
#: The values `hub_timeout` takes.
HUB_TIMEOUT = dataclasses.replace(
    POSITIVE_NUMBER, expected="a positive number of seconds (the wait for the Hub to connect or send its next bytes)"
)
#: Seconds `hub_call` waits before each new try after a server error (5xx, 408, 429) or a dropped connection (not
#: after a timeout: the request already waited the deadline).
HUB_RETRY_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)
#: How many times `hub_call` tries a call again (one per `HUB_RETRY_WAITS`).
HUB_RETRIES = len(HUB_RETRY_WAITS)
#: The file of a results directory recording the snapshots its Hub repositories had before its first run.
BEFORE_FILE = "hub_cache_before.json"
#: The command line of huggingface_hub, shipped by every version that transformers 4.57 and later accepts.
HUB_CLI = "hf"
#: The HTTP library huggingface_hub sends its requests with: httpx2 (2.x), httpx (1.x), None (0.x: requests).
httpx = getattr(_hub_http, "httpx2", None) or getattr(_hub_http, "httpx", None)
if httpx is not None:
    _TIMEOUTS, _FAILURES, _TRANSPORT = httpx.TimeoutException, httpx.TransportError, httpx.BaseTransport
else:
    import requests
    from urllib3.exceptions import ReadTimeoutError

    _TIMEOUTS, _FAILURES = requests.exceptions.Timeout, requests.exceptions.ConnectionError
    _TRANSPORT = requests.adapters.BaseAdapter

_T = TypeVar("_T")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def download_command(repo_id: str, revision: str | None) -> str:
    """The shell command that downloads one revision of a repository with the installed `huggingface_hub`."""
    return f"{HUB_CLI} download {repo_id}" + (f" --revision {revision}" if revision else "")


def is_offline() -> bool:
    """Whether the Hub is offline (`HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE`)."""
    return constants.HF_HUB_OFFLINE or any(
        os.environ.get(v, "").upper() in {"1", "ON", "YES", "TRUE"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def cache_location(cache_dir: str | os.PathLike | None) -> str:
    """The Hugging Face cache folder in use."""
    return os.fspath(cache_dir) if cache_dir is not None else str(constants.HF_HUB_CACHE)


def check_hub_timeout(value: Any) -> float:
    """A Hub deadline in seconds: a positive finite number; None means `DEFAULT_HUB_TIMEOUT`."""
    return DEFAULT_HUB_TIMEOUT if value is None else float(HUB_TIMEOUT.check("hub_timeout", value))


# --------------------------------------------------------------------------------------------------------------- calls


def hub_call(
    action: Callable[[], _T],
    repo_id: str,
    revision: str | None,
    *,
    timeout: float | None = None,
    error: type[AnisotropyError] = CheckpointError,
    label: str = "",
    verb: str = "fetch",
    cache_dir: str | os.PathLike | None = None,
) -> _T:
    """Runs one Hub call (`action`, which sends huggingface_hub requests) the way every Hub call of the package runs."""
    seconds = check_hub_timeout(timeout)
    waits = () if is_offline() else HUB_RETRY_WAITS
    with bounded(seconds):
        for attempt in itertools.count():  # the tries end by a return or a raise
            try:
                return action()
            except AnisotropyError:
                raise
            except Exception as failure:  # noqa: BLE001  (huggingface_hub's and httpx's errors, sorted by _kind)
                kind = _kind(failure)
                if kind in ("server", "network") and attempt < len(waits):
                    logger.info("%s on %s, try %d: %s", kind, repo_id, attempt + 1, _first_line(failure))
                    time.sleep(waits[attempt])
                    continue
                if kind is None and not isinstance(failure, (OSError, ValueError)):
                    raise
                if kind in ("timeout", "network", None) and is_offline():
                    kind = "offline"
                message = _MESSAGES[kind].format(
                    shown=_shown(repo_id, revision, label),
                    repo_id=repo_id,
                    revision=revision,
                    where=constants.ENDPOINT,
                    cli=HUB_CLI,
                    command=download_command(repo_id, revision),
                    original=f" ({type(failure).__name__}: {_first_line(failure)})",
                    seconds=seconds,
                    cache=cache_location(cache_dir),
                )
                if kind in ("server", "network") and waits:
                    message += f" (tried {len(waits) + 1} times)"
                raise error(message.replace("Cannot fetch", f"Cannot {verb}", 1)) from failure


def fetch(
    repo_id: str,
    revision: str | None,
    *,
    cache_dir: str | os.PathLike | None = None,
    label: str = "",
    quiet: bool = False,
    timeout: float | None = None,
) -> str:
    """Downloads a checkpoint's files into the Hugging Face cache (offline: finds them there) and returns the folder."""
    from huggingface_hub import snapshot_download

    offline, seconds = is_offline(), check_hub_timeout(timeout)
    options: dict[str, Any] = {
        "revision": revision,
        "cache_dir": cache_dir,
        "local_files_only": offline,
        "etag_timeout": seconds,
        **({"tqdm_class": _SilentBar} if quiet else {}),
    }

    def snapshot() -> str:  # offline, both calls find the cached snapshot folder
        folder = snapshot_download(repo_id, allow_patterns=[*CONFIG_PATTERNS, *WEIGHT_PATTERNS[0]], **options)
        if not any(Path(folder).glob(WEIGHT_PATTERNS[0][0])):  # no safetensors: PyTorch weights
            folder = snapshot_download(repo_id, allow_patterns=list(WEIGHT_PATTERNS[1]), **options)
        return folder

    folder = hub_call(snapshot, repo_id, revision, timeout=seconds, label=label, cache_dir=cache_dir)
    logger.info("%s %s into %s.", "Found" if offline else "Fetched", _shown(repo_id, revision, label), folder)
    return folder


def check_revisions(
    checkpoints: Iterable[Any], *, cache_dir: str | os.PathLike | None = None, timeout: float | None = None
) -> None:
    """Checks, before any is loaded, that every Hub revision of some checkpoints exists (offline: is cached)."""
    seconds = check_hub_timeout(timeout)
    wanted = list(checkpoints)
    if is_offline():
        missing = [item for item in wanted if not _cached(*item[:2], cache_dir)]
        if missing:
            commands = some([f"`{download_command(repo_id, revision)}`" for repo_id, revision, _ in missing], 3)
            raise CheckpointError(
                f"{len(missing)} checkpoint(s) are not in the local Hugging Face cache ({cache_location(cache_dir)}) "
                f"and the Hub is offline (HF_HUB_OFFLINE=1): {_listed(missing)}. Fetch them on a machine with network "
                f"({commands}) and copy the cache here, set HF_HOME / HF_HUB_CACHE to a cache that holds "
                "them, or unset HF_HUB_OFFLINE."
            )
        return
    refs = {repo_id: _refs(repo_id, seconds) for repo_id in dict.fromkeys(repo_id for repo_id, _, _ in wanted)}
    missing = [
        (repo_id, at, label)
        for repo_id, at, label in wanted
        if at is not None and refs[repo_id] is not None and not _COMMIT.match(at) and at not in refs[repo_id]
    ]
    if missing:
        listings = ", ".join(
            f"huggingface_hub.list_repo_refs({repo!r})" for repo in sorted({r for r, _, _ in missing})
        )
        raise CheckpointError(
            f"{len(missing)} revision(s) do not exist on {constants.ENDPOINT}: {_listed(missing)}. Nothing was "
            f"computed. Check the steps against the repository's branches ({listings}), or leave these checkpoints out."
        )


def _refs(repo_id: str, timeout: float = DEFAULT_HUB_TIMEOUT) -> set[str] | None:
    """The repository's branch and tag names; None (with a warning) when the server or network failed."""
    from huggingface_hub import HfApi

    try:
        refs = hub_call(
            lambda: HfApi().list_repo_refs(repo_id), repo_id, None, timeout=timeout, verb="list the revisions of"
        )
    except CheckpointError as error:  # sorted by _kind: a missing or refused repository ends the sweep
        if _kind(error) in ("repo", "gated", "auth", "timeout"):
            raise
        cause = error.__cause__ or error
        warnings.warn(
            f"Could not list the revisions of {repo_id} on {constants.ENDPOINT} ({type(cause).__name__}: "
            f"{_first_line(cause)}, tried {HUB_RETRIES + 1} times); each revision is checked when it is loaded.",
            EnvironmentWarning,
            stacklevel=4,
        )
        return None
    return {ref.name for ref in [*refs.branches, *refs.tags]}


def _cached(repo_id: str, revision: str | None, cache_dir: str | os.PathLike | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision), str)
    except ValueError:  # not a valid repository id: nothing is cached under it
        return False


# ----------------------------------------------------------------------------------------------------- what went wrong
#: What `hub_call` says for each kind of failure (`_kind`; "offline": any other failure while offline): what went
#: wrong, naming the endpoint in use and the installed download command, and what to do.
_MESSAGES: dict[str | None, str] = {
    "revision": "Cannot fetch {shown}: revision {revision!r} does not exist in {repo_id} on {where}. List its revisions "
    "with huggingface_hub.list_repo_refs({repo_id!r}) (or {where}/{repo_id}/tree/main), and check the step.",
    "gated": "Cannot fetch {shown}: {repo_id} on {where} is gated. Accept its conditions at {where}/{repo_id}, then log "
    "in with `{cli} auth login` (or set HF_TOKEN).{original}",
    "auth": "Cannot fetch {shown}: {where} refused access (authentication). Log in with `{cli} auth login` or set "
    "HF_TOKEN to a token that can read {repo_id}.{original}",
    "repo": "Cannot fetch {shown}: repository {repo_id} does not exist on {where} (or is private: log in with `{cli} "
    "auth login`). Check the model id.{original}",
    "server": "Cannot fetch {shown}: the Hub server {where} answered with a server error{original}. The repository and "
    "revision may well exist: retry later (or fetch it with `{command}`).",
    "timeout": "Cannot fetch {shown}: the Hub server {where} did not answer within hub_timeout = {seconds:g} s (no byte "
    "for that long){original}. Check the connection and HF_ENDPOINT; on a slow network or proxy raise hub_timeout "
    "(CLI: --hub-timeout), the seconds each request may wait to connect or for its next bytes. Or fetch it with "
    "`{command}`.",
    "network": "Cannot fetch {shown}: the network failed while talking to {where}{original}. Check the connection (and "
    "HF_ENDPOINT), then retry: files already complete are not fetched again. Or fetch it with `{command}`.",
    "offline": "Cannot load {shown}: the Hugging Face Hub is offline (HF_HUB_OFFLINE=1) and this revision is not in the "
    "local cache ({cache}). Fetch it on a machine with network with `{command}` and copy the cache here, or set HF_HOME "
    "/ HF_HUB_CACHE to a cache that holds it.{original}",
    None: "Cannot fetch {shown} from {where}{original}. Fetch it with `{command}` to see the details.",
}


_NAMED = {hub_errors.RevisionNotFoundError: "revision", hub_errors.GatedRepoError: "gated"}
_NAMED[hub_errors.RepositoryNotFoundError] = "repo"


def _kind(error: BaseException) -> str | None:
    """The failure behind an error of huggingface_hub, its HTTP library (httpx, httpx2 or, before 1.0, requests) or
    transformers: its first recognised cause."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        for named, kind in _NAMED.items():  # the subclasses first
            if isinstance(cause, named):
                return kind
        response = cause.response if isinstance(cause, hub_errors.HfHubHTTPError) else None
        status = response.status_code if response is not None else 0  # a requests.Response of a 4xx is falsy
        if status in (401, 403):
            return "auth"
        if status >= 500 or status in (408, 429):
            return "server"
        if isinstance(cause, (_TIMEOUTS, TimeoutError)):
            return "timeout"
        if isinstance(cause, (_FAILURES, hub_errors.OfflineModeIsEnabled, ConnectionError)):
            return "network"
        cause = cause.__cause__ or cause.__context__
    return None


class _SilentBar(tqdm):
    """A tqdm bar that shows nothing, for `snapshot_download`'s bars."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("name", None)  # huggingface_hub's own bars take a name; tqdm's do not
        super().__init__(*args, **{**kwargs, "disable": True})


def _shown(repo_id: str, revision: str | None, label: str) -> str:
    at = f"{repo_id!r}" + (f" at revision {revision!r}" if revision is not None else "")
    return f"checkpoint {label} ({at})" if label else at


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"


def _listed(missing: list[tuple[str, str | None, str]]) -> str:
    return ", ".join(f"{label} ({repo_id} @ {revision or 'main'})" for repo_id, revision, label in missing)


def some(names: Iterable[Any], shown: int = 5) -> str:
    """The first `shown` names, and how many more."""
    names = list(names)
    return ", ".join(map(str, names[:shown])) + (f" and {len(names) - shown} more" if len(names) > shown else "")


# -------------------------------------------------------------------------------------------------------- the deadline


class HubStalled(TimeoutError):
    """A request that already waited out the deadline, refused instead of sent again (not an error of the HTTP
    library, so that huggingface_hub does not retry it)."""


_LOCK = threading.Lock()
_BLOCKS: dict[int, float] = {}  # the `bounded` blocks running, in any thread: id -> deadline in seconds
_STALLED: dict[tuple[str, str], frozenset[int]] = {}  # (method, url) that waited out the deadline -> blocks then
_IDS = itertools.count()


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[float]:
    """Gives every request huggingface_hub sends inside the block the deadline `seconds` (`DEFAULT_HUB_TIMEOUT`)."""
    _guard_factory()
    with _LOCK:
        block = next(_IDS)
        _BLOCKS[block] = seconds
    try:
        yield seconds
    finally:
        with _LOCK:
            del _BLOCKS[block]
            for key in [key for key, blocks in _STALLED.items() if not blocks & _BLOCKS.keys()]:
                del _STALLED[key]  # the calls that saw it stall are over: a later call may send it again


def _start(method: str | None, url: Any) -> tuple[tuple[str, str], float | None]:
    """The request's key (method, URL without its query) and the deadline of the `bounded` blocks running (the
    smallest; None outside any); refuses a request that stalled."""
    key = (method or "GET", urlsplit(str(url))._replace(query="", fragment="").geturl())
    with _LOCK:
        seconds = min(_BLOCKS.values(), default=None)
        stalled = key in _STALLED
    if stalled:
        raise HubStalled(f"{key[0]} {key[1]} already waited {seconds:g} s for an answer; not sent again")
    return key, seconds


@contextlib.contextmanager
def _watching(key: tuple[str, str], timeouts: type[BaseException] | tuple[type[BaseException], ...]) -> Iterator[None]:
    """Records a stall of the request `key` (a timeout in the block) for the `bounded` blocks running."""
    try:
        yield
    except timeouts:
        with _LOCK:
            if _BLOCKS:
                _STALLED[key] = frozenset(_BLOCKS)
        raise


def _cap(given: float | None, seconds: float | None) -> float | None:
    """The shorter of a request's own timeout and the deadline (None: no limit)."""
    return min((limit for limit in (given, seconds) if limit is not None), default=None)


class _Guard(_TRANSPORT):
    """An httpx transport (or, before huggingface_hub 1.0, a `requests` adapter: its retries of timeouts catch
    `requests` errors only) that applies the deadline to the requests it carries and refuses a stalled request."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def handle_request(self, request: Any) -> Any:  # httpx
        key, seconds = _start(request.method, request.url)
        given = request.extensions.get("timeout") or {}
        timeout = {kind: _cap(given.get(kind), seconds) for kind in ("connect", "read", "write", "pool")}
        request.extensions = {**request.extensions, "timeout": timeout}
        with _watching(key, _TIMEOUTS):
            response = self.inner.handle_request(request)
        response.stream = _GuardedBody(response.stream, key)
        return response

    def send(self, request: Any, timeout: Any = None, **kwargs: Any) -> Any:  # requests
        key, seconds = _start(request.method, request.url)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        with _watching(key, _TIMEOUTS):
            response = self.inner.send(request, timeout=(_cap(connect, seconds), _cap(read, seconds)), **kwargs)
        stream = response.raw.stream

        def guarded_stream(*args: Any, **options: Any) -> Iterator[bytes]:
            with _watching(key, ReadTimeoutError):
                yield from stream(*args, **options)

        response.raw.stream = guarded_stream  # what `Response.iter_content` reads the body with
        return response

    def close(self) -> None:
        self.inner.close()


def _guard_factory() -> None:
    """Wraps huggingface_hub's client (before 1.0: session) factory once, so that what it makes carries `_Guard`s."""
    import huggingface_hub

    factories = ("_GLOBAL_CLIENT_FACTORY", "set_client_factory"), ("_GLOBAL_BACKEND_FACTORY", "configure_http_backend")
    attribute, configure = factories[httpx is None]  # the second: huggingface_hub < 1.0
    with _LOCK:
        factory = getattr(_hub_http, attribute)
        if getattr(factory, "guarded", False):
            return

        def guarded() -> Any:
            client = factory()
            if httpx is None:  # a `requests` session
                for prefix, adapter in list(client.adapters.items()):
                    client.mount(prefix, _Guard(adapter))
            else:  # httpx keeps its transports in `_transport` and `_mounts`
                client._transport = _Guard(client._transport)
                client._mounts = {pattern: t and _Guard(t) for pattern, t in client._mounts.items()}
            return client

        guarded.guarded = True
        getattr(huggingface_hub, configure)(guarded)  # also drops the clients (sessions) made before


if httpx is not None:

    class _GuardedBody(httpx.SyncByteStream):
        """A response body whose reads record a stall of its request."""

        def __init__(self, inner: Any, key: tuple[str, str]) -> None:
            self.inner, self.key = inner, key

        def __iter__(self) -> Iterator[bytes]:
            with _watching(self.key, _TIMEOUTS):
                yield from self.inner

        def close(self) -> None:
            self.inner.close()


# ----------------------------------------------------------------------------------------------------------- the cache


def _snapshot_commits(cache: str | os.PathLike, repo_id: str) -> set[str]:
    """The commits of a model repository that have a snapshot folder in the cache (complete or not)."""
    from huggingface_hub.file_download import repo_folder_name

    snapshots = Path(cache).expanduser() / repo_folder_name(repo_id=repo_id, repo_type="model") / "snapshots"
    try:
        return {entry.name for entry in snapshots.iterdir() if entry.is_dir()}
    except OSError:  # no such folder: nothing of this repository is cached
        return set()


def cached_before(record: str | os.PathLike, cache: str | os.PathLike, repos: Iterable[str]) -> dict[str, set[str]]:
    """The commits each repository had in the cache before the sweep's first run; records the new repositories."""
    record, cache = Path(record), str(Path(cache).expanduser().resolve())
    try:
        stored = load_json(record) if record.exists() else {}
    except ResultsStoreError:
        stored = {}  # a damaged record is listed again
    known = stored.get("snapshots", {}) if isinstance(stored, dict) and stored.get("cache") == cache else {}
    before = {repo: set(known[repo]) if repo in known else _snapshot_commits(cache, repo) for repo in repos}
    if set(before) - set(known):
        merged = {**known, **{repo: sorted(commits) for repo, commits in before.items()}}
        write_atomically(record, json.dumps({"cache": cache, "snapshots": merged}, indent=1, sort_keys=True))
    return before


def revision_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the files a snapshot folder holds, each blob counted once (what evicting it frees at most)."""
    blobs = {os.path.realpath(path) for path in Path(folder).rglob("*") if path.is_file()}
    return sum(os.path.getsize(blob) for blob in blobs)


def evict(cache: str | os.PathLike, commits: Iterable[str]) -> int:
    """Deletes revisions (by commit) from the cache, keeping the blobs other revisions still link to."""
    from huggingface_hub import scan_cache_dir

    strategy = scan_cache_dir(cache).delete_revisions(*commits)
    strategy.execute()
    return strategy.expected_freed_size
