# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The deadline `hub_timeout` on every request huggingface_hub sends, its own retries of a stall included.

Inside a `bounded` block, every request huggingface_hub sends (in any thread: the download threads of
`snapshot_download` too) waits at most the deadline to connect, for its answer, and between two reads of its body, so
a long download goes on as long as bytes flow. A request that waited out the deadline (no answer, or no next bytes)
(the same method and URL, its query aside: a download redirected to a signed URL gets a new signature each time)
is not sent again while the blocks running then still run: huggingface_hub would retry it (a file's metadata 6 more
times, 1 s to 8 s apart; a download resumed 5 times, 1 s apart), and the repeat fails at once with `HubStalled`
instead. A Hub that stalls thus fails a call in about one deadline per distinct request (plus 1 s before a
download's resume), while huggingface_hub's own retries of server errors and dropped connections stay as they are.

Files that `hf_xet` downloads (Xet storage, used when `hf_xet` is installed) do not go through httpx: their
transfers keep hf_xet's own timeouts and retries (`HF_HUB_DISABLE_XET=1` downloads them over HTTP, under the
deadline); their metadata requests have the deadline.

It goes through huggingface_hub's shared `httpx` (or `httpx2`) client: each of its transports is
wrapped (`_Guard`), on the client in use and on the clients `huggingface_hub.set_client_factory`'s factory makes later
(huggingface_hub recreates its client after a connection error; the factory in place is kept and wrapped). Before 1.0,
huggingface_hub sends its requests with `requests`, one session per thread: `hub_deadline_requests` wraps the adapters
of every session its backend factory makes, with the same deadline and the same refusal of a stalled request.

Examples:
    >>> with bounded(3.0):  # doctest: +SKIP
    ...     huggingface_hub.snapshot_download("EleutherAI/pythia-70m", revision="step1000")
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator
from typing import Any

from huggingface_hub.utils import _http as _hub_http

#: The HTTP library huggingface_hub sends its requests with: httpx2 (2.x), httpx (1.x), None (0.x: requests).
httpx = getattr(_hub_http, "httpx2", None) or getattr(_hub_http, "httpx", None)

__all__ = ["HubStalled", "bounded", "current_deadline"]


class HubStalled(TimeoutError):
    """A request that already waited out the deadline, refused instead of sent again (not an httpx error, so that
    huggingface_hub does not retry it)."""


_LOCK = threading.Lock()
_BLOCKS: dict[int, float] = {}  # the `bounded` blocks running, in any thread: id -> deadline in seconds
_STALLED: dict[tuple[str, str], frozenset[int]] = {}  # (method, url) that waited out the deadline -> blocks then
_IDS = itertools.count()
_FACTORY_WRAPPED = False


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[float]:
    """Gives every request huggingface_hub sends while the block runs the deadline `seconds` (see the module).

    The deadline caps the time to connect, each read, each write and the wait for a pooled connection, and sets
    them where huggingface_hub gives none (its refs and repository listings); a shorter timeout of its own stays
    (`HF_HUB_DOWNLOAD_TIMEOUT`, 10 s, for a download's reads; 3 s for its agent-registry fetch). When blocks overlap
    (a sweep's background downloads), the smallest deadline applies. Requests sent outside any block keep
    huggingface_hub's own timeouts and retries.

    Args:
        seconds: The deadline, a positive number of seconds.

    Yields:
        The deadline in seconds.
    """
    _guard_hub_client()
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


def current_deadline() -> float | None:
    """The deadline of the `bounded` blocks running (the smallest), None outside any."""
    with _LOCK:
        return min(_BLOCKS.values(), default=None)


def _stalled(key: tuple[str, str]) -> None:
    with _LOCK:
        if _BLOCKS:
            _STALLED[key] = frozenset(_BLOCKS)


def _refuse_if_stalled(key: tuple[str, str], seconds: float) -> None:
    with _LOCK:
        stalled = key in _STALLED
    if stalled:
        method, url = key
        raise HubStalled(f"{method} {url} already waited {seconds:g} s for an answer; not sent again")


class _Guard(httpx.BaseTransport if httpx else object):
    """An httpx transport that applies the deadline to the requests it carries and refuses a stalled request."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        seconds = current_deadline()
        if seconds is None:
            return self.inner.handle_request(request)
        key = (request.method, f"{request.url.scheme}://{request.url.netloc.decode()}{request.url.path}")
        _refuse_if_stalled(key, seconds)
        given = request.extensions.get("timeout") or {}
        capped = {
            kind: seconds if given.get(kind) is None else min(given[kind], seconds)
            for kind in ("connect", "read", "write", "pool")
        }
        request.extensions = {**request.extensions, "timeout": capped}
        try:
            response = self.inner.handle_request(request)
        except httpx.TimeoutException:
            _stalled(key)
            raise
        response.stream = _GuardedBody(response.stream, key)
        return response

    def close(self) -> None:
        self.inner.close()


class _GuardedBody(httpx.SyncByteStream if httpx else object):
    """A response body whose reads record a stall of its request."""

    def __init__(self, inner: Any, key: tuple[str, str]) -> None:
        self.inner, self.key = inner, key

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.inner
        except httpx.TimeoutException:
            _stalled(self.key)
            raise

    def close(self) -> None:
        self.inner.close()


def _guard_hub_client() -> None:
    """Wraps the transports of huggingface_hub's shared client, and of the clients its factory makes later."""
    global _FACTORY_WRAPPED
    with _LOCK:
        wrap_factory, _FACTORY_WRAPPED = not _FACTORY_WRAPPED, True
    if httpx is None:  # huggingface_hub < 1.0, on requests
        if wrap_factory:
            from .hub_deadline_requests import guard_sessions

            guard_sessions(sys.modules[__name__])
        return
    from huggingface_hub.utils import get_session, set_client_factory

    if wrap_factory:
        factory = getattr(_hub_http, "_GLOBAL_CLIENT_FACTORY", None)
        if factory is not None:
            set_client_factory(lambda: _guarded(factory()))
    _guarded(get_session())


def _guarded(client: Any) -> Any:
    """The client, its transports wrapped in `_Guard` (httpx keeps them in `_transport` and `_mounts`)."""
    with _LOCK:
        if not isinstance(client._transport, _Guard):
            client._transport = _Guard(client._transport)
        client._mounts = {
            pattern: _Guard(transport) if transport is not None and not isinstance(transport, _Guard) else transport
            for pattern, transport in client._mounts.items()
        }
    return client
