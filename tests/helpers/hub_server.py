# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A local Hugging Face Hub-compatible server for tests: tiny repositories, several revisions, faults on demand.

It answers the requests `huggingface_hub` (2.x) and `transformers` (5.x) make for `from_pretrained`,
`hf_hub_download`, `snapshot_download`, `list_repo_refs`, `model_info` and `list_repo_tree`:

- ``HEAD``/``GET /{repo}/resolve/{revision}/{file}``: the file, with ``X-Repo-Commit``, ``ETag`` (and, for weight
  files stored in LFS on the real Hub, ``X-Linked-Etag``/``X-Linked-Size``), ``Content-Length`` and ``Range``
  support (206), as the real Hub does;
- ``GET /api/models/{repo}[/revision/{revision}]``: the model info, with the commit ``sha`` and ``siblings``;
- ``GET /api/models/{repo}/tree/{revision}[/{path}]``: the file listing;
- ``GET /api/models/{repo}/refs``: branches and tags;
- and what `create_repo` and `upload_folder` / `create_commit` send: ``POST /api/repos/create`` (409 when it exists),
  ``POST /api/validate-yaml`` (a README's metadata: accepted), ``POST /api/models/{repo}/preupload/{revision}``
  (every file ``regular``: sent inline, base64, never by LFS) and ``POST /api/models/{repo}/commit/{revision}``
  (the NDJSON commit: ``file`` and ``deletedFile`` lines; a new commit on the branch). `HubServer.commits` logs the
  commits' header lines. Pull requests and LFS uploads answer 422.

A missing repository, revision or file is a 404 carrying ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``,
``EntryNotFound``); a gated repository answers 403 ``GatedRepo``. Other paths answer 404 and are logged in
`HubServer.unknown` (add them here when a library starts asking for them).

Faults (`HubServer.fail`) apply to requests whose method and path match: an HTTP status (5xx, 401, ...), a
connection dropped after part of the body (``"drop"``: closed; ``"reset"``: a TCP reset), or a slow first byte.
`HubServer.bandwidth` throttles bodies (bytes per second). `HubServer.requests` logs every request.

Examples:
    >>> server = HubServer()  # doctest: +SKIP
    >>> server.add_revision("org/tiny", "step8", folder)  # doctest: +SKIP
    >>> with server:  # doctest: +SKIP
    ...     print(server.url)
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["Fault", "HubServer", "Revision"]

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)$")
_API = re.compile(
    r"^/api/models/(?P<repo>[^/]+/[^/]+)"
    r"(?:/(?P<kind>revision|tree)/(?P<revision>[^/]+)(?:/(?P<path>.*))?|/(?P<refs>refs))?$"
)
_WRITE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<kind>preupload|commit)/(?P<revision>[^/]+)$")
_LFS = (".safetensors", ".bin", ".pt", ".h5", ".msgpack")
_CHUNK = 16 * 1024


@dataclass
class Revision:
    """One branch of a repository: its commit and its files (name -> bytes)."""

    name: str
    commit: str
    files: dict[str, bytes]

    def etag(self, filename: str) -> str:
        """The ETag the Hub gives a file: its sha256 for an LFS file, its git blob sha1 otherwise."""
        data = self.files[filename]
        if filename.endswith(_LFS):
            return hashlib.sha256(data).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Fault:
    """A failure served to matching requests.

    Attributes:
        pattern: A regular expression searched in the request path.
        kind: An HTTP status code (int), ``"drop"`` (close after `after_bytes` of the body), ``"reset"`` (a TCP
            reset after `after_bytes`) or ``"slow"`` (wait `delay` seconds before the first byte, then serve).
        method: Only requests of this method (None: any).
        times: How many matching requests fail (None: all).
        after_bytes: For drop and reset: the body bytes sent first.
        delay: For slow: seconds before the first byte.
    """

    pattern: str
    kind: int | str
    method: str | None = None
    times: int | None = None
    after_bytes: int = 100
    delay: float = 0.0
    served: int = field(default=0, init=False)

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.served >= self.times:
            return False
        return (self.method is None or self.method == method) and re.search(self.pattern, path) is not None


class HubServer:
    """A threaded HTTP server on 127.0.0.1 that serves repositories the way the Hugging Face Hub does.

    Attributes:
        repos: repository id -> revision name -> `Revision`.
        gated: Repository ids that answer 403 ``GatedRepo``.
        faults: Active faults, the first match wins.
        bandwidth: Bytes per second for bodies, or None for no limit.
        requests: Every request, as ``(method, path)``.
        unknown: Requests the server has no route for.
        ranged: ``(path, Range header)`` of every request for part of a file.
    """

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, Revision]] = {}
        self.gated: set[str] = set()
        self.faults: list[Fault] = []
        self.bandwidth: float | None = None
        self.requests: list[tuple[str, str]] = []
        self.unknown: list[tuple[str, str]] = []
        self.ranged: list[tuple[str, str]] = []
        self.commits: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ content
    def add_revision(self, repo: str, revision: str, folder: str | Path, *, main: bool = False) -> Revision:
        """Serves a folder's files as a branch of a repository (`main=True` also makes it the `main` branch)."""
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()
        }
        digest = hashlib.sha1(f"{repo}@{revision}".encode())
        for name, data in files.items():
            digest.update(name.encode() + hashlib.sha1(data).digest())
        branch = Revision(revision, digest.hexdigest(), files)
        self.repos.setdefault(repo, {})[revision] = branch
        if main:
            self.repos[repo]["main"] = Revision("main", branch.commit, files)
        return branch

    def commit(self, repo: str, revision: str, files: dict[str, bytes]) -> Revision:
        """Makes a new commit of these files on a branch (the files it had, changed by `files`)."""
        digest = hashlib.sha1(self.repos[repo][revision].commit.encode())
        for name, data in sorted(files.items()):
            digest.update(name.encode() + hashlib.sha1(data).digest())
        branch = Revision(revision, digest.hexdigest(), files)
        self.repos[repo][revision] = branch
        return branch

    def fail(self, pattern: str, kind: int | str, **options) -> Fault:
        """Adds a `Fault` (see its attributes for `options`) and returns it."""
        fault = Fault(pattern, kind, **options)
        self.faults.append(fault)
        return fault

    def count(self, pattern: str = "", method: str | None = None) -> int:
        """How many requests matched a regular expression on the path (and a method)."""
        with self._lock:
            return sum(1 for m, p in self.requests if (method is None or m == method) and re.search(pattern, p))

    def counts(self) -> Counter:
        """Requests by ``"METHOD path"``."""
        with self._lock:
            return Counter(f"{m} {p}" for m, p in self.requests)

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        """The endpoint, for `HF_ENDPOINT`."""
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> HubServer:
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ routing
    def _fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            self.requests.append((method, path))
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.served += 1
                    return fault
        return None

    def _revision(self, repo: str, revision: str) -> Revision | None:
        branches = self.repos[repo]
        if revision in branches:
            return branches[revision]
        return next((b for b in branches.values() if b.commit == revision), None)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: HubServer

    def log_message(self, format, *args) -> None:  # noqa: A002  (silence the default stderr log)
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(head=False)

    def do_POST(self) -> None:  # noqa: N802
        path = unquote(urlsplit(self.path).path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.hub._fault(self.command, path)
        if fault is not None and isinstance(fault.kind, int):
            return self._error(fault.kind, "ServerError" if fault.kind >= 500 else None, f"fault {fault.kind}")
        if path == "/api/repos/create":
            return self._create_repo(json.loads(body))
        if path == "/api/validate-yaml":
            return self._json({"errors": [], "warnings": []}, False, None)
        match = _WRITE.match(path)
        if match is None or "create_pr=1" in urlsplit(self.path).query:
            self.hub.unknown.append((self.command, self.path))
            return self._error(404 if match is None else 422, None, f"no route for POST {self.path}")
        branch = self._known(match["repo"], match["revision"])
        if branch is False:
            return
        if match["kind"] == "preupload":
            files = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                for f in json.loads(body)["files"]
            ]
            return self._json({"files": files}, False, None)
        self._commit(match["repo"], branch, body)

    def _create_repo(self, payload: dict) -> None:
        repo = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        if repo in self.hub.repos:
            return self._error(409, None, "You already created this model repo", url=f"{self.hub.url}/{repo}")
        empty = hashlib.sha1(f"{repo}@empty".encode()).hexdigest()
        self.hub.repos[repo] = {"main": Revision("main", empty, {})}
        self._json({"url": f"{self.hub.url}/{repo}", "name": repo}, False, None)

    def _commit(self, repo: str, branch: Revision, body: bytes) -> None:
        files = dict(branch.files)
        for line in body.decode().splitlines():
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                self.hub.commits.append({"repo": repo, "revision": branch.name, **value})
            elif key == "file" and value.get("encoding") == "base64":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
            else:
                return self._error(422, None, f"commit operation {key!r} is not served by the test server")
        commit = self.hub.commit(repo, branch.name, files).commit
        url = f"{self.hub.url}/{repo}/commit/{commit}"
        self._json({"commitUrl": url, "commitOid": commit, "pullRequestUrl": None}, False, None)

    # ------------------------------------------------------------------
    def _serve(self, *, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        fault = self.hub._fault(self.command, path)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay)
            fault = None
        if fault is not None and isinstance(fault.kind, int):
            return self._error(fault.kind, "ServerError" if fault.kind >= 500 else None, f"fault {fault.kind}")
        if match := _RESOLVE.match(path):
            return self._resolve(match["repo"], match["revision"], match["file"], head, fault)
        if match := _API.match(path):
            return self._api(match, head, fault)
        self.hub.unknown.append((self.command, self.path))
        self._error(404, None, f"no route for {path}")

    def _repo_ok(self, repo: str) -> bool:
        """Whether the repository can be served; if not, the error is answered."""
        if repo not in self.hub.repos:
            self._error(404, "RepoNotFound", "Repository not found")
            return False
        if repo in self.hub.gated:
            self._error(403, "GatedRepo", "Access to model is restricted")
            return False
        return True

    def _known(self, repo: str, revision: str | None) -> Revision | None | bool:
        """The revision, or False after answering the error (missing repo or revision, gated repo)."""
        if not self._repo_ok(repo):
            return False
        branch = self.hub._revision(repo, revision or "main")
        if branch is None:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + (revision or "main"))
            return False
        return branch

    def _resolve(self, repo: str, revision: str, filename: str, head: bool, fault: Fault | None) -> None:
        branch = self._known(repo, revision)
        if branch is False:
            return
        if filename not in branch.files:
            return self._error(404, "EntryNotFound", "Entry not found", commit=branch.commit)
        data = branch.files[filename]
        etag = branch.etag(filename)
        headers = {"X-Repo-Commit": branch.commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if filename.endswith(_LFS):
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
        start, status = 0, 200
        if not head and (wanted := re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))):
            self.hub.ranged.append((self.path, wanted[0]))
            start, status = min(int(wanted[1]), len(data)), 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send(status, data[start:], "application/octet-stream", headers, head, fault)

    def _api(self, match: re.Match, head: bool, fault: Fault | None) -> None:
        repo = match["repo"]
        if match["refs"]:
            if not self._repo_ok(repo):
                return
            branches = [
                {"name": b.name, "ref": f"refs/heads/{b.name}", "targetCommit": b.commit}
                for b in self.hub.repos[repo].values()
            ]
            return self._json({"branches": branches, "tags": [], "converts": []}, head, fault)
        branch = self._known(repo, match["revision"])
        if branch is False:
            return
        if match["kind"] == "tree":
            prefix = (match["path"] or "").strip("/")
            entries = []
            for name, data in branch.files.items():
                if prefix and not name.startswith(prefix + "/"):
                    continue
                entry = {"type": "file", "oid": branch.etag(name), "size": len(data), "path": name}
                if name.endswith(_LFS):
                    entry["oid"] = hashlib.sha1(name.encode()).hexdigest()
                    entry["lfs"] = {"oid": branch.etag(name), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            return self._json(entries, head, fault)
        info = {
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24],
            "id": repo,
            "modelId": repo,
            "sha": branch.commit,
            "private": False,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": name} for name in branch.files],
        }
        self._json(info, head, fault)

    # ------------------------------------------------------------------ responses
    def _json(self, payload, head: bool, fault: Fault | None) -> None:
        self._send(200, json.dumps(payload).encode(), "application/json", {}, head, fault)

    def _error(self, status: int, code: str | None, message: str, commit: str | None = None, **extra) -> None:
        body = json.dumps({"error": message, **extra}).encode()
        headers = {"X-Error-Message": message}
        if code is not None:
            headers["X-Error-Code"] = code
        if commit is not None:
            headers["X-Repo-Commit"] = commit
        self._send(status, body, "application/json", headers, self.command == "HEAD", None)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict, head: bool, fault) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if head:
            return
        if fault is not None and fault.kind in ("drop", "reset"):
            self._write(body[: fault.after_bytes])
            self.wfile.flush()
            if fault.kind == "reset":  # SO_LINGER with a zero timeout: close() sends RST
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self._write(body)

    def _write(self, body: bytes) -> None:
        rate = self.hub.bandwidth
        for start in range(0, len(body), _CHUNK):
            chunk = body[start : start + _CHUNK]
            self.wfile.write(chunk)
            if rate:
                time.sleep(len(chunk) / rate)
