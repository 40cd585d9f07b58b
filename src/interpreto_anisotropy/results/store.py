# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A results directory: `SweepStore` rewrites its rows.jsonl atomically, `LiveStore` appends a live probe's."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..commons.files import append_whole, cut_unterminated_tail, load_json, read_text, write_atomically
from ..errors import InvalidInputError, ResultsFileWarning, ResultsStoreError, SweepLockedError
from ..tangents.subspace import Subspace
from ..tangents.top_tokens import TOKEN_FIELDS, DirectionTokens
from .records import (
    PROVENANCE_FILE,
    TOP_TOKENS_DIR,
    file_digest,
    folder_name,
    record_provenance,
    recorded_digests,
    step_of,
    top_tokens_path,
)
from .schema import CONFIG_FILE, ROWS_FILE, check_rows, is_skipped, read_config, read_rows, row_key, row_line

LOCK_FILE = ".sweep.lock"
HOLDER_FILE = ".sweep.lock.json"
#: Everything a sweep or a live probe writes in its results directory (but its lock and the Hub-cache record), in
#: the order an overwrite removes them: config.json first, so that an overwrite killed half-way leaves artefacts
#: without their settings, which the next run refuses, never old artefacts a resume would take as its own.
LIBRARY_FILES = (CONFIG_FILE, ROWS_FILE, PROVENANCE_FILE, "reference", "tangents", TOP_TOKENS_DIR, "report")
#: The prefix of the hidden folder an overwrite moves the old artefacts into before deleting them.
TRASH_PREFIX = ".overwritten-"


class SweepStore:
    """The files of one sweep under `results_dir`: config.json, rows.jsonl, reference/ and tangents/."""

    def __init__(self, results_dir: str | Path):
        self.results_dir = Path(results_dir)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory's exclusive lock while the block runs."""
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InvalidInputError(f"Cannot create results_dir {self.results_dir}: {error}") from error
        lock = FileLock(str(self.results_dir / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            try:
                info = load_json(self.results_dir / HOLDER_FILE)
                holder = f"pid {info['pid']} on host {info['host']}, since {info['since']}"
            except (ResultsStoreError, KeyError, TypeError):
                holder = "a process that has not written its name yet"
            raise SweepLockedError(
                f"{self.results_dir} is being written by another sweep ({holder}). Wait for it to finish, "
                "or give this sweep another results_dir."
            ) from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        try:
            write_atomically(self.results_dir / HOLDER_FILE, json.dumps(holder))
            # the temporary files of writes a killed run left behind, and the old artefacts of a killed overwrite
            for pattern in (".*.tmp", "reference/.*.tmp", "tangents/*/.*.tmp", f"{TOP_TOKENS_DIR}/*/.*.tmp"):
                for leftover in self.results_dir.glob(pattern):
                    leftover.unlink(missing_ok=True)
            for trash in self.results_dir.glob(f"{TRASH_PREFIX}*"):
                shutil.rmtree(trash, ignore_errors=True)
            yield
        finally:
            (self.results_dir / HOLDER_FILE).unlink(missing_ok=True)
            lock.release()

    def prepare(
        self, config: dict[str, Any], *, overwrite: bool, merge: Callable[..., dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Check `config` against config.json and record it (call it holding the lock)."""
        path = self.results_dir / CONFIG_FILE
        if overwrite:
            self.clear()  # config.json included: what follows starts afresh
        stored = read_config(path) if path.exists() else None
        if stored is None and (leftovers := self.leftovers()):
            raise ResultsStoreError(
                f"{self.results_dir} holds {', '.join(leftovers)} but no {CONFIG_FILE}: their settings are "
                "unknown, so they are not reused. Rerun with overwrite=True to start afresh."
            )
        if merge is None and stored not in (None, config):
            changed = sorted(key for key in set(stored) | set(config) if stored.get(key) != config.get(key))
            raise InvalidInputError(
                f"{self.results_dir} holds results with other settings ({', '.join(changed)} differ). Use another "
                "results_dir, or overwrite=True to start afresh."
            )
        merged = config if merge is None or stored is None else merge(stored, config, where=str(self.results_dir))
        if merged != stored:
            write_atomically(path, json.dumps(merged, indent=1))
        return merged

    def leftovers(self) -> list[str]:
        """The names of `LIBRARY_FILES` present in the folder."""
        return [name for name in LIBRARY_FILES if (self.results_dir / name).exists()]

    def clear(self) -> None:
        """Remove `LIBRARY_FILES`, reading none, moved (config.json first) into a hidden folder then deleted."""
        present = self.leftovers()
        if not present:
            return
        trash = self.results_dir / f"{TRASH_PREFIX}{uuid.uuid4().hex}"
        try:
            trash.mkdir()
            for name in present:
                os.replace(self.results_dir / name, trash / name)
            shutil.rmtree(trash)
        except OSError as error:
            raise ResultsStoreError(
                f"Cannot remove the earlier results in {self.results_dir} to overwrite them ({error}). Check that you "
                "may write that folder, or delete its config.json, rows.jsonl, reference/ and tangents/ yourself."
            ) from error

    def rows(self) -> list[dict[str, Any]]:
        """The rows written so far (checked: no row twice, no mixed settings)."""
        rows = read_rows(self.results_dir / ROWS_FILE)
        check_rows(rows, self.results_dir / ROWS_FILE)
        return rows

    def done(self) -> set[tuple[int, str, str]]:
        """The (step, split point as given, tangent kind) keys with a computed row (skipped rows are retried)."""
        return {row_key(row) for row in self.rows() if not is_skipped(row)}

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Add complete rows to rows.jsonl in one atomic write, in step order, skipping keys already computed."""
        written = self.rows()  # reads and checks every line first
        done = {row_key(row) for row in written if not is_skipped(row)}
        fresh = [row for row in sorted(rows, key=lambda row: row["step"]) if row_key(row) not in done]
        if fresh:
            keys = [row_key(row) for row in fresh]
            at = [(row["layer"], row["step"]) for row in fresh if not is_skipped(row)]
            paths = {self.tangent_path(*key) for key in at} | {top_tokens_path(self.results_dir, *key) for key in at}
            # before the rows: never rows without a line; it names the files written with them by their digest
            files = {self._relative(path): file_digest(path) for path in sorted(paths) if path.is_file()}
            record_provenance(self.results_dir, keys, files)
            self._rewrite([row for row in written if row_key(row) not in keys], fresh)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.results_dir).as_posix()

    def altered_files(self, layers: list[int | str]) -> list[Path]:
        """The reference tangents (of `layers`), tangents and top-tokens files not holding the bytes recorded."""
        recorded = recorded_digests(self.results_dir)
        candidates = [*(self.reference_path(layer) for layer in layers), *self._step_files()] if recorded else []
        digests = {path: recorded.get(self._relative(path)) for path in candidates}
        return [path for path, digest in digests.items() if digest and path.is_file() and file_digest(path) != digest]

    def update_rows(self, update: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Replace every row by `update(row)` (same key), in one atomic write if any row changed."""
        self._rewrite([update(dict(row)) for row in self.rows()], [])

    def drop_steps(self, steps: set[int]) -> None:
        """Remove the rows and saved tangents of some checkpoints (their content changed), in one atomic write."""
        self._rewrite([row for row in self.rows() if row["step"] not in steps], [])
        for path in self._step_files():
            if step_of(path) in steps:
                path.unlink()

    def _step_files(self) -> list[Path]:
        """The tangents and top-tokens files saved per checkpoint, in order."""
        tangents = (self.results_dir / "tangents").glob("*/step-*.safetensors")
        return sorted(tangents) + sorted((self.results_dir / TOP_TOKENS_DIR).glob("*/step-*.json"))

    def drop_references(self) -> None:
        """Remove the saved reference tangents (their early checkpoints changed)."""
        shutil.rmtree(self.results_dir / "reference", ignore_errors=True)

    def _rewrite(self, kept: list[dict[str, Any]], fresh: list[dict[str, Any]]) -> None:
        """Write `kept` (in their order) then `fresh` as rows.jsonl, unless that is what is there already."""
        path = self.results_dir / ROWS_FILE
        text = "".join(json.dumps(row) + "\n" for row in kept) + "".join(map(row_line, fresh))  # fresh: checked
        existing = read_text(path) if path.exists() else ""
        if text != existing:
            write_atomically(path, text)

    def reference_path(self, layer: int | str) -> Path:
        """Where the reference tangent of a split point goes."""
        return self.results_dir / "reference" / f"{folder_name(layer)}.safetensors"

    def save_reference(self, layer: int | str, subspace: Subspace) -> Path:
        """Save the reference tangent of a split point, its digest recorded first (a kill leaves it to fit again)."""
        path = self.reference_path(layer)
        data = subspace.file_bytes()
        record_provenance(self.results_dir, [], {self._relative(path): file_digest(data)})
        return write_atomically(path, data)

    def tangent_path(self, layer: int | str, step: int) -> Path:
        """Where the tangent refitted on a checkpoint goes."""
        return self.results_dir / "tangents" / folder_name(layer) / f"step-{step}.safetensors"

    def tangent(self, layer: int | str, step: int, *, device: str = "cpu") -> Subspace | None:
        """The tangent refitted on a checkpoint, None when it was not saved."""
        path = self.tangent_path(layer, step)
        return Subspace.load(path, device=device) if path.exists() else None

    def save_top_tokens(
        self,
        layer: int | str,
        step: int,
        *,
        split_point: str,
        n_rows: int,
        directions: dict[str, list[DirectionTokens]],
    ) -> None:
        """Write the top tokens of a checkpoint's tangents atomically, unless the file already holds them."""
        path = top_tokens_path(self.results_dir, layer, step)
        tangents = {kind: [direction.to_dict() for direction in found] for kind, found in directions.items()}
        content = dict(step=step, layer=layer if isinstance(layer, int) else str(layer), split_point=split_point)
        content |= dict(n_rows=n_rows, token_fields=list(TOKEN_FIELDS), tangents=tangents)
        data = json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if not path.exists() or path.read_bytes() != data:
            write_atomically(path, data)


class LiveStore(SweepStore):
    """A live probe's rows appended every `flush_seconds` (rows of an earlier run from `start_step` on dropped),
    holding the folder's lock until `close`."""

    def __init__(
        self,
        results_dir: str | Path,
        config: dict[str, Any],
        *,
        overwrite: bool,
        start_step: int = 0,
        flush_seconds: float = 10.0,
    ):
        super().__init__(results_dir)
        self.rows_path = self.results_dir / ROWS_FILE
        self.flush_seconds = flush_seconds
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(self.lock())
        try:  # the settings checked and recorded; the rows of an earlier run before `start_step` kept
            fresh = overwrite or not (self.results_dir / CONFIG_FILE).exists()
            self.prepare(config, overwrite=overwrite)
            if fresh:
                write_atomically(self.rows_path, "")
            elif cut_unterminated_tail(self.rows_path):
                warnings.warn(
                    f"The last line of {self.rows_path} was unterminated (the previous run was stopped while writing "
                    "it): it was removed; the rows before it are kept.",
                    ResultsFileWarning,
                    stacklevel=3,
                )
            if not fresh:
                self._rewrite([row for row in self.rows() if row["step"] < start_step], [])
        except BaseException:
            self._exit.close()
            raise
        self._pending = ""
        self._last_write = -math.inf  # the first window is written at once

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Queue rows (a closed window's) and append them if `flush_seconds` have passed since the last write."""
        self._pending += "".join(map(row_line, rows))
        self.flush()

    def flush(self, *, force: bool = False) -> None:
        """Append the queued rows to rows.jsonl (if the period has passed since the last write, unless forced)."""
        now = time.monotonic()
        if self._pending and (force or now - self._last_write >= self.flush_seconds):
            append_whole(self.rows_path, self._pending)
            self._pending, self._last_write = "", now

    def save_tangent(self, layer: int | str, subspace: Subspace, *, reference: bool) -> Path:
        """Save a fitted tangent where a sweep keeps its reference (early) or its per-step tangents (refit)."""
        return subspace.save(self.reference_path(layer) if reference else self.tangent_path(layer, subspace.step or 0))

    def close(self) -> None:
        """Write what is pending and release the directory's lock."""
        try:
            self.flush(force=True)
        finally:
            self._exit.close()
