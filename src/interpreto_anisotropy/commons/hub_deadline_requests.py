# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The deadline of `hub_deadline.bounded` on huggingface_hub before 1.0, which sends its requests with `requests`.

huggingface_hub 0.x makes one `requests.Session` per thread with the factory `configure_http_backend` set; that
factory is wrapped once, so that every session it makes (the download threads' too) carries `_Guard` adapters.
Inside a `bounded` block, a request's connect and read timeouts are capped at the deadline (a read timeout is the
longest wait for the next bytes, so a long download goes on as long as bytes flow), and a request that waited it out,
for its answer or for the next bytes of its body, is refused with `HubStalled` when huggingface_hub sends it again:
its retries of timeouts (`http_backoff`, a download's resume) catch `requests` errors only.

Examples:
    >>> guard_sessions()  # doctest: +SKIP  (done by `bounded`)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import ReadTimeoutError

__all__ = ["guard_sessions"]

_DEADLINE: Any = None  # sweeps.hub_deadline, set by guard_sessions


def guard_sessions(deadline: Any) -> None:
    """Wraps huggingface_hub's session factory, so that every session it makes from now on has `_Guard` adapters.

    Args:
        deadline: The `hub_deadline` module, whose deadline and stall record the adapters apply (passed in, not
            imported, so that the two modules do not import each other).
    """
    global _DEADLINE
    _DEADLINE = deadline
    from huggingface_hub import configure_http_backend
    from huggingface_hub.utils import _http

    factory = _http._GLOBAL_BACKEND_FACTORY
    configure_http_backend(lambda: _guarded(factory()))  # also drops the sessions made before


def _guarded(session: requests.Session) -> requests.Session:
    for prefix, adapter in list(session.adapters.items()):
        session.mount(prefix, _Guard(adapter))
    return session


class _Guard(requests.adapters.BaseAdapter):
    """A `requests` adapter that applies the deadline to the requests it sends and refuses a stalled request."""

    def __init__(self, inner: requests.adapters.BaseAdapter) -> None:
        super().__init__()
        self.inner = inner

    def send(self, request: requests.PreparedRequest, timeout: Any = None, **kwargs: Any) -> requests.Response:
        seconds = _DEADLINE.current_deadline()
        if seconds is None:
            return self.inner.send(request, timeout=timeout, **kwargs)
        url = urlsplit(request.url)
        key = (request.method or "GET", f"{url.scheme}://{url.netloc}{url.path}")
        _DEADLINE._refuse_if_stalled(key, seconds)
        try:
            response = self.inner.send(request, timeout=_capped(timeout, seconds), **kwargs)
        except requests.exceptions.Timeout:
            _DEADLINE._stalled(key)
            raise
        stream = response.raw.stream

        def guarded_stream(*args: Any, **options: Any) -> Iterator[bytes]:
            try:
                yield from stream(*args, **options)
            except ReadTimeoutError:
                _DEADLINE._stalled(key)
                raise

        response.raw.stream = guarded_stream  # what `Response.iter_content` reads the body with
        return response

    def close(self) -> None:
        self.inner.close()


def _capped(timeout: Any, seconds: float) -> tuple[float, float]:
    """`requests`' (connect, read) timeouts, each at most `seconds` (None, a number or a pair)."""
    connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    return tuple(seconds if given is None else min(given, seconds) for given in (connect, read))
