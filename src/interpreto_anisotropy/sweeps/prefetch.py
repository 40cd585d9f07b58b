# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's Hub checkpoints fetched ahead of their turn, within a disk budget (docs/how-to/suite-sweeps.md).

A sweep's *uses* (its checkpoints in the order it loads them) are fetched `prefetch` ahead on a pool of
`max_concurrent_downloads` threads (the use the sweep waits for, if no thread has started it, on the sweep's own). A
use's files are handed over once `snapshot_download` has returned; a failed download raises when its use's turn comes.

With a budget (`max_cache_bytes`), a revision the sweep fetched itself (not cached before its first run,
`commons.hub.cached_before`) is evicted once its last use is done, or when keeping it would crowd out the look-ahead.
A download ahead waits until the revisions held plus the downloads running plus this one fit (a revision's size: the
largest fetched so far; the first goes alone); the use the sweep waits for always starts, so the cache grows by at
most the budget plus one checkpoint. A revision is never evicted while a download from its repository runs, nor while
a use holds it. Local folders pass through.

Examples:
    >>> with CheckpointPipeline(uses, prefetch=2, max_cache_bytes=20 * 2**30) as pipeline:  # doctest: +SKIP
    ...     for checkpoint in uses:
    ...         fetched = pipeline.take(checkpoint)  # waits for its download; raises its CheckpointError
    ...         load(checkpoint, snapshot=fetched.folder)
    ...         pipeline.done(checkpoint)  # its rows are written: evict it if the sweep fetched it
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..commons import hub
from ..commons.progress import progress_bar
from ..errors import EnvironmentWarning
from .checkpoints import Checkpoint

__all__ = ["CheckpointPipeline", "Fetched"]

logger = logging.getLogger(__name__)

_GB = 1e9


@dataclass(frozen=True)
class Fetched:
    """A use's files, ready to load.

    Attributes:
        folder: The Hub snapshot folder (None: a local checkpoint, loaded from its own folder).
        seconds: How long the download of those files took (None for a local checkpoint).
        nbytes: Bytes the snapshot holds.
    """

    folder: str | None = None
    seconds: float | None = None
    nbytes: int = 0


@dataclass(eq=False)
class _Revision:
    """One revision in the cache, or on its way: fetched once, shared by the uses that need it."""

    checkpoint: Checkpoint
    future: Future | None = None  # set as soon as it is submitted
    users: int = 0  # uses attached and not done
    fetched: Fetched | None = None  # once its download succeeded
    running: bool = False
    ours: bool = False  # fetched by this sweep (its snapshot was not cached before): may be evicted
    evicting: bool = False

    @property
    def key(self) -> tuple[str, str | None]:
        """What a download fetches: a repository's revision (two checkpoints may name the same one)."""
        return self.checkpoint.source, self.checkpoint.revision

    @property
    def commit(self) -> str | None:
        return Path(self.fetched.folder).name if self.fetched is not None else None


class CheckpointPipeline:
    """Fetches a sweep's Hub checkpoints ahead of their turn, within a disk budget (see the module docstring).

    Args:
        uses: The checkpoints in the order the sweep loads them (one may come twice).
        prefetch: Uses fetched ahead of the one being computed (0: each when its turn comes).
        max_concurrent_downloads: Downloads running at once.
        max_cache_bytes: What the sweep's own revisions may hold in the cache (None: no budget, nothing evicted).
        cache_dir: The Hugging Face cache (None: the default).
        before: repository -> commits cached before the sweep (never evicted); None: everything counts as cached
            before (nothing is evicted).
        progress: Show a "Downloads" progress bar.
        hub_timeout: Seconds each Hub request may wait to connect or for its next bytes (`commons.hub.bounded`).
    """

    def __init__(
        self,
        uses: Sequence[Checkpoint],
        *,
        prefetch: int = 2,
        max_concurrent_downloads: int = 1,
        max_cache_bytes: float | None = None,
        cache_dir: Any = None,
        before: Mapping[str, set[str]] | None = None,
        progress: bool = False,
        hub_timeout: float = hub.DEFAULT_HUB_TIMEOUT,
    ):
        self.uses = list(uses)
        self.hub_timeout, self.prefetch = hub_timeout, prefetch  # the options come checked by SweepConfig
        self.budget = max_cache_bytes
        self.cache = hub.cache_location(cache_dir)
        self.before = {repo: set(commits) for repo, commits in (before or {}).items()}
        self.evicts = before is not None and max_cache_bytes is not None
        self._executor = ThreadPoolExecutor(max_concurrent_downloads, thread_name_prefix="fetch")
        self._room = threading.Condition()  # guards the state below; downloads ahead wait on it for room
        self._revisions: dict[tuple[str, str | None], _Revision] = {}  # in the cache or on their way
        self._attached: dict[int, _Revision] = {}  # use -> its revision, for the uses submitted and not done
        self._submitted = self._turn = 0  # uses before _submitted are attached (or local); _turn: the next to take
        self._urgent: _Revision | None = None  # the revision the sweep waits for: it never waits for room
        self._taken: list[int] = []  # uses taken and not done
        self._estimate: int | None = None  # bytes of a revision: the largest fetched so far
        self._notes: list[str] = []  # warnings from the download threads, given on the sweep's thread
        self._closed = False
        self.fetched_bytes = self.evicted_bytes = self.downloads = 0
        on_hub = {c for c in self.uses if not c.is_local}
        self._bar = progress_bar(progress=progress and bool(on_hub), total=len(on_hub), desc="Downloads", unit="ckpt")

    # ------------------------------------------------------------------ the sweep's side
    def __enter__(self) -> CheckpointPipeline:
        with self._room:
            self._submit_through(self.prefetch - 1)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Start no more downloads; those running finish in the background (their files stay in the cache, for a
        resumed sweep to use; Python waits for them at exit)."""
        with self._room:
            self._closed = True
            self._evict_ready()
            self._room.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._bar.close()
        self._warn_notes()

    def take(self, checkpoint: Checkpoint) -> Fetched:
        """Waits until the files of the next use, `checkpoint`, are complete and returns them; raises its download's
        CheckpointError (the use then counts as taken)."""
        with self._room:
            index = self._turn
            if index >= len(self.uses) or self.uses[index] != checkpoint:
                raise RuntimeError(f"CheckpointPipeline: {checkpoint.name} is not the next use (use {index}).")
            self._turn += 1
            self._taken.append(index)
            self._submit_through(index + self.prefetch)
            revision = self._urgent = self._attached.get(index)
            self._room.notify_all()
        self._warn_notes()
        if revision is None:
            return Fetched()
        if revision.future.cancel():  # queued behind downloads ahead: no thread has started it
            revision.future = Future()
            revision.future.set_running_or_notify_cancel()
            try:
                revision.future.set_result(self._fetch(revision))
            except BaseException as error:  # noqa: BLE001  (raised just below, as a thread's would be)
                revision.future.set_exception(error)
        return revision.future.result()

    def done(self, checkpoint: Checkpoint) -> None:
        """The earliest taken use of `checkpoint` is over (its rows are written): evict its revision if the sweep
        fetched it, no later use needs it, or keeping it would crowd out the look-ahead."""
        with self._room:
            index = next((i for i in self._taken if self.uses[i] == checkpoint), None)
            if index is None:
                return
            self._taken.remove(index)
            revision = self._attached.pop(index, None)
            if revision is not None:
                revision.users -= 1
                if not revision.users and revision.fetched is not None and self.evicts and revision.ours:
                    later = any((c.source, c.revision) == revision.key for c in self.uses[index + 1 :])
                    crowded = self._held(idle=True) + (self.prefetch + 1) * (self._estimate or 0) > self.budget
                    revision.evicting = crowded or not later
                self._evict_ready()
                self._room.notify_all()
        self._warn_notes()

    @property
    def held_bytes(self) -> int:
        """Bytes of the revisions this sweep fetched and still holds in the cache."""
        with self._room:
            return self._held()

    # ------------------------------------------------------------------ under the lock
    def _submit_through(self, last: int) -> None:
        """Attach the uses up to `last` to their revisions, submitting the revisions not in the cache yet."""
        while self._submitted <= min(last, len(self.uses) - 1) and not self._closed:
            index, checkpoint = self._submitted, self.uses[self._submitted]
            self._submitted += 1
            if checkpoint.is_local:
                continue
            key = (checkpoint.source, checkpoint.revision)
            if (revision := self._revisions.get(key)) is None:
                revision = self._revisions[key] = _Revision(checkpoint)
                revision.future = self._executor.submit(self._fetch, revision)
            revision.users += 1
            revision.evicting = False
            self._attached[index] = revision

    def _may_start(self, revision: _Revision) -> bool:
        if revision is self._urgent or self.budget is None:
            return True  # the sweep waits for it: it always starts (hence budget + one checkpoint at most)
        running = sum(r.running for r in self._revisions.values())
        if self._estimate is None:
            return running == 0  # the first download goes alone: its size is unknown
        return self._held() + (running + 1) * self._estimate <= self.budget

    def _held(self, idle: bool = False) -> int:
        """Bytes of this sweep's revisions in the cache (`idle`: only those no use holds nor is evicting)."""
        mine = [r for r in self._revisions.values() if r.ours and r.fetched is not None]
        return sum(r.fetched.nbytes for r in mine if not (idle and (r.users or r.evicting)))

    def _evict_ready(self) -> None:
        """Evict the revisions marked for it, unless a download from their repository is running (a commit that
        another revision name still holds, such as `main` and its step, is only forgotten)."""
        busy = {r.checkpoint.source for r in self._revisions.values() if r.running}
        ready = [r for r in self._revisions.values() if r.evicting and not r.users and r.checkpoint.source not in busy]
        for revision in ready:
            del self._revisions[revision.key]
        commits = {r.commit for r in ready} - {r.commit for r in self._revisions.values()}
        if not commits:
            return
        names = ", ".join(r.checkpoint.name for r in ready)
        try:
            evicted = hub.evict(self.cache, commits)
        except Exception as error:  # noqa: BLE001  (a cache that cannot be scanned: warn, never stop the sweep)
            self._notes.append(
                f"Could not evict {names} from {self.cache}: {error}. Delete them with `{hub.HUB_CLI} cache delete`."
            )
        else:
            self.evicted_bytes += evicted
            logger.info("Evicted %s from %s (%.2f GB).", names, self.cache, evicted / _GB)
        self._show()

    # ------------------------------------------------------------------ a download (a pool thread, or the sweep's)
    def _fetch(self, revision: _Revision) -> Fetched:
        checkpoint = revision.checkpoint
        with self._room:
            self._room.wait_for(lambda: self._closed or self._may_start(revision))
            if self._closed and revision is not self._urgent:
                raise RuntimeError(f"CheckpointPipeline closed before {checkpoint.name} was fetched.")
            revision.running = True
        start = time.perf_counter()
        fetched = None
        try:
            folder = hub.fetch(
                *revision.key, cache_dir=self.cache, label=checkpoint.name, quiet=True, timeout=self.hub_timeout
            )
            fetched = Fetched(folder, time.perf_counter() - start, hub.revision_bytes(folder))
            return fetched
        finally:
            with self._room:
                revision.running = False
                if fetched is None:
                    if self._revisions.get(revision.key) is revision:
                        del self._revisions[revision.key]  # a later use fetches it afresh
                else:  # whose it is, its size, the progress bar
                    revision.fetched = fetched
                    revision.ours = self.evicts and revision.commit not in self.before.get(checkpoint.source, set())
                    self._estimate = max(self._estimate or 0, fetched.nbytes)
                    self.fetched_bytes += fetched.nbytes
                    self.downloads += 1
                    self._bar.total = max(self._bar.total, self.downloads)
                    self._bar.update(1)
                    self._show()
                self._evict_ready()
                self._room.notify_all()

    def _show(self) -> None:
        self._bar.set_postfix_str(
            f"{self.fetched_bytes / _GB:.2f} GB fetched, {self._held() / _GB:.2f} GB held", refresh=False
        )

    def _warn_notes(self) -> None:
        with self._room:
            notes, self._notes = self._notes, []
        for note in notes:
            warnings.warn(note, EnvironmentWarning, stacklevel=3)
