# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's results directory: its config, its rows and its tangents; what is done, and where each file goes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..commons.columns import row_line
from ..commons.files import write_atomically
from ..commons.hub import BEFORE_FILE
from ..commons.json_files import load_json, read_text, read_whole_lines
from ..errors import InvalidInputError, ResultsStoreError, SweepLockedError
from ..tangents.subspace import Subspace
from ..tangents.top_tokens import DirectionTokens
from .extension import merge_configs
from .provenance import PROVENANCE_FILE, file_digest, provenance_line, recorded_digests
from .rows_file import CONFIG_FILE, ROWS_FILE, check_rows, is_skipped, read_config, read_rows, row_key
from .token_files import (
    TOP_TOKENS_DIR,
    folder_name,
    read_top_tokens,
    saved_steps,
    step_of,
    top_tokens_path,
    write_top_tokens,
)

__all__ = ["SweepStore"]

LOCK_FILE = ".sweep.lock"
HOLDER_FILE = ".sweep.lock.json"
#: Everything a sweep or a live probe writes in its results directory (but its lock and the Hub-cache record), in
#: the order an overwrite removes them: config.json first, so that an overwrite killed half-way leaves artefacts
#: without their settings, which the next run refuses, never old artefacts a resume would take as its own.
LIBRARY_FILES = (CONFIG_FILE, ROWS_FILE, PROVENANCE_FILE, "reference", "tangents", TOP_TOKENS_DIR, "report")
#: The prefix of the hidden folder an overwrite moves the old artefacts into before deleting them.
TRASH_PREFIX = ".overwritten-"
_PROVENANCE_ADVICE = "Delete it (the rows stay valid, their versions are then unknown)."


def _computed_keys(rows: list[dict[str, Any]]) -> set[tuple[int, str, str]]:
    """The keys of the rows that hold numbers (a skipped row is retried, so it does not count as done)."""
    return {row_key(row) for row in rows if not is_skipped(row)}


class SweepStore:
    """The files of one sweep under `results_dir`: config.json, rows.jsonl, reference/ and tangents/.

    Args:
        results_dir: The sweep's folder.

    Examples:
        >>> store = SweepStore("runs/toy/sweep")  # doctest: +SKIP
        >>> with store.lock():  # doctest: +SKIP
        ...     store.prepare(config, overwrite=False)
        ...     store.done()
        {(0, '1', 'early'), (1, '1', 'early')}
    """

    def __init__(self, results_dir: str | Path):
        self.results_dir = Path(results_dir)

    # ------------------------------------------------------------------ one writer
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory's exclusive lock while the block runs.

        Raises:
            SweepLockedError: Another process holds it (named by pid, host and start time).
            InvalidInputError: The folder cannot be created.
        """
        self._create_folder()
        lock = FileLock(str(self.results_dir / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise SweepLockedError(
                f"{self.results_dir} is being written by another sweep ({self._holder()}). Wait for it to finish, "
                "or give this sweep another results_dir."
            ) from None
        holder = self.results_dir / HOLDER_FILE
        try:
            write_atomically(
                holder,
                json.dumps(
                    {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
                ),
            )
            self._remove_temporary_files()
            yield
        finally:
            holder.unlink(missing_ok=True)
            lock.release()

    def _remove_temporary_files(self) -> None:
        """Remove the temporary files of writes a killed sweep left behind (only a lock holder may)."""
        folders = (
            self.results_dir,
            self.results_dir / "reference",
            *self.results_dir.glob("tangents/*"),
            *self.results_dir.glob(f"{TOP_TOKENS_DIR}/*"),
        )
        for folder in folders:
            for leftover in folder.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)
        for trash in self.results_dir.glob(f"{TRASH_PREFIX}*"):
            shutil.rmtree(trash, ignore_errors=True)  # an overwrite killed before it deleted the old artefacts

    def _holder(self) -> str:
        try:
            info = load_json(self.results_dir / HOLDER_FILE)
            return f"pid {info['pid']} on host {info['host']}, since {info['since']}"
        except (ResultsStoreError, KeyError, TypeError):
            return "a process that has not written its name yet"

    def _create_folder(self) -> None:
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InvalidInputError(f"Cannot create results_dir {self.results_dir}: {error}") from error

    # ------------------------------------------------------------------ settings
    def prepare(self, config: dict[str, Any], *, overwrite: bool) -> dict[str, Any]:
        """Check `config` against config.json and record it (call it holding the lock).

        Returns:
            The config now in config.json: the union of what every run asked for.

        Raises:
            ConfigMismatchError: The folder holds a sweep with other settings (and not `overwrite`).
            ResultsStoreError: Results without a config, or an unreadable config (and not `overwrite`).
            InvalidInputError: The folder cannot be created.
        """
        self._create_folder()
        path = self.results_dir / CONFIG_FILE
        if overwrite:
            self.clear()
            write_atomically(path, json.dumps(config, indent=1))
            return config
        if not path.exists():
            self.refuse_leftovers()
            write_atomically(path, json.dumps(config, indent=1))
            return config
        stored = read_config(path)
        merged = merge_configs(stored, config, where=str(self.results_dir))
        if merged != stored:
            write_atomically(path, json.dumps(merged, indent=1))
        return merged

    def leftovers(self) -> list[str]:
        """The names of `LIBRARY_FILES` present in the folder."""
        return [name for name in LIBRARY_FILES if (self.results_dir / name).exists()]

    def refuse_leftovers(self) -> None:
        """Refuse results whose settings are unknown (call it when config.json is missing).

        Raises:
            ResultsStoreError: The folder holds some of `LIBRARY_FILES`, naming them.
        """
        leftovers = self.leftovers()
        if leftovers:
            raise ResultsStoreError(
                f"{self.results_dir} holds {', '.join(leftovers)} but no {CONFIG_FILE}: their settings are unknown, "
                "so they are not reused. Rerun with overwrite=True to start afresh."
            )

    def clear(self) -> None:
        """Remove every file the library wrote in the folder (`LIBRARY_FILES`), reading none (call it holding the
        lock). They are moved into one hidden folder first (config.json first), which is then deleted: a kill in
        between leaves artefacts without a config, or a hidden folder the next lock holder deletes.

        Raises:
            ResultsStoreError: A file that cannot be moved or deleted, naming it.
        """
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

    # ------------------------------------------------------------------ rows
    def rows(self) -> list[dict[str, Any]]:
        """The rows written so far (checked: no row twice, no mixed settings)."""
        rows = read_rows(self.results_dir / ROWS_FILE)
        check_rows(rows, self.results_dir / ROWS_FILE)
        return rows

    def done(self) -> set[tuple[int, str, str]]:
        """The (step, split point as given, tangent kind) keys with a computed row (skipped rows are retried)."""
        return _computed_keys(self.rows())

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Add complete rows to rows.jsonl in one atomic write, in step order, skipping keys already computed.

        Raises:
            ResultsStoreError: An unreadable rows file.
        """
        written = self.rows()  # reads and checks every line first
        done = _computed_keys(written)
        fresh = [row for row in sorted(rows, key=lambda row: row["step"]) if row_key(row) not in done]
        if fresh:
            keys = {row_key(row) for row in fresh}
            # before the rows: never rows without a line; it names the files written with them by their digest
            self._record_provenance([row_key(row) for row in fresh], self._files_of(fresh))
            self._rewrite([row for row in written if row_key(row) not in keys], fresh)

    def _files_of(self, rows: list[dict[str, Any]]) -> dict[str, str]:
        """{path relative to the folder: digest} of the tangents and top tokens saved with `rows`."""
        paths = {
            path
            for row in rows
            if not is_skipped(row)
            for path in (self.tangent_path(row["layer"], row["step"]), self.top_tokens_path(row["layer"], row["step"]))
        }
        return {self._relative(path): file_digest(path) for path in sorted(paths) if path.is_file()}

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.results_dir).as_posix()

    def _record_provenance(self, keys: list[tuple[int, str, str]], files: dict[str, str] | None = None) -> None:
        """Append to provenance.jsonl the line saying which software computes the rows of `keys`, and the digests
        of the `files` written with them."""
        path = self.results_dir / PROVENANCE_FILE
        # a line cut short by a kill is dropped
        existing = read_whole_lines(path, advice=_PROVENANCE_ADVICE)[0] if path.exists() else ""
        write_atomically(path, existing + provenance_line(keys, files))

    def altered_files(self, layers: list[int | str]) -> list[Path]:
        """The reference tangents (of `layers`), tangents and top-tokens files whose bytes are not those
        provenance.jsonl records they were written with (files it does not name are not checked: written before
        files were recorded).

        Raises:
            ResultsStoreError: An unreadable provenance file.
        """
        recorded = recorded_digests(self.results_dir)
        if not recorded:
            return []
        candidates = [
            *(self.reference_path(layer) for layer in layers),
            *sorted((self.results_dir / "tangents").glob("*/step-*.safetensors")),
            *sorted((self.results_dir / TOP_TOKENS_DIR).glob("*/step-*.json")),
        ]
        return [
            path
            for path in candidates
            if self._relative(path) in recorded
            and path.is_file()
            and file_digest(path) != recorded[self._relative(path)]
        ]

    def update_rows(self, update: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Replace every row by `update(row)` (same key), in one atomic write if any row changed."""
        rows = self.rows()
        self._rewrite([update(dict(row)) for row in rows], [])

    def drop_steps(self, steps: set[int]) -> None:
        """Remove the rows and saved tangents of some checkpoints (their content changed), in one atomic write."""
        kept = [row for row in self.rows() if row["step"] not in steps]
        self._rewrite(kept, [])
        for path in [
            *(self.results_dir / "tangents").glob("*/step-*.safetensors"),
            *(self.results_dir / TOP_TOKENS_DIR).glob("*/step-*.json"),
        ]:
            if step_of(path) in steps:
                path.unlink()

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

    @property
    def hub_cache_record(self) -> Path:
        """Where the snapshots the sweep's Hub repositories had in the Hugging Face cache before its first run are
        recorded (`commons.hub.cached_before`): those are never evicted."""
        return self.results_dir / BEFORE_FILE

    # ------------------------------------------------------------------ tangents
    def reference_path(self, layer: int | str) -> Path:
        """Where the reference tangent of a split point goes."""
        return self.results_dir / "reference" / f"{folder_name(layer)}.safetensors"

    def save_reference(self, layer: int | str, subspace: Subspace) -> Path:
        """Save the reference tangent of a split point, its digest recorded in provenance.jsonl first (a kill in
        between leaves a recorded file missing, which is fitted again)."""
        path = self.reference_path(layer)
        data = subspace.file_bytes()
        self._record_provenance([], {self._relative(path): file_digest(data)})
        return write_atomically(path, data)

    def tangent_path(self, layer: int | str, step: int) -> Path:
        """Where the tangent refitted on a checkpoint goes."""
        return self.results_dir / "tangents" / folder_name(layer) / f"step-{step}.safetensors"

    def tangent(self, layer: int | str, step: int, *, device: str = "cpu") -> Subspace | None:
        """The tangent refitted on a checkpoint, None when it was not saved."""
        path = self.tangent_path(layer, step)
        return Subspace.load(path, device=device) if path.exists() else None

    # ------------------------------------------------------------------ top tokens
    def top_tokens_path(self, layer: int | str, step: int) -> Path:
        """Where the top tokens of a checkpoint's tangent directions go."""
        return top_tokens_path(self.results_dir, layer, step)

    def save_top_tokens(
        self,
        layer: int | str,
        step: int,
        *,
        split_point: str,
        n_rows: int,
        directions: dict[str, list[DirectionTokens]],
    ) -> None:
        """Write the top tokens of a checkpoint's tangents (tangent kind -> one entry per direction), atomically."""
        path = self.top_tokens_path(layer, step)
        write_top_tokens(path, step=step, layer=layer, split_point=split_point, n_rows=n_rows, directions=directions)

    def top_tokens(self, layer: int | str, step: int) -> dict[str, Any] | None:
        """The top tokens saved for a checkpoint and split point (`token_files.read_top_tokens`), None when absent."""
        return read_top_tokens(self.results_dir, layer, step)

    def top_tokens_steps(self, layer: int | str) -> list[int]:
        """The steps whose top tokens are saved for a split point, in order."""
        return saved_steps(self.results_dir, layer)
