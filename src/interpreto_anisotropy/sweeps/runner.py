# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checkpoint sweeps: the paper's protocol end to end, resumable; one read of a checkpoint's fit texts
(`FitReader`), the time estimates (`CheckpointTimer`) and the warnings said once (`SaidOnce`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from interpreto import ModelWithSplitPoints
from jaxtyping import Float, Int

from .. import metrics
from ..commons import distributed, hub
from ..commons.progress import progress_bar
from ..errors import AnisotropyError, CheckpointError, CheckpointWarning, InvalidInputError, NonFiniteError
from ..probing.probe import GradientProbe
from ..reading.activations import iter_located_token_activations
from ..reading.batching import TokenCache
from ..results import verdict as draws
from ..results.change import refresh_changes
from ..results.schema import is_skipped
from ..results.store import SweepStore
from ..results.table import SweepResult
from ..tangents.explainers import TangentExplainer
from ..tangents.subspace import Subspace
from ..tangents.top_tokens import top_tokens
from . import checkpoints as checkpoint_tools
from .checkpoints import Checkpoint
from .config import ReferenceKind, SweepConfig, SweepPlan, early_checkpoints  # noqa: F401 (re-exported)
from .prefetch import CheckpointPipeline, Fetched
from .resume import PreviousDrift, ReferenceTangents, ResultsDirCheck, TakenFingerprints, drift, resolved_n_random

logger = logging.getLogger(__name__)


class CheckpointSweep:
    """The paper's protocol over training checkpoints, resumable and atomic per checkpoint.

    Args:
        checkpoints: `Checkpoint`s (e.g. `ia.checkpoints.pythia(...)`) or a glob of local checkpoint folders.
        config: The sweep's options, a `SweepConfig` (docs/options.md lists them); None: from `options`.
        texts: Texts whose activations fit the tangents (and whose tokens give the frequencies).
        probe_texts: Held-out texts for the gradient probe; None: the odd-indexed `texts` (the even ones fit).
        **options: Fields of `SweepConfig` (`split_point=1, results_dir=...`): the options, or `config`'s changed.

    Attributes:
        announce: A callable taking the sweep's time estimates (lines of text); None: this module's logger, at INFO.

    Raises:
        InvalidInputError: No checkpoints, no texts, or a bad option.

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
        self.plan = SweepPlan(config, checkpoints, texts=texts, probe_texts=probe_texts)
        self.store = SweepStore(self.plan.options.results_dir)
        self._fingerprints = TakenFingerprints()
        self._drift = PreviousDrift(self.store, self.plan.checkpoints)  # with earlier runs' checkpoints, once read
        self._references = ReferenceTangents(self)
        self.announce: Callable[[str], None] | None = None
        self._pipeline: CheckpointPipeline | None = None  # while a run loads checkpoints
        shape = (len(self.plan.checkpoints), len(self.plan.layers), len(self.plan.tangent_kinds))
        self._n_random = resolved_n_random(self.plan, *shape, warn=False)

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The sweep's checkpoints, sorted by step."""
        return self.plan.checkpoints

    @property
    def fit_texts(self) -> list[str]:
        """The texts the tangents are fitted on."""
        return self.plan.fit_texts

    @property
    def probe_texts(self) -> list[str]:
        """The held-out texts the gradients are probed on."""
        return self.plan.probe_texts

    @property
    def results_dir(self) -> Path:
        """Where the sweep's files go."""
        return self.plan.options.results_dir

    def config(self) -> dict[str, Any]:
        """The settings that determine the results (what a resume must match), JSON-ready."""
        return self.plan.record()

    # ------------------------------------------------------------------ run
    def run(self) -> SweepResult:
        """Run (or resume) the sweep and return its table.

        Returns:
            The `SweepResult` of every finished checkpoint (also in `results_dir`).

        Raises:
            InvalidInputError: `results_dir` holds a sweep with other settings (and not `overwrite`), a checkpoint's
                hidden size differs from the reference subspace's, or a split point is absent from a checkpoint.
            CheckpointError: A checkpoint that cannot be loaded; before the first checkpoint, every Hub revision
                that does not exist (offline: is not cached), named at once.
        """
        with ResultsDirCheck(self).held() as self._n_random:
            self._run_missing()
        return SweepResult.load(self.plan.options.results_dir)

    def _run_missing(self) -> None:
        """Process every checkpoint with a (split point, tangent kind) row missing, and append its missing rows."""
        done, kinds, layers = self.store.done(), self.plan.tangent_kinds, self.plan.layers
        todo = [
            c for c in self.plan.checkpoints if any((c.step, str(p), k) not in done for p in layers for k in kinds)
        ]
        if todo:
            # every missing Hub revision named before the first checkpoint
            checkpoint_tools.check_revisions(todo, hub_timeout=self.plan.options.hub_timeout)
            by_checkpoint = self.plan.options.parallel == "checkpoints" and distributed.is_distributed()
            group = distributed.world_size() if by_checkpoint else 1
            missing = self._references.missing()
            if distributed.is_main_process():  # the only rank that speaks reads the rows
                early = len(self.plan.early) if missing else 0
                self._announce(opening_line(len(todo), self.store.rows(), per_round=group, early=early))
            rounds = [todo[start : start + group] for start in range(0, len(todo), group)]
            rank = distributed.rank() if by_checkpoint else 0
            mine = [batch[rank] if rank < len(batch) else None for batch in rounds]  # None: no turn this round
            # In one process, an early checkpoint's rows take their fit read from the reference pass's.
            self._kept_steps = set() if distributed.is_distributed() else {checkpoint.step for checkpoint in todo}
            self._kept_reads: dict[tuple[int, int | str], FitRead | AnisotropyError] = {}
            self._token_cache = TokenCache()  # the texts' token ids, while the checkpoints share their tokenizer
            early_reads = self.plan.early if missing and self._references.fits_here() else []  # to fit the missing
            uses = [*early_reads, *(c for c in mine if c is not None)]
            self._pipeline = _pipeline(uses, self.plan, self.store, progress=self._shows())
            said = SaidOnce()
            try:
                with self._pipeline, contextlib.ExitStack() as stack:
                    stack.callback(said.say)
                    with said.about("the early reference"):
                        references = self._references.by_layer()
                    self._rounds(rounds, mine, references, said, by_checkpoint=by_checkpoint, per_round=group)
            finally:
                self._kept_reads.clear()
                self._pipeline = None
        if distributed.is_main_process():
            self._drift.refresh()
            refresh_changes(self.store, seed=self.plan.options.seed)

    def _rounds(self, rounds, mine, references, said: SaidOnce, *, by_checkpoint: bool, per_round: int) -> None:
        """Compute each round's checkpoints (this rank's: `mine`) and append their rows (warnings kept in `said`)."""
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
                for row in sorted(rows, key=lambda row: row["step"]):  # the drift from the previous checkpoint
                    if not is_skipped(row):
                        row.update(self._drift.of(row, warn=True))
                self.store.append(rows)
            distributed.barrier()
            if checkpoint is not None:
                self._pipeline.done(checkpoint)
            self._announce(timer.end_round(len(batch_of_checkpoints)))

    def _shows(self) -> bool:
        return self.plan.options.progress and distributed.is_main_process()

    def _announce(self, line: str | None) -> None:
        """Say `line` (a time estimate) through `announce`, else to the module's logger (INFO)."""
        if line is not None and distributed.is_main_process():
            (self.announce or logger.info)(line)

    def _process_or_skip(self, checkpoint: Checkpoint, references: dict[Any, Subspace], *, writer: bool) -> list[dict]:
        """`_process`, or with `skip_bad_checkpoints` rows that say why a checkpoint that failed was skipped."""
        try:
            return self._process(checkpoint, references, writer=writer)
        except (CheckpointError, NonFiniteError) as error:
            if not self.plan.options.skip_bad_checkpoints:
                raise
            warnings.warn(f"Skipped checkpoint {checkpoint.name}: {error}", CheckpointWarning, stacklevel=3)
            skipped = {"skipped": f"{type(error).__name__}: {error}", "fingerprint": self._fingerprints.of(checkpoint)}
            kinds = self.plan.tangent_kinds
            return [{**_identity(checkpoint, p, str(p), kind), **skipped} for p in self.plan.layers for kind in kinds]

    @contextmanager
    def _load(self, checkpoint: Checkpoint) -> Iterator[tuple[Any, Any, Fetched]]:
        """The checkpoint's (model, tokenizer, files), its files from the pipeline (which raises its download's)."""
        fetched = self._pipeline.take(checkpoint)
        loading = ("automodel", "device_map", "max_memory", "offload_folder", "tokenizer_source")
        given = {name: getattr(self.plan.options, name) for name in loading}
        with checkpoint_tools.loaded(checkpoint, device=self.plan.device, snapshot=fetched.folder, **given) as loaded:
            yield *loaded, fetched

    def _splitter(self, model: Any, tokenizer: Any, layer: int | str, checkpoint: Checkpoint) -> ModelWithSplitPoints:
        tokenizer.padding_side = "right"  # the sweep's own tokenizer; the package's reads never depend on it
        try:
            return ModelWithSplitPoints(model, layer, tokenizer=tokenizer, batch_size=self.plan.options.batch_size)
        except AnisotropyError:
            raise
        except (ValueError, AttributeError, KeyError) as error:
            raise InvalidInputError(
                f"Split point {layer!r} is not in checkpoint {checkpoint.name} ({type(model).__name__}): {error}"
            ) from error

    def _activation_batches(self, splitter: ModelWithSplitPoints, *, sharded: bool = False):
        """(rows, token ids, locations) of the fit texts, batch by batch (`iter_located_token_activations`)."""
        options, shard = self.plan.options, (distributed.rank(), distributed.world_size()) if sharded else (0, 1)
        cap = None if options.max_fit_tokens is None else -(-options.max_fit_tokens // shard[1])  # a per-rank cap
        given = {name: getattr(options, name) for name in ("batch_size", "include_special", "call")}
        given |= {"max_tokens": cap, "shard": shard, "autocast_dtype": self.plan.autocast_dtype}
        return iter_located_token_activations(splitter, self.plan.fit_texts, token_cache=self._token_cache, **given)

    def _new_tangent(self, splitter: ModelWithSplitPoints) -> TangentExplainer:
        options = self.plan.options
        given = {"nb_concepts": options.nb_concepts, "method": options.method, "device": self.plan.device}
        return TangentExplainer(splitter, **given, **{"seed": options.seed, **self.plan.method_kwargs})

    # ------------------------------------------------------------------ one checkpoint
    def _process(self, checkpoint: Checkpoint, references: dict[Any, Subspace], *, writer: bool) -> list[dict]:
        """The rows of one checkpoint (all split points); `writer` saves its tangents (one rank per checkpoint)."""
        rows: list[dict[str, Any]] = []
        with self._load(checkpoint) as (model, tokenizer, fetched):
            fingerprint = self._fingerprints.of(checkpoint)
            downloaded = {} if fetched.seconds is None else {"download_seconds": fetched.seconds}
            for layer in self.plan.layers:
                start = time.perf_counter()
                splitter = self._splitter(model, tokenizer, layer, checkpoint)
                try:
                    layer_rows = self._process_layer(checkpoint, splitter, layer, references.get(layer), writer=writer)
                except NonFiniteError as error:
                    raise NonFiniteError(
                        f"Checkpoint {checkpoint.name} ({checkpoint.source}), split point {layer!r}: {error}"
                    ) from error
                timing = {"wall_seconds": time.perf_counter() - start, **downloaded, "fingerprint": fingerprint}
                rows.extend({**row, **timing} for row in layer_rows)
        return rows

    def _process_layer(self, checkpoint: Checkpoint, splitter, layer, reference: Subspace | None, *, writer: bool):
        read = self._fit_read(checkpoint, splitter, layer)
        sample, sample_ids, sample_locations = read.sample.to(read.device), read.ids.to(read.device), read.locations
        if reference is not None and reference.dim != (d := sample.shape[1]):
            raise InvalidInputError(
                f"Checkpoint {checkpoint.name} has d={d} at split point {splitter.split_point!r} but the reference "
                f"subspace lives in R^{reference.dim}: all checkpoints of a sweep must share the hidden size."
            )
        own = read.own.replace(name="each", step=checkpoint.step, call=self.plan.options.call)
        subspaces = {"given" if self.plan.given_reference else "early": reference} if reference is not None else {}
        subspaces.update({"each": own} if "each" in self.plan.tangent_kinds else {})
        point = splitter.split_point
        if writer:
            own.save(self.store.tangent_path(layer, checkpoint.step))
            directions = {
                kind: top_tokens(sample, sample_ids, sample_locations, subspace, splitter.tokenizer)
                for kind, subspace in {**subspaces, "each": own}.items()
            }
            self.store.save_top_tokens(
                layer, checkpoint.step, split_point=point, n_rows=len(sample), directions=directions
            )
        seed = self.plan.options.seed  # a row's draws: from its step, never its place or its source (`draws.row_seed`)
        seeds = {kind: draws.row_seed(seed, step=checkpoint.step, split_point=point, kind=kind) for kind in subspaces}
        texts = self.plan.fit_texts + self.plan.probe_texts  # each token id's count, by this checkpoint's tokenizer
        counts = self._token_cache.counts(
            splitter.tokenizer, texts, lambda: metrics.count_token_frequencies(texts, splitter.tokenizer)
        )
        results = _probe(self.plan, splitter, subspaces, seeds, self._n_random, counts, self._token_cache)
        shared = _activation_metrics(sample, sample_ids, reference or own, counts) | drift("reference", own, reference)
        return [
            {**_identity(checkpoint, layer, point, kind), **result.to_dict(), **shared, "draw_seed": seeds[kind]}
            | {"n_random": self._n_random}
            for kind, result in results.items()
        ]

    def _fit_reader(self, splitter: ModelWithSplitPoints) -> FitReader:
        """A reader feeding a new own tangent at `splitter` and keeping the first `max_metric_tokens` rows."""
        return FitReader(
            self._new_tangent(splitter), streamed=self.plan.streams, max_sample=self.plan.options.max_metric_tokens
        )

    def _fit_read(self, checkpoint: Checkpoint, splitter: ModelWithSplitPoints, layer: int | str) -> FitRead:
        """The checkpoint's fit read at `layer`: kept from the reference pass, else read now."""
        if isinstance(kept := self._kept_reads.pop((checkpoint.step, layer), None), AnisotropyError):
            raise kept
        if kept is not None:
            return kept
        reader = self._fit_reader(splitter)
        for rows, ids, locations in self._activation_batches(splitter):
            reader.add(rows, ids, locations)
        return reader.finish()


def _probe(plan: SweepPlan, splitter, subspaces, seeds, n_random: int, counts, token_cache: TokenCache) -> dict:
    """`GradientProbe.run` of the probe texts at `splitter` against each subspace, drawn from `seeds` with R'."""
    options, iso = plan.options, plan.isoscore
    given = {name: getattr(options, name) for name in ("seed", "batch_size", "include_special", "call")}
    given |= {"autocast_dtype": plan.autocast_dtype, "token_cache": token_cache, "objective": plan.objective}
    probe = GradientProbe(splitter, distributed=options.parallel == "data" and distributed.is_distributed(), **given)
    drawn = {"n_controls": options.n_controls, "n_random": n_random, "seed": options.seed, "draw_seeds": seeds}
    drawn |= {"token_counts": counts, "max_tokens": options.max_tokens, "progress": False}
    isoscore = {"isoscore_convention": iso.convention, "isoscore_zeta": iso.zeta, "isoscore_c0": iso.target_name}
    return probe.run(plan.probe_texts, subspaces, **drawn, **isoscore)


def _activation_metrics(sample: torch.Tensor, ids: torch.Tensor, tangent: Subspace, counts: torch.Tensor) -> dict:
    """A metric sample's isotropy summary, frequency-distance correlation (token `counts`) and on-manifold entropy."""
    row: dict[str, Any] = {f"activation_{key}": value for key, value in metrics.summary(sample).items()}
    # Identical contexts (the same first token of two texts) give identical rows; the estimator needs distinct points.
    coordinates = torch.unique(tangent.coords(sample).double(), dim=0)
    fields = {"pearson": "pearson", "spearman": "spearman", "p_value": "pearson_p_value"}
    try:
        correlation = metrics.frequency_distance_correlation(sample, ids.cpu(), counts)
        row |= {
            f"freq_distance_{field}": _finite_or_none(getattr(correlation, name)) for field, name in fields.items()
        }
        row["freq_distance_n"] = correlation.n
    except AnisotropyError:
        row |= {f"freq_distance_{field}": None for field in fields}
    return {**row, "on_manifold_entropy": _finite_or_none(metrics.knn_entropy(coordinates))}


def _pipeline(uses: list[Checkpoint], plan: SweepPlan, store: SweepStore, *, progress: bool) -> CheckpointPipeline:
    """The pipeline fetching the Hub checkpoints of `uses` ahead of their turn, within the settings' disk budget."""
    options = plan.options
    if options.max_cache_gb is not None and distributed.is_distributed():
        raise InvalidInputError(
            "max_cache_gb is not supported under torchrun (the ranks share the Hugging Face cache, and one could "
            "evict a revision another still reads): leave max_cache_gb out, or sweep in a single process."
        )
    repos = sorted({c.source for c in uses if not c.is_local})
    before = None
    if repos and distributed.is_main_process() and not hub.is_offline():
        before = hub.cached_before(store.results_dir / hub.BEFORE_FILE, hub.cache_location(None), repos)
    budget = None if options.max_cache_gb is None else round(options.max_cache_gb * 1e9)
    given = {name: getattr(options, name) for name in ("prefetch", "max_concurrent_downloads", "hub_timeout")}
    return CheckpointPipeline(uses, max_cache_bytes=budget, before=before, progress=progress, **given)


def _identity(checkpoint: Checkpoint, layer: int | str, split_point: str, kind: str) -> dict[str, Any]:
    """The fields that name a row: its checkpoint, split point and tangent kind."""
    named = {"step": checkpoint.step, "checkpoint": checkpoint.name, "source": checkpoint.source}
    layer = layer if isinstance(layer, int) else str(layer)
    return {**named, "revision": checkpoint.revision, "layer": layer, "split_point": split_point, "tangent": kind}


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


_now = time.perf_counter  # the default clock (a test replaces it)


def estimate_line(seconds_per_round: float, remaining: int, *, per_round: int = 1, source: str = "") -> str:
    """ "about N s per checkpoint, M min for the K checkpoints left" (the time left counts rounds of `per_round`)."""
    left = math.ceil(remaining / per_round) * seconds_per_round
    each = seconds_per_round / per_round
    per = f"{each:.1f}" if each < 10 else f"{each:.0f}"
    total = f"{left / 60:.1f} min" if left >= 60 or left == 0 else f"{left:.0f} s"
    noun = "checkpoint" if remaining == 1 else "checkpoints"
    return f"about {per} s per checkpoint{f' ({source})' if source else ''}, {total} for the {remaining} {noun} left"


def seconds_per_checkpoint_of_rows(rows: Sequence[dict[str, Any]]) -> float | None:
    """The mean time a checkpoint took in earlier rows: per step, the sum of its split points' ``wall_seconds``."""
    per_point: dict[tuple[int, str], float] = {}
    for row in rows:
        seconds = row.get("wall_seconds")
        if not is_skipped(row) and isinstance(seconds, (int, float)) and math.isfinite(seconds):
            per_point[(row["step"], str(row.get("layer")))] = float(seconds)
    steps = {step for step, _ in per_point}
    return sum(per_point.values()) / len(steps) if steps else None


def opening_line(todo: int, rows: Sequence[dict[str, Any]], *, per_round: int = 1, early: int = 0) -> str:
    """What a sweep says before its first checkpoint: how many, and the time per checkpoint if its rows tell it."""
    after = f", after the reference tangent is fitted on {early} early checkpoints" if early else ""
    if (seconds := seconds_per_checkpoint_of_rows(rows)) is None:
        plural = "s" if todo != 1 else ""
        return f"{todo} checkpoint{plural} to compute{after}; the time per checkpoint is measured on the first one"
    source = "the wall_seconds of the rows already computed"
    return estimate_line(seconds, todo, per_round=per_round, source=source) + after


class CheckpointTimer:
    """Measures the sweep's rounds of checkpoints and says how long the rest will take."""

    def __init__(self, total: int, *, per_round: int = 1, clock: Callable[[], float] | None = None):
        self.total, self.per_round, self.clock, self.done = total, per_round, clock or _now, 0
        self._started = 0.0

    def start_round(self) -> None:
        """Mark the start of a round."""
        self._started = self.clock()

    def end_round(self, checkpoints: int) -> str | None:
        """Mark the end of a round of `checkpoints`; the estimate of what is left after the first round, else None."""
        seconds, first = self.clock() - self._started, self.done == 0
        self.done += checkpoints
        if first and (remaining := self.total - self.done) > 0:
            return estimate_line(seconds, remaining, per_round=self.per_round)
        return None


class SaidOnce:
    """Collects the warnings raised about each checkpoint; `say` warns each distinct one once, naming them."""

    def __init__(self) -> None:
        self._said: dict[tuple[type[Warning], str], tuple[warnings.WarningMessage, list[str]]] = {}

    @contextmanager
    def about(self, name: str) -> Iterator[None]:
        """Record the warnings raised inside (the filters in force decide which) as concerning `name`."""
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                yield
        finally:
            for record in caught:
                _, names = self._said.setdefault((record.category, str(record.message)), (record, []))
                if name not in names:
                    names.append(name)

    def say(self) -> None:
        """Warn each distinct warning recorded once, at its first place, with the checkpoints it concerns."""
        said, self._said = self._said, {}
        for (category, text), (record, names) in said.items():
            warnings.warn_explicit(
                f"{text} [said once for: {', '.join(names)}]", category, record.filename, record.lineno
            )


@dataclass
class FitRead:
    """A checkpoint's fit texts, read at a split point: its own tangent and its metric sample."""

    sample: Float[torch.Tensor, "n d"]
    ids: Int[torch.Tensor, " n"]
    locations: Int[torch.Tensor, "n 2"]
    device: torch.device
    own: Subspace


class FitReader:
    """Feeds a read's batches to a checkpoint's own tangent and keeps its first rows for the metrics."""

    def __init__(self, tangent: TangentExplainer, *, streamed: bool, max_sample: int):
        self.tangent, self.streamed, self.max_sample, self.n_sample = tangent, streamed, max_sample, 0
        self.pooled: list[torch.Tensor] = []
        self.head: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # the first rows, ids and locations
        self.error: AnisotropyError | None = None  # what `kept` hands on instead of a read

    def add(self, rows: Float[torch.Tensor, "n d"], ids: Int[torch.Tensor, " n"], locations: Int[torch.Tensor, "n 2"]):
        """Add one batch of rows (n, d), their token ids (n,) and locations (n, 2)."""
        rows = rows.float()
        if self.n_sample < self.max_sample:
            take = self.max_sample - self.n_sample
            self.head.append((rows[:take], ids[:take], locations[:take]))
            self.n_sample += self.head[-1][0].shape[0]
        if self.streamed:
            self.tangent.partial_fit(rows)
        else:
            self.pooled.append(rows)

    def finish(self) -> FitRead:
        """The read: the tangent fitted (pooled methods) and its subspace taken."""
        if not self.head:
            raise InvalidInputError(
                "No token activations were read: the fit texts are empty or hold only special tokens."
            )
        if not self.streamed:
            self.tangent.fit(torch.cat(self.pooled))
        sample, ids, locations = (torch.cat(parts) for parts in zip(*self.head, strict=True))
        return FitRead(sample, ids, locations, sample.device, self.tangent.subspace)

    def add_or_defer(self, rows: torch.Tensor, ids: torch.Tensor, locations: torch.Tensor) -> None:
        """`add`, keeping our error (for `kept`) instead of raising it; after one, the batches are ignored."""
        try:
            if self.error is None:
                self.add(rows, ids, locations)
        except AnisotropyError as error:
            self.error = error

    def kept(self) -> FitRead | AnisotropyError:
        """The read for a later turn (its subspace, not the model; the sample on the host), or the error it raises."""
        if self.error is not None:
            return self.error
        try:
            read = self.finish()
            return dataclasses.replace(read, sample=read.sample.cpu(), ids=read.ids.cpu())
        except AnisotropyError as error:
            return error
