# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's Hub checkpoints fetched ahead of their turn, within a disk budget.

A sweep loads its checkpoints in a known order (the early checkpoints for the reference tangent, then every
checkpoint with rows missing): its *uses*. While one use is computed, `CheckpointPipeline` downloads the next ones
in background threads, `prefetch` uses ahead, at most `max_concurrent_downloads` at a time. A use's files are handed
over only once `snapshot_download` has returned (every file complete); a download that failed raises its error, and
warns its retries, when its use's turn comes, as a download at that moment would have.

With a budget (`max_cache_bytes`), a revision the sweep fetched itself (its snapshot was not in the cache before the
sweep's first run, `hub_cache.cached_before`) is evicted once its last use is done, or as soon as its use is done
when keeping it for a later use would crowd out the look-ahead; it is then fetched again for that use. A download
ahead of the turn starts only while the revisions held plus the downloads running plus this one fit in the budget
(a revision's size is taken as the largest fetched so far; the first download goes alone); the use the sweep waits
for always starts, so the cache grows by at most the budget plus one checkpoint. Revisions that were in the cache
before are never evicted, nor counted. A revision is never evicted while a download from its repository runs
(they may share files), nor while a use holds it.

Local folders need nothing fetched: their uses pass through.

Examples:
    >>> with CheckpointPipeline(uses, prefetch=2, max_cache_bytes=20 * 2**30) as pipeline:  # doctest: +SKIP
    ...     for checkpoint in uses:
    ...         fetched = pipeline.take(checkpoint)  # waits for its download; raises its CheckpointError
    ...         load(checkpoint, snapshot=fetched.folder)
    ...         pipeline.done(checkpoint)  # its rows are written: evict it if the sweep fetched it
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..commons.options import check_nonnegative_int, check_positive_int
from . import hub_access, hub_cache
from .checkpoints import Checkpoint

__all__ = ["CheckpointPipeline", "Fetched"]

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
class _Download:
    """One revision's files in the cache: fetched (or being fetched) once, shared by the uses that need it."""

    checkpoint: Checkpoint
    users: set[int] = field(default_factory=set)  # uses holding it: attached and not done
    done: bool = False
    fetched: Fetched | None = None
    error: BaseException | None = None
    retries: list[str] = field(default_factory=list)
    ours: bool = False  # fetched by this sweep (its snapshot was not cached before): may be evicted
    evicting: bool = False

    @property
    def repo(self) -> str:
        return self.checkpoint.source

    @property
    def commit(self) -> str | None:
        return Path(self.fetched.folder).name if self.fetched is not None else None

    @property
    def nbytes(self) -> int:
        return self.fetched.nbytes if self.fetched is not None else 0


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
        hub_timeout: Seconds each Hub request may wait to connect or for its next bytes (`hub_access.bounded`).

    Raises:
        InvalidInputError: A bad option.
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
        hub_timeout: float = hub_access.DEFAULT_HUB_TIMEOUT,
    ):
        self.uses = list(uses)
        self.hub_timeout = hub_access.check_hub_timeout(hub_timeout)
        self.prefetch = check_nonnegative_int("prefetch", prefetch)
        self.max_concurrent = check_positive_int("max_concurrent_downloads", max_concurrent_downloads)
        self.budget = max_cache_bytes
        self.cache = hub_access.cache_location(cache_dir)
        self.before = {repo: set(commits) for repo, commits in (before or {}).items()}
        self.evicts = before is not None and max_cache_bytes is not None
        self.on_hub = [not checkpoint.is_local for checkpoint in self.uses]
        self._lock = threading.Condition()
        self._downloads: dict[tuple[str, str | None], _Download] = {}  # revisions in the cache or on their way
        self._of_use: dict[int, _Download] = {}
        self._turn = 0  # the next use to take
        self._waiting: int | None = None  # the use the sweep waits for
        self._next = 0  # the next use to schedule
        self._taken: list[int] = []  # uses taken and not done
        self._running = 0
        self._estimate: int | None = None  # bytes of a revision: the largest fetched so far
        self._notes: list[str] = []  # warnings from other threads, given on the sweep's thread
        self._closed = False
        self.fetched_bytes = 0
        self.evicted_bytes = 0
        self.downloads = 0
        hub_uses = sum(self.on_hub)
        self._bar = tqdm(
            total=len({c for c, hub in zip(self.uses, self.on_hub, strict=True) if hub}),
            desc="Downloads",
            unit="ckpt",
            disable=not (progress and hub_uses),
        )

    # ------------------------------------------------------------------ the sweep's side
    def __enter__(self) -> CheckpointPipeline:
        with self._lock:
            self._schedule()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Start no more downloads; those running finish in the background (their files stay in the cache, for a
        resumed sweep to use)."""
        with self._lock:
            self._closed = True
            self._evict_ready()
        self._bar.close()
        self._warn_notes()

    def take(self, checkpoint: Checkpoint) -> Fetched:
        """Waits until the next use's files are complete and returns them.

        Args:
            checkpoint: The next use's checkpoint (uses are taken in order).

        Returns:
            Its files (`Fetched.folder` None for a local checkpoint).

        Raises:
            CheckpointError: Its download failed (as `hub_access.fetch` says); the use counts as taken.
            RuntimeError: `checkpoint` is not the next use (a bug of the caller).
        """
        with self._lock:
            index = self._turn
            if index >= len(self.uses) or self.uses[index] != checkpoint:
                raise RuntimeError(f"CheckpointPipeline: {checkpoint.name} is not the next use (use {index}).")
            self._waiting = index
            self._schedule()
            while self.on_hub[index] and not (index in self._of_use and self._of_use[index].done):
                self._lock.wait()
            self._turn, self._waiting = index + 1, None
            self._taken.append(index)
            download = self._of_use.get(index)
            retries = list(download.retries) if download is not None else []
            if download is not None:
                download.retries.clear()
            self._schedule()
        self._warn_notes()
        for message in retries:
            warnings.warn(message, stacklevel=3)
        if download is None:
            return Fetched()
        if download.error is not None:
            raise download.error
        return download.fetched

    def done(self, checkpoint: Checkpoint) -> None:
        """The earliest taken use of `checkpoint` is over (its rows are written): evict its revision if the sweep
        fetched it, no later use needs it, or keeping it would crowd out the look-ahead."""
        with self._lock:
            index = next((i for i in self._taken if self.uses[i] == checkpoint), None)
            if index is None:
                return
            self._taken.remove(index)
            download = self._of_use.pop(index, None)
            if download is not None:
                download.users.discard(index)
                if not download.users and download.error is None:
                    download.evicting = self._should_evict(download, index)
                self._schedule()
        self._warn_notes()

    @property
    def held_bytes(self) -> int:
        """Bytes of the revisions this sweep fetched and still holds in the cache."""
        with self._lock:
            return self._held()

    # ------------------------------------------------------------------ scheduling (under the lock)
    def _schedule(self) -> None:
        self._evict_ready()
        while self._next < len(self.uses) and not self._closed:
            index = self._next
            if not self.on_hub[index]:
                self._next += 1
                continue
            if index >= self._turn + self.prefetch and index != self._waiting:
                return
            checkpoint = self.uses[index]
            existing = self._downloads.get(_key(checkpoint))
            if existing is None and not self._may_start(index):
                return
            if existing is None:
                existing = self._start(checkpoint)
            existing.users.add(index)
            existing.evicting = False
            self._of_use[index] = existing
            self._next += 1

    def _may_start(self, index: int) -> bool:
        if index == self._waiting:
            return True  # the sweep waits for it: it always starts (hence budget + one checkpoint at most)
        if self._running >= self.max_concurrent:
            return False
        if self.budget is None:
            return True
        if self._estimate is None:
            return self._running == 0  # the first download goes alone: its size is unknown
        return self._held() + (self._running + 1) * self._estimate <= self.budget

    def _start(self, checkpoint: Checkpoint) -> _Download:
        download = _Download(checkpoint)
        self._downloads[_key(checkpoint)] = download
        self._running += 1
        threading.Thread(target=self._fetch, args=(download,), name=f"fetch {checkpoint.name}", daemon=True).start()
        return download

    def _held(self) -> int:
        return sum(d.nbytes for d in self._downloads.values() if d.ours and d.done)

    def _should_evict(self, download: _Download, index: int) -> bool:
        if not (self.evicts and download.ours):
            return False
        later = any(_key(self.uses[i]) == _key(download.checkpoint) for i in range(index + 1, len(self.uses)))
        if not later:
            return True
        kept = sum(d.nbytes for d in self._downloads.values() if d.ours and d.done and not d.users and not d.evicting)
        return kept + (self.prefetch + 1) * (self._estimate or 0) > self.budget

    def _evict_ready(self) -> None:
        """Evict the revisions marked for it, unless a download from their repository is running (a commit that
        another revision name still holds, such as `main` and its step, is only forgotten)."""
        busy = {d.repo for d in self._downloads.values() if not d.done}
        ready = [d for d in self._downloads.values() if d.evicting and not d.users and d.repo not in busy]
        if not ready:
            return
        for download in ready:
            del self._downloads[_key(download.checkpoint)]
        held = {d.commit for d in self._downloads.values()}
        commits = {d.commit for d in ready} - held
        if not commits:
            return
        try:
            self.evicted_bytes += hub_cache.evict(self.cache, commits)
        except Exception as error:  # noqa: BLE001  (a cache that cannot be scanned: warn, never stop the sweep)
            self._notes.append(
                f"Could not evict {', '.join(d.checkpoint.name for d in ready)} from {self.cache}: "
                f"{error}. Delete them with `{hub_access.hub_command()} cache delete`."
            )
        self._show()

    # ------------------------------------------------------------------ the download threads
    def _fetch(self, download: _Download) -> None:
        checkpoint = download.checkpoint
        start = time.perf_counter()
        try:
            folder = hub_access.fetch(
                checkpoint.source,
                checkpoint.revision,
                cache_dir=self.cache,
                label=checkpoint.name,
                on_retry=download.retries.append,
                quiet=True,
                timeout=self.hub_timeout,
            )
            fetched = Fetched(folder, time.perf_counter() - start, hub_cache.revision_bytes(folder))
        except BaseException as error:  # noqa: BLE001  (handed to the use, raised at its turn)
            fetched, failure = None, error
        else:
            failure = None
        with self._lock:
            self._running -= 1
            download.done, download.fetched, download.error = True, fetched, failure
            try:
                if failure is not None:
                    del self._downloads[_key(checkpoint)]  # a later use fetches it afresh
                else:
                    self._count(download)
                self._schedule()
            finally:
                self._lock.notify_all()

    def _count(self, download: _Download) -> None:
        """Record a completed download: whose it is, its size, the progress bar."""
        download.ours = self.evicts and download.commit not in self.before.get(download.repo, set())
        self._estimate = max(self._estimate or 0, download.nbytes)
        self.fetched_bytes += download.nbytes
        self.downloads += 1
        if self.downloads > self._bar.total:
            self._bar.total = self.downloads
        self._bar.update(1)
        self._show()

    def _show(self) -> None:
        self._bar.set_postfix_str(
            f"{self.fetched_bytes / _GB:.2f} GB fetched, {self._held() / _GB:.2f} GB held", refresh=False
        )

    def _warn_notes(self) -> None:
        with self._lock:
            notes, self._notes = self._notes, []
        for note in notes:
            warnings.warn(note, stacklevel=3)


def _key(checkpoint: Checkpoint) -> tuple[str, str | None]:
    """What a download fetches: a repository's revision (two checkpoints may name the same one)."""
    return checkpoint.source, checkpoint.revision
