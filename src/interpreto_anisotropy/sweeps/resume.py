# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a sweep checks in its results directory before it computes anything, so that a resume is one run."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..commons import distributed
from ..errors import (
    AlteredFileWarning,
    AnisotropyError,
    ConfigMismatchError,
    InvalidInputError,
    ResultsStoreError,
    StaleResultsError,
    SweepLockedError,
)
from ..results import verdict as draws
from ..results.records import step_of
from ..results.schema import is_skipped
from ..results.store import SweepStore
from .checkpoints import Checkpoint
from .drift import PreviousDrift
from .extension import merge_configs, tangent_kinds
from .freshness import TakenFingerprints, changed_early_steps, changed_steps
from .references import saved_reference
from .settings import SweepSettings

__all__ = ["ResultsDirCheck", "resolved_n_random"]

# Errors raised on rank 0 while locking and checking the results directory, raised again on every rank.
_ERRORS_BY_NAME = {
    error.__name__: error
    for error in (ConfigMismatchError, ResultsStoreError, SweepLockedError, StaleResultsError, InvalidInputError)
}


def resolved_n_random(settings: SweepSettings, *, checkpoints: int, split_points: int, kinds: int, warn: bool) -> int:
    """R' of a run's rows: the given `n_random`, or the smallest whose floor 1 / (R' + 1) passes the correction at
    the sweep's `level` over the rows of its declared `family` (`draws.family_size`, `draws.default_n_random`).

    Args:
        settings: The sweep's settings (its `n_random`, `n_controls`, `family` and `level`).
        checkpoints: The checkpoints of the results directory.
        split_points: Its split points.
        kinds: Its tangent kinds per split point.
        warn: Warn when a given `n_random` cannot let Holm pass over the family.

    Returns:
        The number of random subspaces each row draws.
    """
    size = draws.family_size(settings.family, checkpoints=checkpoints, split_points=split_points, kinds=kinds)
    if settings.n_random is None:
        return draws.default_n_random(size, n_controls=settings.n_controls, level=settings.level)
    if warn:
        draws.warn_if_cannot_pass(settings.n_random, size, settings.level)
    return settings.n_random


class ResultsDirCheck:
    """Lock and check a sweep's results directory on rank 0, then share what it holds with every rank.

    Args:
        settings: The sweep's settings.
        store: Its results directory.
        fingerprints: The checkpoints' fingerprints, taken once per run.
        drift: The drift from the previous checkpoint; its `checkpoints` become every checkpoint the directory has
            been asked for.
        announce: Where to say which rows are recomputed.
    """

    def __init__(
        self,
        settings: SweepSettings,
        store: SweepStore,
        fingerprints: TakenFingerprints,
        drift: PreviousDrift,
        announce: Callable[[str], None],
    ):
        self.settings = settings
        self.store = store
        self.fingerprints = fingerprints
        self.drift = drift
        self.announce = announce

    @contextmanager
    def held(self) -> Iterator[int]:
        """Hold the lock (rank 0) while the block runs, every rank raising the same error.

        Yields:
            R' of this run's rows (`resolved_n_random` over every checkpoint asked for).

        Raises:
            ConfigMismatchError: The directory holds a sweep with other settings (and not `overwrite`).
            ResultsStoreError: A tangent or top-tokens file altered since it was written, of a checkpoint this run
                does not have (so it cannot be computed again), naming the files.
            StaleResultsError: Rows computed on changed content, without `recompute_changed`.
            SweepLockedError: Another run holds the directory.
        """
        with contextlib.ExitStack() as stack:
            message = None
            n_random = None
            if distributed.is_main_process():
                try:
                    stack.enter_context(self.store.lock())
                    n_random = self._check()
                except AnisotropyError as error:
                    message = (type(error).__name__, str(error))
            message = distributed.broadcast_object(message)
            self.drift.checkpoints = distributed.broadcast_object(self.drift.checkpoints)
            n_random = distributed.broadcast_object(n_random)
            distributed.barrier()
            if message is not None:
                raise _ERRORS_BY_NAME.get(message[0], InvalidInputError)(message[1])
            yield n_random

    def _check(self) -> int:
        """Prepare the directory, drop what must be recomputed, and return R' (rank 0, under the lock)."""
        stored = self.store.prepare(self.settings.config(), overwrite=self.settings.overwrite, merge=merge_configs)
        self.drift.checkpoints = [Checkpoint.from_dict(entry) for entry in stored["checkpoints"]]
        self._refit_altered_files()
        self._forget_changed_checkpoints()
        n_random = resolved_n_random(
            self.settings,
            checkpoints=len(self.drift.checkpoints),
            split_points=len(stored["split_points"]),
            kinds=len(tangent_kinds(stored["reference"])),
            warn=True,
        )
        self._forget_underdrawn_rows(n_random)
        return n_random

    def _forget_underdrawn_rows(self, n_random: int) -> None:
        """Drop the rows drawn with fewer random subspaces than the default R' of the (grown) family, to recompute."""
        if self.settings.n_random is not None:
            return
        steps = {
            row["step"]
            for row in self.store.rows()
            if not is_skipped(row) and row.get("n_random", n_random) < n_random
        }
        if steps:
            self.announce(
                f"recomputing {len(steps)} checkpoint(s) drawn with fewer than the {n_random} random subspaces "
                f"that the correction needs over the {self.settings.family} family of {len(self.drift.checkpoints)} "
                "checkpoints"
            )
            self.store.drop_steps(steps)

    def _refit_altered_files(self) -> None:
        """Drop the reference tangents, tangents and top tokens whose bytes are not those provenance.jsonl records
        (with the rows of the checkpoints they belong to), to fit them again; refuse those this run cannot."""
        altered = self.store.altered_files(self.settings.layers)
        if not altered:
            return
        references = [path for path in altered if path.parent == self.store.reference_path(0).parent]
        ours = {checkpoint.step for checkpoint in self.settings.checkpoints}
        computed = {row["step"] for row in self.store.rows() if not is_skipped(row)}
        by_step: dict[int, list[Path]] = {}
        for path in altered:
            step = None if path in references else step_of(path)
            if step is not None and (step in computed or step not in ours):  # else: written again before it is read
                by_step.setdefault(step, []).append(path)
        altered = references + [path for paths in by_step.values() for path in paths]
        if not altered:
            return
        foreign = [path for step, paths in sorted(by_step.items()) if step not in ours for path in paths]
        if foreign:
            raise ResultsStoreError(
                f"{_not_written(foreign)}, and this run does not have their checkpoints, so it cannot compute them "
                "again. Rerun with those checkpoints among this sweep's to recompute them, restore the files, or "
                "rerun with overwrite=True."
            )
        again = ["the reference tangent is fitted again on the early checkpoints"] if references else []
        again += [f"the rows of steps {sorted(by_step)} are computed again"] if by_step else []
        warnings.warn(f"{_not_written(altered)}: {'; '.join(again)}.", AlteredFileWarning, stacklevel=2)
        for path in references:
            path.unlink()
        if by_step:
            self.store.drop_steps(set(by_step))
            self.drift.forget_after(sorted(by_step))

    def _forget_changed_checkpoints(self) -> None:
        """Refuse, or drop with `recompute_changed`, rows and references computed on content that has changed."""
        rows = [row for row in self.store.rows() if not is_skipped(row)]  # skipped rows are retried anyway
        written = {row["step"] for row in rows}
        current = self.fingerprints.by_step(c for c in self.settings.checkpoints if c.step in written)
        steps = changed_steps(rows, current)
        early = sorted(
            {
                step
                for layer in self.settings.layers
                if self.store.reference_path(layer).exists()
                for step in changed_early_steps(
                    saved_reference(self.store.reference_path(layer), self.settings).info,
                    self.fingerprints.by_step(self.settings.early),
                )
            }
        )
        if not steps and not early:
            return
        if not self.settings.recompute_changed:
            raise StaleResultsError(
                f"{self.store.results_dir} holds results of checkpoints whose content has changed since (steps "
                f"{sorted(set(steps) | set(early))}"
                + (", early checkpoints of the reference tangent" if early else "")
                + "). Rerun with recompute_changed=True (--recompute-changed) to recompute them, use another "
                "results_dir, or overwrite=True."
            )
        if early:
            self.store.drop_references()
            steps = sorted(written)
        self.store.drop_steps(set(steps))
        self.drift.forget_after(steps)  # the drift of the checkpoints after them is measured again at the end


def _not_written(paths: list[Path]) -> str:
    """ "<files> do(es) not hold the bytes the sweep wrote there ..." (the start of a sentence)."""
    verb, their = ("does", "its") if len(paths) == 1 else ("do", "their")
    return (
        f"{', '.join(map(str, paths))} {verb} not hold the bytes the sweep wrote there ({their} sha256 is not the "
        "one provenance.jsonl records)"
    )
