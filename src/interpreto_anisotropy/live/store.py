# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's results directory, in a sweep's layout (config.json, rows.jsonl, reference/, tangents/), so that
`SweepResult.load`, its plots, its report and the CLI's ``report`` read it unchanged.

Rows of closed windows are appended (`append_whole`, at most every `flush_seconds`, always at `close`); a folder
with the same settings resumes at `start_step` (later rows and an unterminated last line dropped), and
`saved_tangents` reads back the tangent the stopped run scored against. docs/how-to/live-probe.md ("Resuming").
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any

from ..commons import distributed
from ..commons.columns import row_line
from ..commons.files import append_whole, cut_unterminated_tail, write_atomically
from ..errors import (
    ConfigMismatchError,
    IncompleteRowWarning,
    LiveResumeWarning,
    ResultsStoreError,
    TrainingProbeError,
)
from ..sweeps.change import UNPAIRED_CHANGES
from ..sweeps.rows_file import CONFIG_FILE, ROWS_FILE, read_config
from ..sweeps.store import SweepStore
from ..tangents.subspace import Subspace
from .options import LiveTangent

__all__ = ["LiveStore", "first_windows", "saved_tangents"]

_STEP_FILE = re.compile(r"step-(\d+)\.safetensors")


class LiveStore:
    """Rows of a live probe appended to `results_dir`'s rows.jsonl, resumed or started afresh (`overwrite`: what
    the library wrote is removed) under `config` (what a resume must match); rows at or after `start_step` from an
    earlier run are dropped; rows.jsonl is written at most every `flush_seconds` (0: at every window).

    Raises:
        ConfigMismatchError: The folder holds results with other settings (and not `overwrite`).
        SweepLockedError: Another process writes the folder.
        ResultsStoreError: Unreadable rows, or results without a config.json (and not `overwrite`).
    """

    def __init__(
        self,
        results_dir: str | Path,
        config: dict[str, Any],
        *,
        overwrite: bool,
        start_step: int = 0,
        flush_seconds: float = 10.0,
    ):
        self.store = SweepStore(results_dir)
        self.results_dir = self.store.results_dir
        self.rows_path = self.results_dir / ROWS_FILE
        self.flush_seconds = flush_seconds
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(self.store.lock())
        try:
            self._prepare(config, overwrite=overwrite, start_step=start_step)
        except BaseException:
            self._exit.close()
            raise
        self._pending = ""
        self._last_write = -math.inf  # the first window is written at once

    def _prepare(self, config: dict[str, Any], *, overwrite: bool, start_step: int) -> None:
        """Check and record the settings; keep the rows of an earlier run before `start_step`."""
        path = self.results_dir / CONFIG_FILE
        if overwrite:
            self.store.clear()
        stored = read_config(path) if path.exists() else None
        if stored is not None and stored != config:
            changed = sorted(key for key in set(stored) | set(config) if stored.get(key) != config.get(key))
            raise ConfigMismatchError(
                f"{self.results_dir} holds results with other settings ({', '.join(changed)} differ). Use another "
                "results_dir, or overwrite=True to start afresh."
            )
        if stored is None:
            self.store.refuse_leftovers()
        write_atomically(path, json.dumps(config, indent=1))
        if stored is None:
            write_atomically(self.rows_path, "")
            return
        if cut_unterminated_tail(self.rows_path):
            warnings.warn(
                f"The last line of {self.rows_path} was unterminated (the previous run was stopped while writing "
                "it): it was removed; the rows before it are kept.",
                IncompleteRowWarning,
                stacklevel=4,
            )
        rows = self.store.rows()
        kept = [row for row in rows if row["step"] < start_step]
        if len(kept) < len(rows):
            write_atomically(self.rows_path, "".join(json.dumps(row) + "\n" for row in kept))

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
        path = self.store.reference_path(layer) if reference else self.store.tangent_path(layer, subspace.step or 0)
        subspace.save(path)
        return path

    def close(self) -> None:
        """Write what is pending and release the directory's lock."""
        try:
            self.flush(force=True)
        finally:
            self._exit.close()


def first_windows(results_dir: Path, start_step: int) -> dict[tuple[str, str], dict[str, Any]]:
    """The first row of each curve (split point, tangent kind) a stopped run wrote before `start_step`, the reference
    of the resumed run's changes (`sweeps.change.unpaired_change`); read by the main process and sent to every rank.
    """
    firsts: dict[tuple[str, str], dict[str, Any]] = {}
    if distributed.is_main_process():
        for row in SweepStore(results_dir).rows():
            key = (str(row["split_point"]), str(row["tangent"]))
            if row["step"] < start_step and (key not in firsts or row["step"] < firsts[key]["step"]):
                firsts[key] = {name: row.get(name) for name in ("step", *UNPAIRED_CHANGES)}
    return distributed.broadcast_object(firsts)


def saved_tangents(
    results_dir: Path,
    layers: dict[str, int | str],
    kind: LiveTangent,
    fit_every: int,
    every: int,
    start_step: int,
    *,
    nb_concepts: int | None = None,
) -> dict[str, Subspace]:
    """The tangents in use at `start_step` (> 0) per module path, read by the main process and sent to every rank.

    Args:
        results_dir: The live run's results directory.
        layers: Module path -> the split point as given (the name of its files).
        kind: EARLY or REFIT; `fit_every` the steps of the early fit, or the refit period (a multiple of `every`).
        nb_concepts: The rank the run's tangents have (None: not checked).

    Returns:
        The tangent of each split point whose tangent was fitted at or before `start_step` (the others fit afresh).

    Raises:
        TrainingProbeError: A tangent fitted before `start_step` whose file is missing, naming it.
        ResultsStoreError: A saved tangent of another rank than `nb_concepts`, naming its file.
    """
    found: dict[str, Subspace] | tuple[type, str] = {}
    if distributed.is_main_process():
        try:
            found = _read(SweepStore(results_dir), layers, kind, fit_every, every, start_step, nb_concepts)
        except (TrainingProbeError, ResultsStoreError) as error:
            found = (type(error), str(error))
    found = distributed.broadcast_object(found)
    if isinstance(found, tuple):
        raise found[0](found[1])
    return found


def _check_rank(file: Path, saved: Subspace, nb_concepts: int | None) -> None:
    """Refuse a saved tangent whose rank is not `nb_concepts` (another run's, left in the folder)."""
    if nb_concepts is not None and saved.rank != nb_concepts:
        raise ResultsStoreError(
            f"{file} holds a tangent of rank {saved.rank}, but this run's nb_concepts is {nb_concepts}: another run "
            "wrote it. Resume into the results_dir the stopped run wrote, or start afresh with overwrite=True."
        )


def _read(
    store: SweepStore,
    layers: dict[str, int | str],
    kind: LiveTangent,
    fit_every: int,
    every: int,
    start_step: int,
    nb_concepts: int | None,
) -> dict[str, Subspace]:
    found = {}
    for path, layer in layers.items():
        if kind is LiveTangent.EARLY:
            fitted_at = math.ceil(fit_every / every) * every  # the first window close at or after the early steps
            file = store.reference_path(layer)
            saved = Subspace.load(file) if file.exists() else None
            saved = saved if saved is not None and (saved.step or 0) <= start_step else None
        else:
            fitted_at = start_step - start_step % fit_every
            file, saved = _last_refit(store, layer, start_step)
            file = file or store.tangent_path(layer, fitted_at)
        if saved is None and 0 < fitted_at <= start_step:
            raise TrainingProbeError(
                f"The live run resumed at step {start_step} scores its windows at split point {layer!r} against the "
                f"{kind.value} tangent fitted at step {fitted_at}, but {file} is missing. Resume into the results_dir "
                "the stopped run wrote, pass that tangent as tangent=Subspace.load(...), or restart from step 0."
            )
        if saved is not None:
            _check_rank(file, saved, nb_concepts)
            found[path] = saved
        if saved is None or (kind is LiveTangent.REFIT and saved.step != start_step):
            _warn_partial_fit(path, kind, fitted_at if kind is LiveTangent.EARLY else fit_every, start_step, saved)
    return found


def _last_refit(store: SweepStore, layer: int | str, start_step: int) -> tuple[Path | None, Subspace | None]:
    """The tangent refitted last at or before `start_step` and its file, (None, None) when none was saved."""
    folder = store.tangent_path(layer, 0).parent
    steps = [int(match[1]) for file in folder.glob("step-*.safetensors") if (match := _STEP_FILE.fullmatch(file.name))]
    steps = [step for step in steps if step <= start_step]
    if not steps:
        return None, None
    file = store.tangent_path(layer, max(steps))
    return file, Subspace.load(file)


def _warn_partial_fit(path: str, kind: LiveTangent, fit_at: int, start_step: int, tangent: Subspace | None) -> None:
    """Say that the next fit pools the steps from `start_step` only (the stopped run's pooled activations are lost)."""
    since = 0 if tangent is None else (tangent.step or 0)
    if kind is LiveTangent.EARLY:
        what = f"the early tangent is fitted on the steps from {start_step} to {fit_at - 1} only"
        lost = f"the windows of steps 0 to {start_step - 1}, which awaited it, will have no rows"
    else:
        what = f"the next refit, at step {since + fit_at}, pools the steps from {start_step} only"
        lost = f"the activations of steps {since} to {start_step - 1} are lost"
        if tangent is None:
            lost += f", and the windows of steps 0 to {start_step - 1}, which awaited the first fit, will have no rows"
    warnings.warn(
        f"The live run resumes at step {start_step} at split point '{path}': {what}; {lost} (the stopped run pooled "
        "them, and they are not saved). Resume from a checkpoint saved when a tangent was fitted to avoid this.",
        LiveResumeWarning,
        stacklevel=4,
    )
