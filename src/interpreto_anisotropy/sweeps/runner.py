# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checkpoint sweeps: the paper's protocol end to end, resumable.

For a list of training checkpoints, a sweep (1) fits the reference tangent on activations pooled over the early
checkpoints (the first `early_fraction` of training, as the paper does), (2) for every checkpoint and split
point, reads the activations of the fit texts, refits a tangent on them, probes the true training-loss
gradients on held-out probe texts against the reference (and/or the refitted) tangent and matched-rank normal
controls, and measures the activations' isotropy, the frequency-distance correlation, the on-manifold entropy
and the tangent's drift. Each finished checkpoint's rows are written atomically to ``rows.jsonl``; a rerun with
the same settings resumes at the first unfinished checkpoint. With each checkpoint's tangent go the top-activating
tokens of its directions and of the reference's (`tangents.top_tokens`, on the rows already read for the metrics),
and with each write of rows a line of ``provenance.jsonl`` saying which versions computed them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from interpreto import ModelWithSplitPoints
from tqdm.auto import tqdm

from .. import metrics
from ..commons import distributed
from ..errors import (
    AnisotropyError,
    CheckpointError,
    ConfigMismatchError,
    DimensionMismatchError,
    InvalidInputError,
    NonFiniteError,
    ResultsStoreError,
    SplitPointError,
    StaleResultsError,
    SweepLockedError,
)
from ..probing.probe import GradientProbe
from ..reading.activations import iter_located_token_activations
from ..reading.token_cache import TokenCache
from ..tangents.explainers import TangentExplainer
from ..tangents.subspace import Subspace
from ..tangents.top_tokens import top_tokens
from . import checkpoints as checkpoint_tools
from . import draws, hub_access, hub_cache
from .checkpoints import Checkpoint
from .config import SweepConfig
from .early_pool import EarlyPool
from .eta import CheckpointTimer, estimate_line, seconds_per_checkpoint_of_rows
from .fit_read import FitRead, FitReader
from .freshness import TakenFingerprints, changed_early_steps, changed_steps
from .prefetch import CheckpointPipeline, Fetched
from .result import SweepResult
from .rows_file import is_skipped
from .settings import ReferenceKind, SweepSettings, early_checkpoints
from .store import SweepStore

# Errors raised on rank 0 while locking and checking the results directory, raised again on every rank.
_ERRORS_BY_NAME = {
    error.__name__: error
    for error in (ConfigMismatchError, ResultsStoreError, SweepLockedError, StaleResultsError, InvalidInputError)
}
# A checkpoint that fails with one of these is skipped (and its rows say why) under skip_bad_checkpoints.
_BAD_CHECKPOINT = (CheckpointError, NonFiniteError)

__all__ = ["CheckpointSweep", "ReferenceKind", "early_checkpoints"]


class CheckpointSweep:
    """The paper's protocol over training checkpoints, resumable and atomic per checkpoint.

    Args:
        checkpoints: `Checkpoint`s (e.g. `ia.checkpoints.local("runs/toy/checkpoint-*")`, `ia.checkpoints.pythia(...)`)
            or a glob of local checkpoint folders.
        config: The sweep's options, a `SweepConfig` (docs/options.md lists them); None: from `options`.
        texts: Texts whose activations fit the tangents (and whose tokens give the frequencies).
        probe_texts: Held-out texts for the gradient probe. By default `texts` is split in two: even-indexed
            texts fit, odd-indexed texts probe.
        **options: Fields of `SweepConfig` (`split_point=1, results_dir="runs/toy/sweep", nb_concepts=8, ...`):
            the config's options, or those of `config` changed.

    Attributes:
        announce: Where the sweep's time estimates go (a callable taking a line of text): how many checkpoints it
            has to compute before the first, then "about N s per checkpoint, M min for the K checkpoints left"
            once the first is done (`sweeps.eta`). None (the default): above the progress bar, when it shows.

    Raises:
        EmptyInputError: No checkpoints, or no texts.
        InvalidInputError: A bad option.

    Examples:
        >>> sweep = ia.CheckpointSweep(ia.checkpoints.local("runs/toy/checkpoint-*"), split_point=1,
        ...                            texts=texts, results_dir="runs/toy/sweep")  # doctest: +SKIP
        >>> table = sweep.run()  # doctest: +SKIP
    """

    def __init__(
        self,
        checkpoints: Sequence[Checkpoint] | str | os.PathLike,
        config: SweepConfig | None = None,
        *,
        texts: Sequence[str],
        probe_texts: Sequence[str] | None = None,
        **options: Any,
    ):
        config = SweepConfig.make(config, **options)
        self.settings = SweepSettings(config, checkpoints, texts=texts, probe_texts=probe_texts)
        self.store = SweepStore(self.settings.results_dir)
        self._fingerprints = TakenFingerprints()
        self._all_checkpoints: list[Checkpoint] = self.settings.checkpoints  # with those of earlier runs, once read
        self.announce: Callable[[str], None] | None = None
        self._pipeline: CheckpointPipeline | None = None  # while a run loads checkpoints
        self._n_random = self._resolved_n_random(len(self.settings.checkpoints), warn=False)

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The sweep's checkpoints, sorted by step."""
        return self.settings.checkpoints

    @property
    def fit_texts(self) -> list[str]:
        """The texts the tangents are fitted on."""
        return self.settings.fit_texts

    @property
    def probe_texts(self) -> list[str]:
        """The held-out texts the gradients are probed on."""
        return self.settings.probe_texts

    @property
    def results_dir(self) -> Path:
        """Where the sweep's files go."""
        return self.settings.results_dir

    def config(self) -> dict[str, Any]:
        """The settings that determine the results (what a resume must match), JSON-ready."""
        return self.settings.config()

    # ------------------------------------------------------------------ results directory
    @contextmanager
    def _results_dir(self) -> Iterator[None]:
        """Lock the results directory and check its config and fingerprints on rank 0; every rank raises the same
        error."""
        with contextlib.ExitStack() as stack:
            message = None
            if distributed.is_main_process():
                try:
                    stack.enter_context(self.store.lock())
                    stored = self.store.prepare(self.settings.config(), overwrite=self.settings.overwrite)
                    self._all_checkpoints = [Checkpoint.from_dict(entry) for entry in stored["checkpoints"]]
                    self._forget_changed_checkpoints()
                    self._n_random = self._resolved_n_random(len(self._all_checkpoints), warn=True)
                    self._forget_underdrawn_rows()
                except AnisotropyError as error:
                    message = (type(error).__name__, str(error))
            message = distributed.broadcast_object(message)
            self._all_checkpoints = distributed.broadcast_object(self._all_checkpoints)
            self._n_random = distributed.broadcast_object(self._n_random)
            distributed.barrier()
            if message is not None:
                raise _ERRORS_BY_NAME.get(message[0], InvalidInputError)(message[1])
            yield

    def _resolved_n_random(self, family_size: int, *, warn: bool) -> int:
        """R' of this run's rows: the given `n_random` (warned about when Holm cannot pass over `family_size` rows)
        or the default for that family (`draws.default_n_random`)."""
        if self.settings.n_random is None:
            return draws.default_n_random(family_size, n_controls=self.settings.n_controls)
        if warn:
            draws.warn_if_cannot_pass(self.settings.n_random, family_size)
        return self.settings.n_random

    def _forget_underdrawn_rows(self) -> None:
        """Drop the rows drawn with fewer random subspaces than the default R' of the (grown) family, to recompute.

        An extension adds checkpoints, so the default R' grows; the rows written before drew fewer. Each row's seed
        depends on its identity alone, so recomputing them gives what an uninterrupted run over every checkpoint
        gives. An explicit `n_random` is in the config, which an extension must match: its rows are never dropped.
        """
        if self.settings.n_random is not None:
            return
        steps = {
            row["step"]
            for row in self.store.rows()
            if not is_skipped(row) and row.get("n_random", self._n_random) < self._n_random
        }
        if steps:
            self._announce(
                f"recomputing {len(steps)} checkpoint(s) drawn with fewer than the {self._n_random} random subspaces "
                f"that Holm needs over {len(self._all_checkpoints)} checkpoints"
            )
            self.store.drop_steps(steps)

    def _forget_changed_checkpoints(self) -> None:
        """Refuse, or drop with `recompute_changed`, rows and references computed on content that has changed."""
        rows = [row for row in self.store.rows() if not is_skipped(row)]  # skipped rows are retried anyway
        written = {row["step"] for row in rows}
        current = self._fingerprints.by_step(c for c in self.settings.checkpoints if c.step in written)
        steps = changed_steps(rows, current)
        early = sorted(
            {
                step
                for layer in self.settings.layers
                if self.store.reference_path(layer).exists()
                for step in changed_early_steps(
                    self._saved_reference(self.store.reference_path(layer)).info,
                    self._fingerprints.by_step(self.settings.early),
                )
            }
        )
        if not steps and not early:
            return
        if not self.settings.recompute_changed:
            raise StaleResultsError(
                f"{self.results_dir} holds results of checkpoints whose content has changed since (steps "
                f"{sorted(set(steps) | set(early))}"
                + (", early checkpoints of the reference tangent" if early else "")
                + "). Rerun with recompute_changed=True (--recompute-changed) to recompute them, use another "
                "results_dir, or overwrite=True."
            )
        if early:
            self.store.drop_references()
            steps = sorted(written)
        self.store.drop_steps(set(steps))
        self.store.update_rows(  # the drift of the checkpoints after them is measured again at the end of the run
            lambda row: (
                {key: value for key, value in row.items() if key != "drift_previous_step"}
                if self._previous_step(row["step"]) in steps
                else row
            )
        )

    # ------------------------------------------------------------------ run
    def run(self) -> SweepResult:
        """Run (or resume) the sweep and return its table.

        Returns:
            The `SweepResult` of every finished checkpoint (also in `results_dir`).

        Raises:
            ConfigMismatchError: `results_dir` holds a sweep with other settings (and not `overwrite`).
            DimensionMismatchError: A checkpoint whose hidden size differs from the reference subspace's.
            SplitPointError: A split point absent from a checkpoint.
            CheckpointError: A checkpoint that cannot be loaded; before the first checkpoint, every Hub revision
                that does not exist (offline: is not cached), named at once.
        """
        with self._results_dir():
            self._run_missing()
        return SweepResult.load(self.settings.results_dir)

    def _run_missing(self) -> None:
        """Process every checkpoint with a (split point, tangent kind) row missing, and append its missing rows."""
        done = self.store.done()
        todo = [
            checkpoint
            for checkpoint in self.settings.checkpoints
            if any(
                (checkpoint.step, str(layer), kind) not in done
                for layer in self.settings.layers
                for kind in self.settings.tangent_kinds
            )
        ]
        if todo:
            # every missing Hub revision named before the first checkpoint
            checkpoint_tools.check_revisions(todo, hub_timeout=self.settings.hub_timeout)
            by_checkpoint = self.settings.parallel == "checkpoints" and distributed.is_distributed()
            group = distributed.world_size() if by_checkpoint else 1
            if distributed.is_main_process():  # the only rank that speaks reads the rows
                self._announce(self._opening_estimate(len(todo), group))
            rounds = [todo[start : start + group] for start in range(0, len(todo), group)]
            rank = distributed.rank() if by_checkpoint else 0
            mine = [batch[rank] if rank < len(batch) else None for batch in rounds]  # None: no turn this round
            # In one process, an early checkpoint's rows take their fit read from the reference pass's.
            self._kept_steps = set() if distributed.is_distributed() else {checkpoint.step for checkpoint in todo}
            self._kept_reads: dict[tuple[int, int | str], FitRead | AnisotropyError] = {}
            self._token_cache = TokenCache()  # the texts' token ids, while the checkpoints share their tokenizer
            try:
                with self._fetching([*self._early_to_fit(), *(c for c in mine if c is not None)]):
                    self._run_rounds(rounds, mine, by_checkpoint=by_checkpoint, per_round=group)
            finally:
                self._kept_reads.clear()
        if distributed.is_main_process():
            self._refresh_drift_to_previous()

    def _run_rounds(
        self, rounds: list[list[Checkpoint]], mine: list[Checkpoint | None], *, by_checkpoint: bool, per_round: int
    ) -> None:
        """Fit the missing references, then compute each round's checkpoints (this rank's: `mine`) and append their
        rows; a checkpoint's revision may be evicted once its rows are written."""
        references = self._references()
        unit = "round" if by_checkpoint and distributed.world_size() > 1 else "ckpt"
        bar = tqdm(rounds, desc="Checkpoints", unit=unit, disable=not self._shows())
        writer = by_checkpoint or distributed.is_main_process()
        timer = CheckpointTimer(sum(map(len, rounds)), per_round=per_round)
        for batch_of_checkpoints, checkpoint in zip(bar, mine, strict=True):
            bar.set_postfix_str(batch_of_checkpoints[0].name)
            timer.start_round()
            rows = self._process_or_skip(checkpoint, references, writer=writer) if checkpoint is not None else []
            if by_checkpoint:
                rows = [row for part in distributed.all_gather_objects(rows) for row in part]
            if distributed.is_main_process():
                self.store.append(self._with_drift_to_previous(rows))
            distributed.barrier()
            if checkpoint is not None:
                self._pipeline.done(checkpoint)
            self._announce(timer.end_round(len(batch_of_checkpoints)))

    def _shows(self) -> bool:
        return self.settings.progress and distributed.is_main_process()

    def _announce(self, line: str | None) -> None:
        """Say `line` (a time estimate) through `announce`, else above the progress bar when it shows."""
        if line is None or not distributed.is_main_process():
            return
        if self.announce is not None:
            self.announce(line)
        elif self._shows():
            tqdm.write(line, file=sys.stderr)

    def _opening_estimate(self, todo: int, per_round: int) -> str:
        """What the sweep says before its first checkpoint: how many, and the time per checkpoint if known."""
        early = ""
        if self.settings.reference in (ReferenceKind.EARLY, ReferenceKind.BOTH) and not self.settings.given_reference:
            missing = [layer for layer in self.settings.layers if not self.store.reference_path(layer).exists()]
            if missing:
                early = f", after the reference tangent is fitted on {len(self.settings.early)} early checkpoints"
        seconds = seconds_per_checkpoint_of_rows(self.store.rows())
        if seconds is None:
            return (
                f"{todo} checkpoint{'s' if todo != 1 else ''} to compute{early}; the time per checkpoint is "
                "measured on the first one"
            )
        return (
            estimate_line(seconds, todo, per_round=per_round, source="the wall_seconds of the rows already computed")
            + early
        )

    def _with_drift_to_previous(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows with their tangent's drift from the previous checkpoint's, read once every rank of the round
        has saved its tangents (rank 0)."""
        for row in sorted(rows, key=lambda row: row["step"]):
            if not is_skipped(row):
                row.update(self._drift_to_previous(row, warn=True))
        return rows

    def _drift_to_previous(self, row: dict[str, Any], *, warn: bool) -> dict[str, Any]:
        previous_step = self._previous_step(row["step"])
        previous = self.store.tangent(row["layer"], previous_step) if previous_step is not None else None
        if previous_step is not None and previous is None and warn:
            warnings.warn(
                f"The drift from the previous checkpoint of step {row['step']} (split point {row['layer']!r}) is None: "
                f"{self.store.tangent_path(row['layer'], previous_step)} is missing (the previous checkpoint was "
                "skipped, or its tangent deleted). It is filled in once that checkpoint's rows are computed.",
                stacklevel=4,
            )
        own = self.store.tangent(row["layer"], row["step"])
        return {
            **_drift("previous", own, previous),
            "drift_previous_step": previous_step if own is not None and previous is not None else None,
        }

    def _previous_step(self, step: int) -> int | None:
        """The step before `step` among every checkpoint the results directory has been asked for."""
        earlier = [other.step for other in self._all_checkpoints if other.step < step]
        return earlier[-1] if earlier else None

    def _refresh_drift_to_previous(self) -> None:
        """Recompute the drift from the previous checkpoint of rows measured from another checkpoint (new checkpoints
        between old ones) or from none (a previous checkpoint skipped, then computed); rewrite rows.jsonl if any."""

        def refreshed(row: dict[str, Any]) -> dict[str, Any]:
            expected = self._previous_step(row["step"])
            if is_skipped(row) or row.get("drift_previous_step", -1) == expected:
                return row
            if expected is not None and not self.store.tangent_path(row["layer"], expected).exists():
                return row
            return {**row, **self._drift_to_previous(row, warn=False)}

        self.store.update_rows(refreshed)

    def _process_or_skip(
        self, checkpoint: Checkpoint, references: dict[int | str, Subspace], *, writer: bool
    ) -> list[dict[str, Any]]:
        """`_process`, or with `skip_bad_checkpoints` rows that say why a bad checkpoint was skipped."""
        try:
            return self._process(checkpoint, references, writer=writer)
        except _BAD_CHECKPOINT as error:
            if not self.settings.skip_bad_checkpoints:
                raise
            warnings.warn(f"Skipped checkpoint {checkpoint.name}: {error}", stacklevel=3)
            return [
                {
                    **_identity(checkpoint, layer, str(layer), kind),
                    "skipped": f"{type(error).__name__}: {error}",
                    "fingerprint": self._fingerprints.of(checkpoint),
                }
                for layer in self.settings.layers
                for kind in self.settings.tangent_kinds
            ]

    @contextmanager
    def _fetching(self, uses: list[Checkpoint]) -> Iterator[None]:
        """Fetch the Hub checkpoints of `uses` (the checkpoints in the order this run loads them) ahead of their
        turn, within the disk budget, while the block runs."""
        settings = self.settings
        if settings.max_cache_gb is not None and distributed.is_distributed():
            raise InvalidInputError(
                "max_cache_gb is not supported under torchrun: the ranks share the Hugging Face cache, and one could "
                "evict a revision another still reads. Leave max_cache_gb out, or sweep in a single process."
            )
        repos = sorted({c.source for c in uses if not c.is_local})
        before = None
        if repos and distributed.is_main_process() and not hub_access.is_offline():
            before = hub_cache.cached_before(self.store.hub_cache_record, hub_access.cache_location(None), repos)
        budget = None if settings.max_cache_gb is None else round(settings.max_cache_gb * 1e9)
        self._pipeline = CheckpointPipeline(
            uses,
            prefetch=settings.prefetch,
            max_concurrent_downloads=settings.max_concurrent_downloads,
            max_cache_bytes=budget,
            before=before,
            progress=self._shows(),
            hub_timeout=settings.hub_timeout,
        )
        try:
            with self._pipeline:
                yield
        finally:
            self._pipeline = None

    @contextmanager
    def _load(self, checkpoint: Checkpoint) -> Iterator[tuple[Any, Any, Fetched]]:
        """The checkpoint's (model, tokenizer, files), its files from the pipeline (which raises its download's
        error)."""
        fetched = self._pipeline.take(checkpoint)
        with checkpoint_tools.loaded(
            checkpoint,
            automodel=self.settings.automodel,
            device=self.settings.device,
            snapshot=fetched.folder,
            tokenizer_source=self.settings.tokenizer_source,
        ) as (model, tokenizer):
            yield model, tokenizer, fetched

    def _splitter(self, model: Any, tokenizer: Any, layer: int | str, checkpoint: Checkpoint) -> ModelWithSplitPoints:
        try:
            tokenizer.padding_side = "right"  # the sweep's own tokenizer; the package's reads never depend on it
            return ModelWithSplitPoints(
                model, split_point=layer, tokenizer=tokenizer, batch_size=self.settings.batch_size
            )
        except AnisotropyError:
            raise
        except (ValueError, AttributeError, KeyError) as error:
            raise SplitPointError(
                f"Split point {layer!r} is not in checkpoint {checkpoint.name} ({type(model).__name__}): {error}"
            ) from error

    def _activation_batches(self, splitter: ModelWithSplitPoints, *, sharded: bool = False):
        """(rows, token ids, locations) of the fit texts, batch by batch (`iter_located_token_activations`)."""
        shard = (distributed.rank(), distributed.world_size()) if sharded else (0, 1)
        cap = self.settings.max_fit_tokens
        if cap is not None and shard[1] > 1:
            cap = -(-cap // shard[1])  # a per-rank cap
        return iter_located_token_activations(
            splitter,
            self.settings.fit_texts,
            batch_size=self.settings.batch_size,
            max_tokens=cap,
            shard=shard,
            autocast_dtype=self.settings.autocast_dtype,
            include_special=self.settings.include_special,
            call=self.settings.call,
            token_cache=self._token_cache,
        )

    # ------------------------------------------------------------------ tangents
    def _new_tangent(self, splitter: ModelWithSplitPoints) -> TangentExplainer:
        return TangentExplainer(
            splitter,
            nb_concepts=self.settings.nb_concepts,
            method=self.settings.method,
            device=self.settings.device,
            **{"seed": self.settings.seed, **self.settings.method_kwargs},
        )

    def _saved_reference(self, path: Path) -> Subspace:
        """A reference tangent saved by an earlier run, checked against the settings' rank."""
        reference = Subspace.load(path, device=self.settings.device)
        if reference.rank > self.settings.nb_concepts or (
            self.settings.streams and reference.rank != self.settings.nb_concepts
        ):
            raise ResultsStoreError(
                f"{path} holds a rank-{reference.rank} reference but the sweep asks for nb_concepts="
                f"{self.settings.nb_concepts}: it was fitted with other settings. Delete it to refit, or rerun with "
                "overwrite=True."
            )
        return reference

    def _references(self) -> dict[int | str, Subspace]:
        """The reference tangent of each split point: given, loaded from results_dir, or fitted on early checkpoints
        (only for the split points without a saved one)."""
        if self.settings.given_reference:
            return self.settings.given_reference
        if self.settings.reference is ReferenceKind.EACH:
            return {}
        paths = {layer: self.store.reference_path(layer) for layer in self.settings.layers}
        saved = {layer: path for layer, path in paths.items() if path.exists()}
        missing = self._layers_to_fit()
        if missing and self._fits_here():
            fitted = self._fit_references(missing)
            if distributed.is_main_process():
                for layer, subspace in fitted.items():
                    subspace.save(paths[layer])
        if missing and not self.settings.streams:
            distributed.barrier()  # rank 0 fits and saves; the others read its files
            saved = paths
        references = {layer: self._saved_reference(path) for layer, path in saved.items()}
        if missing and self.settings.streams:
            references.update(fitted)
        return {layer: references[layer] for layer in self.settings.layers}

    def _layers_to_fit(self) -> list[int | str]:
        """The split points whose reference tangent is fitted on the early checkpoints and not saved yet."""
        if self.settings.given_reference or self.settings.reference is ReferenceKind.EACH:
            return []
        return [layer for layer in self.settings.layers if not self.store.reference_path(layer).exists()]

    def _fits_here(self) -> bool:
        """Whether this rank reads the early checkpoints when references are fitted (all ranks when the method
        streams; rank 0 otherwise)."""
        return self.settings.streams or distributed.is_main_process()

    def _early_to_fit(self) -> list[Checkpoint]:
        """The early checkpoints this rank loads to fit the missing references, in order (none if none is missing)."""
        return self.settings.early if self._layers_to_fit() and self._fits_here() else []

    def _fit_references(self, layers: list[int | str]) -> dict[int | str, Subspace]:
        """Fit the reference tangent of some split points on the activations pooled over the early checkpoints."""
        streamed = self.settings.streams
        early = self.settings.early
        pools = {layer: EarlyPool(streamed=streamed, centering=self.settings.early_centering) for layer in layers}
        references: dict[int | str, Subspace] = {}
        bar = tqdm(early, desc="Reference tangent (early checkpoints)", unit="ckpt", disable=not self._shows())
        for index, checkpoint in enumerate(bar):
            with self._load(checkpoint) as (model, tokenizer, _):
                self._fingerprints.of(checkpoint)  # taken while its files are cached (a budget evicts them after)
                for layer in layers:
                    splitter = self._splitter(model, tokenizer, layer, checkpoint)
                    pool = pools[layer]
                    pool.start_checkpoint(lambda splitter=splitter: self._new_tangent(splitter))
                    if pool.dim != model.config.hidden_size and index > 0:
                        raise DimensionMismatchError(
                            f"Checkpoint {checkpoint.name} has hidden size {model.config.hidden_size} but the "
                            f"earlier checkpoints have {pool.dim}."
                        )
                    own = self._fit_reader(splitter) if checkpoint.step in self._kept_steps else None
                    for rows, ids, locations in self._activation_batches(splitter, sharded=streamed):
                        pool.add(rows)
                        if own is not None:
                            own.add_or_defer(rows, ids, locations)
                    pool.end_checkpoint()
                    if own is not None:  # its rows, in the main loop, take this read
                        self._kept_reads[(checkpoint.step, layer)] = own.kept()
                    if index == len(early) - 1:
                        info = {
                            "early_steps": [c.step for c in early],
                            "early_fingerprints": {str(c.step): self._fingerprints.of(c) for c in early},
                        }
                        subspace = pool.fit()
                        references[layer] = subspace.replace(name="early", info={**subspace.info, **info})
            self._pipeline.done(checkpoint)
        return references

    # ------------------------------------------------------------------ one checkpoint
    def _process(
        self, checkpoint: Checkpoint, references: dict[int | str, Subspace], *, writer: bool
    ) -> list[dict[str, Any]]:
        """The rows of one checkpoint (all split points); `writer` saves its tangents (one rank per checkpoint)."""
        rows: list[dict[str, Any]] = []
        with self._load(checkpoint) as (model, tokenizer, fetched):
            fingerprint = self._fingerprints.of(checkpoint)
            downloaded = {} if fetched.seconds is None else {"download_seconds": fetched.seconds}
            for layer in self.settings.layers:
                start = time.perf_counter()
                splitter = self._splitter(model, tokenizer, layer, checkpoint)
                try:
                    layer_rows = self._process_layer(checkpoint, splitter, layer, references.get(layer), writer=writer)
                except NonFiniteError as error:
                    raise NonFiniteError(
                        f"Checkpoint {checkpoint.name} ({checkpoint.source}), split point {layer!r}: {error}"
                    ) from error
                for row in layer_rows:
                    row["wall_seconds"] = time.perf_counter() - start
                    row.update(downloaded)
                    row["fingerprint"] = fingerprint
                rows.extend(layer_rows)
        return rows

    def _process_layer(
        self,
        checkpoint: Checkpoint,
        splitter: ModelWithSplitPoints,
        layer: int | str,
        reference: Subspace | None,
        *,
        writer: bool,
    ) -> list[dict[str, Any]]:
        read = self._fit_read(checkpoint, splitter, layer)
        sample, sample_ids, sample_locations = read.on_device()
        d = sample.shape[1]
        if reference is not None and reference.dim != d:
            raise DimensionMismatchError(
                f"Checkpoint {checkpoint.name} has d={d} at split point {splitter.split_point!r} but the reference "
                f"subspace lives in R^{reference.dim}: all checkpoints of a sweep must share the hidden size."
            )
        own = read.subspace().replace(name="each", step=checkpoint.step)
        if writer:
            own.save(self.store.tangent_path(layer, checkpoint.step))

        subspaces: dict[str, Subspace] = {}
        if reference is not None:
            subspaces["given" if self.settings.given_reference else "early"] = reference
        if self.settings.reference in (ReferenceKind.EACH, ReferenceKind.BOTH):
            subspaces["each"] = own
        if writer:
            self.store.save_top_tokens(
                layer,
                checkpoint.step,
                split_point=splitter.split_point,
                n_rows=sample.shape[0],
                directions={
                    kind: top_tokens(sample, sample_ids, sample_locations, subspace, splitter.tokenizer)
                    for kind, subspace in {**subspaces, "each": own}.items()
                },
            )
        probe = GradientProbe(
            splitter,
            objective=self.settings.objective,
            seed=self.settings.seed,
            batch_size=self.settings.batch_size,
            distributed=self.settings.parallel == "data" and distributed.is_distributed(),
            autocast_dtype=self.settings.autocast_dtype,
            include_special=self.settings.include_special,
            call=self.settings.call,
            token_cache=self._token_cache,
        )
        seeds = {kind: _row_seed(self.settings.seed, checkpoint, splitter.split_point, kind) for kind in subspaces}
        results = probe.run(
            self.settings.probe_texts,
            subspaces,
            n_controls=self.settings.n_controls,
            n_random=self._n_random,
            seed=self.settings.seed,
            draw_seeds=seeds,
            isoscore_convention=self.settings.isoscore.convention,
            isoscore_zeta=self.settings.isoscore.zeta,
            isoscore_c0=self.settings.isoscore.target_name,
            token_counts=self._counts(splitter.tokenizer),
            max_tokens=self.settings.max_tokens,
            progress=False,
        )
        shared = {
            **self._activation_metrics(splitter, sample, sample_ids, reference or own),
            **_drift("reference", own, reference),
        }
        rows = []
        for kind, result in results.items():
            row = {**_identity(checkpoint, layer, splitter.split_point, kind), **result.to_dict(), **shared}
            row.update(draw_seed=seeds[kind], n_random=self._n_random)
            rows.append(row)
        return rows

    def _fit_reader(self, splitter: ModelWithSplitPoints) -> FitReader:
        """A reader feeding a new own tangent at `splitter` and keeping the first `max_metric_tokens` rows."""
        return FitReader(
            self._new_tangent(splitter), streamed=self.settings.streams, max_sample=self.settings.max_metric_tokens
        )

    def _fit_read(self, checkpoint: Checkpoint, splitter: ModelWithSplitPoints, layer: int | str) -> FitRead:
        """The checkpoint's fit read at `layer`: kept from the reference pass, else read now.

        Raises:
            AnisotropyError: What the read raises (kept from the reference pass, raised at the checkpoint's turn).
        """
        kept = self._kept_reads.pop((checkpoint.step, layer), None)
        if isinstance(kept, AnisotropyError):
            raise kept
        if kept is not None:
            return kept
        reader = self._fit_reader(splitter)
        for rows, ids, locations in self._activation_batches(splitter):
            reader.add(rows, ids, locations)
        return reader.finish()

    def _counts(self, tokenizer: Any) -> torch.Tensor:
        """How often each token id occurs in the fit and probe texts, by this checkpoint's tokenizer (V,)."""
        texts = self.settings.fit_texts + self.settings.probe_texts
        return self._token_cache.counts(tokenizer, texts, lambda: metrics.count_token_frequencies(texts, tokenizer))

    def _activation_metrics(
        self, splitter: ModelWithSplitPoints, sample: torch.Tensor, ids: torch.Tensor, tangent: Subspace
    ) -> dict[str, Any]:
        """Activation metrics of the first `max_metric_tokens` fit rows (n, d) and their token ids (n,)."""
        row: dict[str, Any] = {f"activation_{key}": value for key, value in metrics.summary(sample).items()}
        row.update(frequency_distance_row(sample, ids, self._counts(splitter.tokenizer)))
        # Identical contexts (e.g. the same first token of two texts) give identical rows; the estimator needs
        # distinct points.
        coordinates = torch.unique(tangent.coords(sample).double(), dim=0)
        row["on_manifold_entropy"] = _finite_or_none(metrics.knn_entropy(coordinates))
        return row


def frequency_distance_row(activations: torch.Tensor, token_ids: torch.Tensor, counts: torch.Tensor) -> dict[str, Any]:
    """Frequency-distance correlation fields of a sweep row (None where it is undefined)."""
    try:
        correlation = metrics.frequency_distance_correlation(activations, token_ids.cpu(), counts)
    except AnisotropyError:
        return {key: None for key in ("freq_distance_pearson", "freq_distance_spearman", "freq_distance_p_value")}
    return {
        "freq_distance_pearson": _finite_or_none(correlation.pearson),
        "freq_distance_spearman": _finite_or_none(correlation.spearman),
        "freq_distance_p_value": _finite_or_none(correlation.pearson_p_value),
        "freq_distance_n": correlation.n,
    }


def _identity(checkpoint: Checkpoint, layer: int | str, split_point: str, kind: str) -> dict[str, Any]:
    """The fields that name a row: its checkpoint, split point and tangent kind."""
    return {
        "step": checkpoint.step,
        "checkpoint": checkpoint.name,
        "source": checkpoint.source,
        "revision": checkpoint.revision,
        "layer": layer if isinstance(layer, int) else str(layer),
        "split_point": split_point,
        "tangent": kind,
    }


def _row_seed(seed: int, checkpoint: Checkpoint, split_point: str, kind: str) -> int:
    """The seed of a row's draws (`draws.row_seed`), from its checkpoint's step, never its place or its source."""
    return draws.row_seed(seed, step=checkpoint.step, split_point=split_point, kind=kind)


def _drift(label: str, own: Subspace, other: Subspace | None) -> dict[str, Any]:
    if other is None or other.dim != own.dim:
        return {f"drift_{label}_mean_angle": None, f"drift_{label}_max_angle": None}
    angles = own.principal_angles(other)
    return {f"drift_{label}_mean_angle": float(np.mean(angles)), f"drift_{label}_max_angle": float(np.max(angles))}


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None
