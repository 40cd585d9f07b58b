# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Headless Chromium driven over the DevTools protocol, for the tests that open pages as a reader would.

`Browser` starts ``chromium --headless`` with a throw-away profile and talks to it over one websocket
(``websocket-client``): each `Browser.visit` opens a tab, loads a URL, runs a JavaScript probe in the page and
returns what it found, with every console error, uncaught exception and failed load the page produced. `serve`
puts a folder on a local ``http.server`` (127.0.0.1), so pages load their scripts, fonts and search index the way
a web server would give them.

Chromium comes from the Debian package ``chromium`` (``.ci/run`` installs it); `chromium_or_skip` finds it, skips
a test when it is absent, and fails instead when the ``CI`` variable says this is a CI run, where the browser
tests must not pass by skipping.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: Executable names tried in turn (Debian's package installs ``chromium``); ``$CHROMIUM`` overrides them.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a small /dev/shm
    "--disable-extensions",
    "--disable-background-networking",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-port=0",  # any free port, written to DevToolsActivePort in the profile
    "--window-size=1280,900",
)
START_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 30.0
#: Time left to a page after its load event for late work: KaTeX, the search worker, images.
SETTLE_S = 0.5


def chromium_names() -> list[str]:
    """The executable names to look for: ``$CHROMIUM`` when set, else `CHROMIUM_NAMES`."""
    return [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else list(CHROMIUM_NAMES)


def find_chromium() -> str | None:
    """The path of a Chromium or Chrome executable (``$CHROMIUM`` first), or None."""
    return next((path for path in map(shutil.which, chromium_names()) if path), None)


def chromium_or_skip() -> str:
    """The Chromium executable; skip the test without one, but fail when ``$CI`` is true (CI must run it)."""
    path = find_chromium()
    if path is not None:
        return path
    message = (
        f"headless Chromium is not installed (looked for {', '.join(chromium_names())}; set $CHROMIUM to another "
        "executable): install Debian's package with `apt-get install chromium`, as .ci/run does"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI={os.environ['CI']}, and the browser tests must run in CI, but {message}")
    pytest.skip(message)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002  (http.server's signature)
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` over HTTP on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            thread.join(timeout=5)


@dataclass
class PageVisit:
    """What one page showed: the probe's value and the problems it logged.

    Attributes:
        url: The page's address.
        value: What the JavaScript probe returned (JSON values).
        problems: Console errors, uncaught exceptions, failed loads and HTTP errors, one line each.
    """

    url: str
    value: Any
    problems: list[str] = field(default_factory=list)


class Browser:
    """A headless Chromium session; use it as a context manager.

    Args:
        executable: The Chromium executable (`chromium_or_skip`).
    """

    def __init__(self, executable: str):
        self.executable = executable
        self._next_id = 0

    def __enter__(self) -> Browser:
        import websocket  # websocket-client, in the test extra

        self._timeout = websocket.WebSocketTimeoutException
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self._process = subprocess.Popen(
            [self.executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port, path = self._devtools_address(Path(self._profile.name) / "DevToolsActivePort")
            self._socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=LOAD_TIMEOUT_S)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        with contextlib.suppress(Exception):
            self._command("Browser.close")
        with contextlib.suppress(Exception):
            self._socket.close()
        self._stop()

    def _stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for _ in range(20):  # Chromium's helper processes may still write into the profile after the browser exits
            try:
                self._profile.cleanup()
                return
            except OSError:
                time.sleep(0.25)
        shutil.rmtree(self._profile.name, ignore_errors=True)

    def _devtools_address(self, active_port: Path) -> tuple[int, str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.executable} exited with status {self._process.returncode} at start")
            lines = active_port.read_text().splitlines() if active_port.exists() else []
            if len(lines) >= 2:
                return int(lines[0]), lines[1]
            time.sleep(0.05)
        raise TimeoutError(f"{self.executable} wrote no DevToolsActivePort within {START_TIMEOUT_S:.0f} s")

    # ------------------------------------------------------------------------------------------ the protocol
    def _command(self, method: str, params: dict | None = None, session: str | None = None, events=None) -> dict:
        """Send one command and wait for its answer; events that arrive meanwhile go to `events`."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        while True:
            reply = json.loads(self._socket.recv())
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if events is not None and "method" in reply:
                events.append(reply)

    def _events_until(self, events: list, done, timeout: float) -> bool:
        """Read events into `events` until `done(event)` is true or `timeout` seconds pass; whether it came."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self._socket.settimeout(left)
            try:
                event = json.loads(self._socket.recv())
            except self._timeout:  # the wait is over
                break
            finally:
                self._socket.settimeout(LOAD_TIMEOUT_S)
            if "method" in event:
                events.append(event)
                if done(event):
                    return True
        return False

    def visit(self, url: str, probe: str, *, screenshot: Path | None = None) -> PageVisit:
        """Open `url` in a new tab, let it settle, evaluate the JavaScript expression `probe` there.

        Args:
            url: The page's address.
            probe: A JavaScript expression; a promise is awaited. Its value must be JSON.
            screenshot: Where to save a PNG of the window after the probe (None: no screenshot).

        Returns:
            A `PageVisit` with the probe's value and the page's problems.

        Raises:
            RuntimeError: If the page cannot be opened (no such file, refused connection) or the probe throws.
            TimeoutError: If the page does not fire its load event within `LOAD_TIMEOUT_S`.
        """
        events: list[dict] = []
        target = self._command("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                self._command(f"{domain}.enable", session=session, events=events)
            navigation = self._command("Page.navigate", {"url": url}, session=session, events=events)
            if navigation.get("errorText"):
                raise RuntimeError(f"{url} could not be opened: {navigation['errorText']}")
            loaded = self._events_until(
                events,
                lambda e: e["method"] == "Page.loadEventFired" and e.get("sessionId") == session,
                LOAD_TIMEOUT_S,
            )
            if not loaded:
                raise TimeoutError(f"{url} did not finish loading within {LOAD_TIMEOUT_S:.0f} s")
            self._events_until(events, lambda e: False, SETTLE_S)
            result = self._command(
                "Runtime.evaluate",
                {"expression": probe, "awaitPromise": True, "returnByValue": True},
                session=session,
                events=events,
            )
            if "exceptionDetails" in result:
                raise RuntimeError(f"the probe failed on {url}: {result['exceptionDetails']}")
            if screenshot is not None:
                shot = self._command("Page.captureScreenshot", {"format": "png"}, session=session, events=events)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            self._events_until(events, lambda e: False, 0.1)
        finally:
            self._command("Target.closeTarget", {"targetId": target})
        mine = [event for event in events if event.get("sessionId") == session]
        return PageVisit(url, result["result"].get("value"), problems_of(mine))


def problems_of(events: list[dict]) -> list[str]:
    """Console errors, uncaught exceptions, failed loads and HTTP errors among DevTools events, one line each."""
    urls = {}
    problems = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            problems.append(f"uncaught: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
            problems.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            problems.append(f"log ({entry.get('source')}): {entry['text']} {entry.get('url', '')}".rstrip())
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"load failed: {urls.get(params['requestId'], '?')}: {params['errorText']}")
        elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
            problems.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
    return problems
