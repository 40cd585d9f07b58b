# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checkpoint sweeps: the paper's protocol end to end, resumable."""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from interpreto import ModelWithSplitPoints

from .. import metrics
from ..commons import distributed, hub
from ..commons.progress import progress_bar
from ..errors import (
    AnisotropyError,
    CheckpointError,
    DimensionMismatchError,
    InvalidInputError,
    NonFiniteError,
    SkippedCheckpointWarning,
    SplitPointError,
)
from ..probing.probe import GradientProbe
from ..reading.activations import iter_located_token_activations
from ..reading.token_cache import TokenCache
from ..tangents.explainers import TangentExplainer
from ..tangents.subspace import Subspace
from ..tangents.top_tokens import top_tokens
from . import checkpoints as checkpoint_tools
from . import draws
from .change import refresh_changes
from .checkpoints import Checkpoint
from .config import SweepConfig
from .drift import PreviousDrift, drift
from .eta import CheckpointTimer, opening_line
from .fit_read import FitRead, FitReader
from .freshness import TakenFingerprints
from .prefetch import CheckpointPipeline, Fetched
from .references import ReferenceTangents
from .result import SweepResult
from .resume import ResultsDirCheck, resolved_n_random
from .said_once import SaidOnce
from .settings import ReferenceKind, SweepSettings, early_checkpoints
from .store import SweepStore

# A checkpoint that fails with one of these is skipped (and its rows say why) under skip_bad_checkpoints.
_BAD_CHECKPOINT = (CheckpointError, NonFiniteError)

__all__ = ["CheckpointSweep", "ReferenceKind", "early_checkpoints"]

logger = logging.getLogger(__name__)


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
        announce: A callable taking the sweep's time estimates, lines of text (`sweeps.eta`); None (default): the
            logger "interpreto_anisotropy.sweeps.runner", at level INFO.

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
        self._drift = PreviousDrift(self.store, self.settings.checkpoints)  # with earlier runs' checkpoints, once read
        self._references = ReferenceTangents(self)
        self.announce: Callable[[str], None] | None = None
        self._pipeline: CheckpointPipeline | None = None  # while a run loads checkpoints
        self._n_random = resolved_n_random(
            self.settings,
            checkpoints=len(self.settings.checkpoints),
            split_points=len(self.settings.layers),
            kinds=len(self.settings.tangent_kinds),
            warn=False,
        )

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
        check = ResultsDirCheck(self.settings, self.store, self._fingerprints, self._drift, self._announce)
        with check.held() as self._n_random:
            self._run_missing()
        return SweepResult.load(self.settings.results_dir)

    def _run_missing(self) -> None:
        """Process every checkpoint with a (split point, tangent kind) row missing, and append its missing rows."""
        todo = _unfinished(self.settings, self.store.done())
        if todo:
            # every missing Hub revision named before the first checkpoint
            checkpoint_tools.check_revisions(todo, hub_timeout=self.settings.hub_timeout)
            by_checkpoint = self.settings.parallel == "checkpoints" and distributed.is_distributed()
            group = distributed.world_size() if by_checkpoint else 1
            if distributed.is_main_process():  # the only rank that speaks reads the rows
                early = len(self.settings.early) if self._references.missing() else 0
                self._announce(opening_line(len(todo), self.store.rows(), per_round=group, early=early))
            rounds = [todo[start : start + group] for start in range(0, len(todo), group)]
            rank = distributed.rank() if by_checkpoint else 0
            mine = [batch[rank] if rank < len(batch) else None for batch in rounds]  # None: no turn this round
            # In one process, an early checkpoint's rows take their fit read from the reference pass's.
            self._kept_steps = set() if distributed.is_distributed() else {checkpoint.step for checkpoint in todo}
            self._kept_reads: dict[tuple[int, int | str], FitRead | AnisotropyError] = {}
            self._token_cache = TokenCache()  # the texts' token ids, while the checkpoints share their tokenizer
            try:
                with self._fetching([*self._references.early_to_load(), *(c for c in mine if c is not None)]):
                    self._run_rounds(rounds, mine, by_checkpoint=by_checkpoint, per_round=group)
            finally:
                self._kept_reads.clear()
        if distributed.is_main_process():
            self._drift.refresh()
            refresh_changes(self.store, seed=self.settings.seed)

    def _run_rounds(
        self, rounds: list[list[Checkpoint]], mine: list[Checkpoint | None], *, by_checkpoint: bool, per_round: int
    ) -> None:
        """Fit the missing references, then compute each round's checkpoints (this rank's: `mine`) and append their
        rows; a checkpoint's revision may be evicted once its rows are written."""
        said = SaidOnce()
        try:
            with said.about("the early reference"):
                references = self._references.by_layer()
            self._rounds(rounds, mine, references, said, by_checkpoint=by_checkpoint, per_round=per_round)
        finally:
            said.say()

    def _rounds(
        self,
        rounds: list[list[Checkpoint]],
        mine: list[Checkpoint | None],
        references: dict[int | str, Subspace],
        said: SaidOnce,
        *,
        by_checkpoint: bool,
        per_round: int,
    ) -> None:
        """Compute each round's checkpoints, their warnings recorded in `said`, and append their rows."""
        unit = "round" if by_checkpoint and distributed.world_size() > 1 else "ckpt"
        bar = progress_bar(rounds, progress=self._shows(), desc="Checkpoints", unit=unit)
        writer = by_checkpoint or distributed.is_main_process()
        timer = CheckpointTimer(sum(map(len, rounds)), per_round=per_round)
        for batch_of_checkpoints, checkpoint in zip(bar, mine, strict=True):
            bar.set_postfix_str(batch_of_checkpoints[0].name)
            timer.start_round()
            rows = []
            if checkpoint is not None:
                with said.about(checkpoint.name):
                    rows = self._process_or_skip(checkpoint, references, writer=writer)
            if by_checkpoint:
                rows = [row for part in distributed.all_gather_objects(rows) for row in part]
            if distributed.is_main_process():
                self.store.append(self._drift.added_to(rows))
            distributed.barrier()
            if checkpoint is not None:
                self._pipeline.done(checkpoint)
            self._announce(timer.end_round(len(batch_of_checkpoints)))

    def _shows(self) -> bool:
        return self.settings.progress and distributed.is_main_process()

    def _announce(self, line: str | None) -> None:
        """Say `line` (a time estimate) through `announce`, else to the module's logger (INFO)."""
        if line is None or not distributed.is_main_process():
            return
        if self.announce is not None:
            self.announce(line)
        else:
            logger.info(line)

    def _process_or_skip(
        self, checkpoint: Checkpoint, references: dict[int | str, Subspace], *, writer: bool
    ) -> list[dict[str, Any]]:
        """`_process`, or with `skip_bad_checkpoints` rows that say why a bad checkpoint was skipped."""
        try:
            return self._process(checkpoint, references, writer=writer)
        except _BAD_CHECKPOINT as error:
            if not self.settings.skip_bad_checkpoints:
                raise
            warnings.warn(f"Skipped checkpoint {checkpoint.name}: {error}", SkippedCheckpointWarning, stacklevel=3)
            skipped = {"skipped": f"{type(error).__name__}: {error}", "fingerprint": self._fingerprints.of(checkpoint)}
            return [
                {**_identity(checkpoint, layer, str(layer), kind), **skipped}
                for layer in self.settings.layers
                for kind in self.settings.tangent_kinds
            ]

    @contextmanager
    def _fetching(self, uses: list[Checkpoint]) -> Iterator[None]:
        """Fetch the Hub checkpoints of `uses` (the checkpoints in the order this run loads them) ahead of their
        turn, within the disk budget, while the block runs."""
        self._pipeline = _pipeline(uses, self.settings, self.store, progress=self._shows())
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
            device_map=self.settings.device_map,
            max_memory=self.settings.max_memory,
            offload_folder=self.settings.offload_folder,
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
        own = read.subspace().replace(name="each", step=checkpoint.step, call=self.settings.call)
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
        seeds = {kind: _row_seed(self.settings.seed, checkpoint, splitter.split_point, kind) for kind in subspaces}
        counts = self._counts(splitter.tokenizer)
        results = _probe(
            self.settings,
            splitter,
            subspaces,
            seeds,
            n_random=self._n_random,
            counts=counts,
            token_cache=self._token_cache,
        )
        shared = {
            **_activation_metrics(sample, sample_ids, reference or own, self._counts(splitter.tokenizer)),
            **drift("reference", own, reference),
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


def _probe(
    settings: SweepSettings,
    splitter: ModelWithSplitPoints,
    subspaces: dict[str, Subspace],
    seeds: dict[str, int],
    *,
    n_random: int,
    counts: torch.Tensor,
    token_cache: TokenCache,
) -> dict[str, Any]:
    """The gradient probe of the settings' probe texts at `splitter` against each subspace (`GradientProbe.run`),
    its draws seeded by `seeds`, with R' = `n_random` and the texts' token `counts` (V,)."""
    probe = GradientProbe(
        splitter,
        objective=settings.objective,
        seed=settings.seed,
        batch_size=settings.batch_size,
        distributed=settings.parallel == "data" and distributed.is_distributed(),
        autocast_dtype=settings.autocast_dtype,
        include_special=settings.include_special,
        call=settings.call,
        token_cache=token_cache,
    )
    return probe.run(
        settings.probe_texts,
        subspaces,
        n_controls=settings.n_controls,
        n_random=n_random,
        seed=settings.seed,
        draw_seeds=seeds,
        isoscore_convention=settings.isoscore.convention,
        isoscore_zeta=settings.isoscore.zeta,
        isoscore_c0=settings.isoscore.target_name,
        token_counts=counts,
        max_tokens=settings.max_tokens,
        progress=False,
    )


def _activation_metrics(
    sample: torch.Tensor, ids: torch.Tensor, tangent: Subspace, counts: torch.Tensor
) -> dict[str, Any]:
    """Activation metrics of the first `max_metric_tokens` fit rows (n, d), their token ids (n,) and the texts'
    token counts (V,): isotropy summary, frequency-distance correlation and on-manifold entropy."""
    row: dict[str, Any] = {f"activation_{key}": value for key, value in metrics.summary(sample).items()}
    row.update(frequency_distance_row(sample, ids, counts))
    # Identical contexts (e.g. the same first token of two texts) give identical rows; the estimator needs
    # distinct points.
    coordinates = torch.unique(tangent.coords(sample).double(), dim=0)
    row["on_manifold_entropy"] = _finite_or_none(metrics.knn_entropy(coordinates))
    return row


def _unfinished(settings: SweepSettings, done: set[tuple[int, str, str]]) -> list[Checkpoint]:
    """The checkpoints with a (split point, tangent kind) row not in `done` ((step, layer, kind) keys), in order."""
    return [
        checkpoint
        for checkpoint in settings.checkpoints
        if any(
            (checkpoint.step, str(layer), kind) not in done
            for layer in settings.layers
            for kind in settings.tangent_kinds
        )
    ]


def _pipeline(
    uses: list[Checkpoint], settings: SweepSettings, store: SweepStore, *, progress: bool
) -> CheckpointPipeline:
    """The pipeline fetching the Hub checkpoints of `uses` ahead of their turn, within the settings' disk budget.

    Args:
        uses: The checkpoints in the order the run loads them.
        settings: The sweep's settings (prefetch, downloads, cache budget, Hub timeout).
        store: Its results directory (which records what the Hub cache held before the sweep).
        progress: Show the downloads' progress.

    Returns:
        The `CheckpointPipeline`, not started.

    Raises:
        InvalidInputError: `max_cache_gb` under torchrun.
    """
    if settings.max_cache_gb is not None and distributed.is_distributed():
        raise InvalidInputError(
            "max_cache_gb is not supported under torchrun: the ranks share the Hugging Face cache, and one could "
            "evict a revision another still reads. Leave max_cache_gb out, or sweep in a single process."
        )
    repos = sorted({c.source for c in uses if not c.is_local})
    before = None
    if repos and distributed.is_main_process() and not hub.is_offline():
        before = hub.cached_before(store.hub_cache_record, hub.cache_location(None), repos)
    budget = None if settings.max_cache_gb is None else round(settings.max_cache_gb * 1e9)
    return CheckpointPipeline(
        uses,
        prefetch=settings.prefetch,
        max_concurrent_downloads=settings.max_concurrent_downloads,
        max_cache_bytes=budget,
        before=before,
        progress=progress,
        hub_timeout=settings.hub_timeout,
    )


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


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None
