# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Fetching Hub checkpoints, checking a sweep's revisions before it starts, and saying what went wrong.

Everything here goes through `huggingface_hub`'s own calls (`snapshot_download`, `HfApi.list_repo_refs`,
`try_to_load_from_cache`), so its cache, its resumable downloads (``.incomplete`` files) and its retries apply
(`hub_call` adds the retries of whole calls that it lacks), and `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_HOME` and `HF_HUB_CACHE` are honoured.

* `fetch` downloads (or, offline, finds in the cache) the files a checkpoint needs, the config, tokenizer and weight
  files (safetensors, else PyTorch `.bin`), and returns the snapshot folder `from_pretrained` then reads.
* `check_revisions` lists each repository's refs once and fails naming every missing revision at once; offline it
  looks for every revision in the local cache.
* Every request of both (refs, metadata, file listings, downloads) has the deadline `hub_timeout`
  (`hub_deadline.bounded`): seconds to connect, or between two reads of a download, and a request that waited it out
  is not retried, so a Hub that stalls fails in seconds while a long download goes on as long as bytes flow.
* `hub_call` is the one path of every Hub call of the package (a sweep's fetches and refs listing, checkpoint
  loading, `TangentExplainer.from_pretrained` and `push_to_hub`): the call runs under the deadline `hub_timeout`, a
  server error (5xx, 408, 429) or a dropped connection is retried `HUB_RETRIES` times (1 s, 2 s, 4 s apart), a 4xx
  error and a timeout are not, and the end is our error naming the repository, the revision and the server.
* `failure_message` tells a missing repository, a missing revision, an authentication failure, a server error, a
  timeout and a network failure apart, and names the endpoint in use and the download command the installed
  `huggingface_hub` ships (`hf download`; `huggingface-cli download` before 1.0).

Examples:
    >>> download_command("EleutherAI/pythia-70m", "step1000")  # doctest: +SKIP
    'hf download EleutherAI/pythia-70m --revision step1000'
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import AnisotropyError, CheckpointError, HubAccessWarning, InvalidInputError
from .hub_deadline import bounded

__all__ = [
    "CONFIG_PATTERNS",
    "DEFAULT_HUB_TIMEOUT",
    "HUB_RETRIES",
    "HUB_RETRY_WAITS",
    "WEIGHT_PATTERNS",
    "check_hub_timeout",
    "check_revisions",
    "download_command",
    "endpoint",
    "failure_message",
    "fetch",
    "hub_call",
    "hub_command",
    "is_offline",
]

logger = logging.getLogger(__name__)

#: Files fetched with every checkpoint: config, generation config, tokenizer files, weight indexes.
CONFIG_PATTERNS: tuple[str, ...] = ("*.json", "*.txt", "*.model", "*.tiktoken")
#: Weight files, in order of preference: safetensors, else PyTorch pickles (never optimizer or trainer state).
WEIGHT_PATTERNS: tuple[tuple[str, ...], ...] = (("*.safetensors",), ("pytorch_model*.bin", "model*.bin"))

#: Seconds every Hub request may wait to connect, or for its next bytes (the sweep option `hub_timeout`, the CLI's
#: `--hub-timeout`): a per-read deadline, not a whole-download one, and a request that waited it out is not retried
#: (`hub_deadline`). huggingface_hub's own default is 10 s for metadata and downloads, but none for listings (refs,
#: repository info), and it retries a stalled file's metadata 6 times: a stalled Hub could hold a sweep for hours.
DEFAULT_HUB_TIMEOUT = 10.0
#: Seconds `hub_call` waits before each new try after a server error (5xx, 408, 429) or a dropped connection: a
#: failing Hub fails a call after at most 4 tries and 7 s of waits (plus each try's own time, every wait of which is
#: bounded by the deadline). Timeouts are not retried: the request already waited the deadline (`hub_deadline`).
HUB_RETRY_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)
#: How many times `hub_call` tries a call again (one per `HUB_RETRY_WAITS`).
HUB_RETRIES = len(HUB_RETRY_WAITS)

_T = TypeVar("_T")

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_command() -> str:
    """The command line the installed `huggingface_hub` ships: `hf` (1.0 and later) or `huggingface-cli`."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        scripts = {
            entry.name
            for entry in distribution("huggingface_hub").entry_points
            if entry.group == "console_scripts" and entry.value.startswith("huggingface_hub")
        }
    except PackageNotFoundError:  # pragma: no cover - huggingface_hub comes with transformers
        scripts = set()
    for name in ("hf", "huggingface-cli"):
        if name in scripts:
            return name
    return "hf" if shutil.which("hf") or not shutil.which("huggingface-cli") else "huggingface-cli"


def download_command(repo_id: str, revision: str | None) -> str:
    """The shell command that downloads one revision of a repository with the installed `huggingface_hub`."""
    return f"{hub_command()} download {repo_id}" + (f" --revision {revision}" if revision else "")


def endpoint() -> str:
    """The Hub endpoint in use (`HF_ENDPOINT`, default https://huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def is_offline() -> bool:
    """Whether the Hub is offline (`HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE`)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return True
    return any(
        os.environ.get(v, "").upper() in {"1", "ON", "YES", "TRUE"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def cache_location(cache_dir: str | os.PathLike | None) -> str:
    """The Hugging Face cache folder in use."""
    from huggingface_hub import constants

    return os.fspath(cache_dir) if cache_dir is not None else str(constants.HF_HUB_CACHE)


def check_hub_timeout(value: Any, name: str = "hub_timeout") -> float:
    """A Hub deadline in seconds: a positive finite number; None means `DEFAULT_HUB_TIMEOUT`.

    Raises:
        InvalidInputError: Not a positive finite number.

    Examples:
        >>> check_hub_timeout(None), check_hub_timeout(3)
        (10.0, 3.0)
    """
    if value is None:
        return DEFAULT_HUB_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InvalidInputError(
            f"{name} must be a positive number of seconds (the wait for the Hub to connect or send its next bytes), "
            f"got {value!r}; the default is {DEFAULT_HUB_TIMEOUT:g}."
        )
    return float(value)


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
    """Runs one Hub call (`action`, which sends huggingface_hub requests) the way every Hub call of the package runs.

    Every request waits at most `timeout` to connect or for its next bytes (`bounded`; a stalled request is not sent
    again); a server error (5xx, 408, 429) or a dropped connection (reset, closed, truncated) is retried
    `HUB_RETRIES` times, `HUB_RETRY_WAITS` apart (1 s, 2 s then 4 s; not offline); a 4xx error, a timeout or another failure ends the
    call at once.

    Args:
        action: The call, without arguments (a `functools.partial` or a lambda).
        repo_id: The repository it talks to, for messages.
        revision: Its revision (None: the default branch), for messages.
        timeout: The deadline in seconds (None: `DEFAULT_HUB_TIMEOUT`).
        error: The error class of ours raised at the end.
        label: The checkpoint's or tangent's name, for messages.
        verb: What the call does, for messages ("fetch", "list the revisions of", "push to").
        cache_dir: The Hugging Face cache, for offline messages.

    Returns:
        What `action` returned.

    Raises:
        AnisotropyError: Of class `error`, naming the repository, the revision, the server and what went wrong.
    """
    seconds = check_hub_timeout(timeout)
    waits = () if is_offline() else HUB_RETRY_WAITS
    tries = len(waits) + 1
    with bounded(seconds):
        for attempt in range(tries):
            try:
                return action()
            except Exception as failure:  # noqa: BLE001  (huggingface_hub's and httpx's errors, sorted by _kind)
                kind = _kind(failure)
                if kind in ("server", "network") and attempt + 1 < tries and not isinstance(failure, AnisotropyError):
                    logger.info("%s on %s, try %d: %s", kind, repo_id, attempt + 1, _first_line(failure))
                    time.sleep(waits[attempt])
                    continue
                if kind is None and not isinstance(failure, (OSError, ValueError)):
                    raise
                if isinstance(failure, AnisotropyError):
                    raise
                message = failure_message(
                    failure, repo_id, revision, label=label, cache_dir=cache_dir, timeout=seconds
                )
                if kind in ("server", "network") and tries > 1:
                    message += f" (tried {tries} times)"
                raise error(message.replace("Cannot fetch", f"Cannot {verb}", 1)) from failure
    raise AssertionError("unreachable")  # pragma: no cover


def fetch(
    repo_id: str,
    revision: str | None,
    *,
    cache_dir: str | os.PathLike | None = None,
    label: str = "",
    quiet: bool = False,
    timeout: float | None = None,
) -> str:
    """Downloads a checkpoint's files into the Hugging Face cache (offline: finds them there) and returns the folder.

    `snapshot_download` returns once every file is complete, so the folder is never read half-downloaded. It runs
    through `hub_call` (a server error or a dropped connection is tried again, the files already complete kept).

    Args:
        repo_id: The Hub repository.
        revision: Its branch, tag or commit (None: the default branch).
        cache_dir: The Hugging Face cache (None: the default).
        label: The checkpoint's name, for messages.
        quiet: No huggingface_hub progress bars (a sweep shows its own).
        timeout: Seconds each request may wait to connect or for its next bytes (see `bounded`); None:
            `DEFAULT_HUB_TIMEOUT`.

    Returns:
        The snapshot folder holding the config, tokenizer and weight files of that revision.

    Raises:
        CheckpointError: The repository or revision does not exist, access is refused, the server or the network
            failed, the Hub did not answer within `timeout` (no byte for that long), or (offline) the revision is not
            cached; the message says which and what to do.
    """
    offline = is_offline()
    seconds = check_hub_timeout(timeout)
    folder = hub_call(
        lambda: _snapshot(repo_id, revision, cache_dir, offline, quiet, seconds),
        repo_id,
        revision,
        timeout=seconds,
        label=label,
        cache_dir=cache_dir,
    )
    if not (Path(folder) / "config.json").is_file():
        shown = _shown(repo_id, revision, label)
        raise CheckpointError(
            f"{shown} has no config.json in {folder}: it is not a saved transformers model"
            + (", or its cached copy is incomplete" if offline else "")
            + f". Check the repository's files, or fetch it again with `{download_command(repo_id, revision)}`."
        )
    logger.info("%s %s into %s.", "Found" if offline else "Fetched", _shown(repo_id, revision, label), folder)
    return folder


def _snapshot(
    repo_id: str,
    revision: str | None,
    cache_dir: str | os.PathLike | None,
    offline: bool,
    quiet: bool = False,
    timeout: float = DEFAULT_HUB_TIMEOUT,
) -> str:
    from huggingface_hub import snapshot_download

    options: dict[str, Any] = {
        "revision": revision,
        "cache_dir": cache_dir,
        "local_files_only": offline,
        "etag_timeout": timeout,
    }
    if quiet:
        options["tqdm_class"] = _silent_bar()
    if offline:
        return snapshot_download(repo_id, **options)
    folder = snapshot_download(repo_id, allow_patterns=[*CONFIG_PATTERNS, *WEIGHT_PATTERNS[0]], **options)
    if not any(Path(folder).glob(WEIGHT_PATTERNS[0][0])):  # no safetensors: PyTorch weights
        folder = snapshot_download(repo_id, allow_patterns=list(WEIGHT_PATTERNS[1]), **options)
    return folder


def check_revisions(
    checkpoints: Iterable[Any], *, cache_dir: str | os.PathLike | None = None, timeout: float | None = None
) -> None:
    """Checks, before any is loaded, that every Hub revision of some checkpoints exists (offline: is cached).

    Online, each repository's refs are listed once (`huggingface_hub.HfApi.list_repo_refs`); a revision that is
    neither a branch nor a tag is missing (a 40-hex commit is taken as is). A server or network failure of the listing
    only warns: each revision is then checked when it is loaded. A listing that gets no answer within `timeout`
    fails (every checkpoint would wait as long). Offline, each revision's config must be in the cache.

    Args:
        checkpoints: `(repo_id, revision, label)` triples of the checkpoints that load from the Hub.
        cache_dir: The Hugging Face cache (None: the default).
        timeout: Seconds the listing may wait to connect or for its next bytes (see `bounded`); None:
            `DEFAULT_HUB_TIMEOUT`.

    Raises:
        CheckpointError: Naming every missing revision (or the missing or refused repository, or the Hub that did not
            answer in time) and what to do.
    """
    seconds = check_hub_timeout(timeout)
    by_repo: dict[str, list[tuple[str | None, str]]] = {}
    for repo_id, revision, label in checkpoints:
        by_repo.setdefault(repo_id, []).append((revision, label))
    if not by_repo:
        return
    if is_offline():
        missing = [
            (repo_id, revision, label)
            for repo_id, wanted in by_repo.items()
            for revision, label in wanted
            if not _cached(repo_id, revision, cache_dir)
        ]
        if missing:
            raise CheckpointError(
                f"{len(missing)} checkpoint(s) are not in the local Hugging Face cache ({cache_location(cache_dir)}) "
                f"and the Hub is offline (HF_HUB_OFFLINE=1): {_listed(missing)}. Fetch them on a machine with network "
                f"({_commands(missing)}) and copy the cache here, set HF_HOME / HF_HUB_CACHE to a cache that holds "
                "them, or unset HF_HUB_OFFLINE."
            )
        return
    missing = []
    for repo_id, wanted in by_repo.items():
        names = _refs(repo_id, seconds)
        if names is None:
            continue
        missing += [
            (repo_id, revision, label)
            for revision, label in wanted
            if revision is not None and not _COMMIT.match(revision) and revision not in names
        ]
    if missing:
        repos = sorted({repo_id for repo_id, _, _ in missing})
        raise CheckpointError(
            f"{len(missing)} revision(s) do not exist on {endpoint()}: {_listed(missing)}. Nothing was computed. "
            "Check the steps against the repository's branches ("
            + ", ".join(f"huggingface_hub.list_repo_refs({repo!r})" for repo in repos)
            + "), or leave these checkpoints out."
        )


def failure_message(
    error: BaseException,
    repo_id: str,
    revision: str | None,
    *,
    label: str = "",
    cache_dir: str | os.PathLike | None = None,
    timeout: float | None = None,
) -> str:
    """What went wrong fetching a revision (missing repository or revision, authentication, server, timeout,
    network, offline cache) and what to do, naming the endpoint in use and the installed download command.

    `timeout` is the deadline the requests had (`hub_timeout`; None: `DEFAULT_HUB_TIMEOUT`), named by a timeout's
    message."""
    shown = _shown(repo_id, revision, label)
    kind = _kind(error)
    command = download_command(repo_id, revision)
    where = endpoint()
    original = f" ({type(error).__name__}: {_first_line(error)})"
    if kind == "revision":
        return (
            f"Cannot fetch {shown}: revision {revision!r} does not exist in {repo_id} on {where}. List its revisions "
            f"with huggingface_hub.list_repo_refs({repo_id!r}) (or {where}/{repo_id}/tree/main), and check the step."
        )
    if kind == "gated":
        return (
            f"Cannot fetch {shown}: {repo_id} on {where} is gated. Accept its conditions at {where}/{repo_id}, then "
            f"log in with `{hub_command()} auth login` (or set HF_TOKEN).{original}"
        )
    if kind == "auth":
        return (
            f"Cannot fetch {shown}: {where} refused access (authentication). Log in with `{hub_command()} auth "
            f"login` or set HF_TOKEN to a token that can read {repo_id}.{original}"
        )
    if kind == "repo":
        return (
            f"Cannot fetch {shown}: repository {repo_id} does not exist on {where} (or is private: log in with "
            f"`{hub_command()} auth login`). Check the model id.{original}"
        )
    if kind == "server":
        return (
            f"Cannot fetch {shown}: the Hub server {where} answered with a server error{original}. The repository "
            f"and revision may well exist: retry later (or fetch it with `{command}`)."
        )
    if kind == "timeout" and not is_offline():
        return (
            f"Cannot fetch {shown}: the Hub server {where} did not answer within hub_timeout = "
            f"{check_hub_timeout(timeout):g} s (no byte for that long){original}. Check the connection and "
            "HF_ENDPOINT; on a slow network or proxy raise hub_timeout (CLI: --hub-timeout), the seconds each request "
            f"may wait to connect or for its next bytes. Or fetch it with `{command}`."
        )
    if kind == "network" and not is_offline():
        return (
            f"Cannot fetch {shown}: the network failed while talking to {where}{original}. Check the connection (and "
            f"HF_ENDPOINT), then retry: files already complete are not fetched again. Or fetch it with `{command}`."
        )
    if is_offline():
        return (
            f"Cannot load {shown}: the Hugging Face Hub is offline (HF_HUB_OFFLINE=1) and this revision is not in "
            f"the local cache ({cache_location(cache_dir)}). Fetch it on a machine with network with `{command}` and "
            f"copy the cache here, or set HF_HOME / HF_HUB_CACHE to a cache that holds it.{original}"
        )
    return f"Cannot fetch {shown} from {where}{original}. Fetch it with `{command}` to see the details."


# --------------------------------------------------------------------------------------------------------------------
# helpers


def _silent_bar() -> type:
    """A tqdm class that shows nothing, for `snapshot_download`'s bars."""
    from tqdm.auto import tqdm

    class SilentBar(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("name", None)  # huggingface_hub's own bars take a name; tqdm's do not
            super().__init__(*args, **{**kwargs, "disable": True})

    return SilentBar


def _shown(repo_id: str, revision: str | None, label: str) -> str:
    at = f"{repo_id!r}" + (f" at revision {revision!r}" if revision is not None else "")
    return f"checkpoint {label} ({at})" if label else at


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"


def _chain(error: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _kind(error: BaseException) -> str | None:
    """The failure behind an error of huggingface_hub, its HTTP library (httpx, httpx2 or, before 1.0, requests) or
    transformers: its first recognised cause."""
    from huggingface_hub import errors as hub_errors

    timeouts, failures = _transport_errors()
    for cause in _chain(error):
        if isinstance(cause, hub_errors.RevisionNotFoundError):
            return "revision"
        if isinstance(cause, hub_errors.GatedRepoError):
            return "gated"
        if isinstance(cause, hub_errors.RepositoryNotFoundError):
            return "repo"
        if isinstance(cause, hub_errors.HfHubHTTPError) and cause.response is not None:
            status = cause.response.status_code
            if status in (401, 403):
                return "auth"
            if status >= 500 or status in (408, 429):
                return "server"
        if isinstance(cause, (*timeouts, TimeoutError)):
            return "timeout"
        if isinstance(cause, (*failures, hub_errors.OfflineModeIsEnabled, ConnectionError)):
            return "network"
    return None


def _transport_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """The timeout and the network-failure classes of the HTTP library huggingface_hub uses."""
    from .hub_deadline import httpx

    if httpx is not None:
        return (httpx.TimeoutException,), (httpx.TransportError,)
    import requests

    return (requests.exceptions.Timeout,), (requests.exceptions.ConnectionError,)


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
            f"Could not list the revisions of {repo_id} on {endpoint()} ({type(cause).__name__}: "
            f"{_first_line(cause)}, tried {len(HUB_RETRY_WAITS) + 1} times); each revision is checked when it is loaded.",
            HubAccessWarning,
            stacklevel=4,
        )
        return None
    return {ref.name for ref in [*refs.branches, *refs.tags]}


def _cached(repo_id: str, revision: str | None, cache_dir: str | os.PathLike | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
    except ValueError:  # not a valid repository id: nothing is cached under it
        return False
    return isinstance(found, str)


def _listed(missing: list[tuple[str, str | None, str]]) -> str:
    return ", ".join(f"{label} ({repo_id} @ {revision or 'main'})" for repo_id, revision, label in missing)


def _commands(missing: list[tuple[str, str | None, str]]) -> str:
    commands = [f"`{download_command(repo_id, revision)}`" for repo_id, revision, _ in missing]
    return ", ".join(commands[:3]) + (f" and {len(commands) - 3} more" if len(commands) > 3 else "")
