# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a sweep finds in its results directory and carries over: `ResultsDirCheck`, `changed_steps`, `PreviousDrift`,
`merge_configs` and the reference tangents fitted on the early checkpoints (`ReferenceTangents`, `EarlyPool`)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Float

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator, top_eigenvectors
from ..commons.progress import progress_bar
from ..errors import AnisotropyError, InvalidInputError, ResultsFileWarning, ResultsStoreError
from ..results import verdict as draws
from ..results.records import fingerprint, step_of
from ..results.schema import is_skipped
from ..results.store import SweepStore
from ..tangents.explainers import TangentExplainer, _numerical_rank, _warn_if_rank_below
from ..tangents.subspace import Subspace
from .checkpoints import Checkpoint
from .config import KINDS_OF, EarlyCentering, SweepPlan

if TYPE_CHECKING:
    from .runner import CheckpointSweep


def resolved_n_random(plan: SweepPlan, checkpoints: int, split_points: int, kinds: int, *, warn: bool) -> int:
    """R' of a run's rows: the given `n_random`, or the smallest that can pass the correction over its `family`."""
    size = draws.family_size(plan.options.family, checkpoints=checkpoints, split_points=split_points, kinds=kinds)
    if plan.options.n_random is None:
        return draws.default_n_random(size, n_controls=plan.options.n_controls, level=plan.options.level)
    if warn:
        draws.warn_if_cannot_pass(plan.options.n_random, size, plan.options.level)
    return plan.options.n_random


class ResultsDirCheck:
    """Lock and check a sweep's results directory on rank 0, then share what it holds with every rank."""

    def __init__(self, sweep: CheckpointSweep):
        self.sweep, self.plan, self.store, self.drift = sweep, sweep.plan, sweep.store, sweep._drift

    @contextmanager
    def held(self) -> Iterator[int]:
        """Hold the lock (rank 0) while the block runs, every rank raising rank 0's error."""
        with contextlib.ExitStack() as stack:
            failure = n_random = None
            if distributed.is_main_process():
                try:
                    stack.enter_context(self.store.lock())
                    n_random = self._check()
                except AnisotropyError as error:
                    failure = error
            failure, self.drift.checkpoints, n_random = distributed.broadcast_object(
                (failure, self.drift.checkpoints, n_random)
            )
            distributed.barrier()
            if failure is not None:
                raise failure
            yield n_random

    def _check(self) -> int:
        """Prepare the directory, drop what must be recomputed, and return R' (rank 0, under the lock)."""
        stored = self.store.prepare(self.plan.record(), overwrite=self.plan.options.overwrite, merge=merge_configs)
        self.drift.checkpoints = [Checkpoint.from_dict(entry) for entry in stored["checkpoints"]]
        self._refit_altered_files()
        self._forget_changed_checkpoints()
        shape = (len(self.drift.checkpoints), len(stored["split_points"]), len(KINDS_OF[stored["reference"]]))
        n_random = resolved_n_random(self.plan, *shape, warn=True)
        rows = self.store.rows() if self.plan.options.n_random is None else []  # drawn by the default R' of its time
        if steps := {row["step"] for row in rows if not is_skipped(row) and row.get("n_random", n_random) < n_random}:
            self.sweep._announce(
                f"recomputing {len(steps)} checkpoint(s) drawn with fewer than the {n_random} random subspaces "
                f"that the correction needs over the {self.plan.options.family} family of {len(self.drift.checkpoints)} "
                "checkpoints"
            )
            self.store.drop_steps(steps)
        return n_random

    def _refit_altered_files(self) -> None:
        """Drop the altered files provenance.jsonl records (and their rows) to fit again; refuse those we cannot."""
        altered = self.store.altered_files(self.plan.layers)
        if not altered:
            return
        references = [path for path in altered if path.parent == self.store.reference_path(0).parent]
        ours = {checkpoint.step for checkpoint in self.plan.checkpoints}
        computed = {row["step"] for row in self.store.rows() if not is_skipped(row)}
        by_step: dict[int, list[Path]] = {}
        for path in altered:
            step = None if path in references else step_of(path)
            if step is not None and (step in computed or step not in ours):  # else: written again before it is read
                by_step.setdefault(step, []).append(path)
        altered = references + [path for paths in by_step.values() for path in paths]
        if not altered:
            return
        if foreign := [path for step, paths in sorted(by_step.items()) if step not in ours for path in paths]:
            raise ResultsStoreError(
                f"{_not_written(foreign)}, and this run does not have their checkpoints to compute them again: rerun "
                "with those checkpoints among this sweep's, restore the files, or rerun with overwrite=True."
            )
        again = ["the reference tangent is fitted again on the early checkpoints"] if references else []
        again += [f"the rows of steps {sorted(by_step)} are computed again"] if by_step else []
        warnings.warn(f"{_not_written(altered)}: {'; '.join(again)}.", ResultsFileWarning, stacklevel=2)
        for path in references:
            path.unlink()
        if by_step:
            self.store.drop_steps(set(by_step))
            self.drift.forget_after(sorted(by_step))

    def _forget_changed_checkpoints(self) -> None:
        """Refuse, or drop with `recompute_changed`, rows and references computed on content that has changed."""
        rows = [row for row in self.store.rows() if not is_skipped(row)]  # skipped rows are retried anyway
        written = {row["step"] for row in rows}
        current = self.sweep._fingerprints.by_step(c for c in self.plan.checkpoints if c.step in written)
        steps = changed_steps(((row["step"], row.get("fingerprint")) for row in rows), current)
        paths = [self.store.reference_path(layer) for layer in self.plan.layers]
        infos = [saved_reference(path, self.plan).info for path in paths if path.exists()]
        pooled = [(int(step), then) for info in infos for step, then in (info.get("early_fingerprints") or {}).items()]
        early = changed_steps(pooled, self.sweep._fingerprints.by_step(self.plan.early) if pooled else {})
        if not steps and not early:
            return
        if not self.plan.options.recompute_changed:
            which = ", early checkpoints of the reference tangent" if early else ""
            raise ResultsStoreError(
                f"{self.store.results_dir} holds results of checkpoints whose content has changed since (steps "
                f"{sorted(set(steps) | set(early))}{which}): rerun with recompute_changed=True (--recompute-changed) "
                "to recompute them, use another results_dir, or overwrite=True."
            )
        if early:
            self.store.drop_references()
            steps = sorted(written)
        self.store.drop_steps(set(steps))
        self.drift.forget_after(steps)  # the drift of the checkpoints after them is measured again at the end


def _not_written(paths: list[Path]) -> str:
    """ "<files>: not the bytes the sweep wrote ..." (the start of a sentence)."""
    return f"{', '.join(map(str, paths))}: not the bytes the sweep wrote (a sha256 other than provenance.jsonl's)"


class TakenFingerprints(dict[Checkpoint, str]):
    """Each checkpoint's fingerprint, taken once per run (a Hub checkpoint's again once it is downloaded)."""

    def of(self, checkpoint: Checkpoint) -> str | None:
        """The checkpoint's fingerprint, or None while it cannot be taken."""
        if checkpoint not in self and (taken := fingerprint(checkpoint)) is not None:
            self[checkpoint] = taken
        return self.get(checkpoint)

    def by_step(self, checkpoints: Iterable[Checkpoint]) -> dict[int, str | None]:
        """{step: fingerprint or None} of some checkpoints."""
        return {checkpoint.step: self.of(checkpoint) for checkpoint in checkpoints}


def changed_steps(taken: Iterable[tuple[int, str | None]], current: Mapping[int, str | None]) -> list[int]:
    """The steps of (step, fingerprint then) pairs whose checkpoint's content is another now, sorted."""
    return sorted({step for step, then in taken if then and current.get(step) and then != current[step]})


def drift(label: str, own: Subspace, other: Subspace | None) -> dict[str, Any]:
    """The mean and max principal angle between two tangents, as `drift_{label}_*` row fields (None without one)."""
    if other is None or other.dim != own.dim:
        return {f"drift_{label}_mean_angle": None, f"drift_{label}_max_angle": None}
    angles = own.principal_angles(other)
    return {f"drift_{label}_mean_angle": float(np.mean(angles)), f"drift_{label}_max_angle": float(np.max(angles))}


@dataclass
class PreviousDrift:
    """The drift of each row's tangent from the previous checkpoint's, read from the results directory."""

    store: SweepStore
    checkpoints: list[Checkpoint]

    def previous_step(self, step: int) -> int | None:
        """The step before `step` among `checkpoints`, or None for the first."""
        return max((other.step for other in self.checkpoints if other.step < step), default=None)

    def of(self, row: dict[str, Any], *, warn: bool) -> dict[str, Any]:
        """The `drift_previous_*` fields of a row; `warn`: say why they are None when the previous tangent is missing."""
        previous_step = self.previous_step(row["step"])
        previous = self.store.tangent(row["layer"], previous_step) if previous_step is not None else None
        if previous_step is not None and previous is None and warn:
            missing = self.store.tangent_path(row["layer"], previous_step)
            warnings.warn(
                f"The drift_previous of step {row['step']} (split point {row['layer']!r}) is None: {missing} is missing "
                "(skipped, or deleted); it is filled in once that checkpoint's rows are computed.",
                ResultsFileWarning,
                stacklevel=3,
            )
        own = self.store.tangent(row["layer"], row["step"])
        if own is None and previous is not None:
            raise ResultsStoreError(
                f"{self.store.tangent_path(row['layer'], row['step'])} is missing: it is the tangent refitted on step "
                f"{row['step']} (split point {row['layer']!r}), whose drift from step {previous_step} is due. Restore "
                f"it, or delete step {row['step']}'s rows from rows.jsonl to compute them again."
            )
        measured = previous_step if own is not None and previous is not None else None
        return {**drift("previous", own, previous), "drift_previous_step": measured}

    def refresh(self) -> None:
        """Recompute the drift of rows measured from another previous checkpoint than today's (or none that exists)."""

        def refreshed(row: dict[str, Any]) -> dict[str, Any]:
            expected = self.previous_step(row["step"])
            unchanged = is_skipped(row) or row.get("drift_previous_step", -1) == expected
            if unchanged or (expected is not None and not self.store.tangent_path(row["layer"], expected).exists()):
                return row
            return {**row, **self.of(row, warn=False)}

        self.store.update_rows(refreshed)

    def forget_after(self, steps: set[int] | list[int]) -> None:
        """Drop the drift of the rows whose previous checkpoint is one of `steps` (measured again at the end)."""
        forget = lambda row: {k: v for k, v in row.items() if k != "drift_previous_step"}  # noqa: E731
        self.store.update_rows(lambda row: forget(row) if self.previous_step(row["step"]) in steps else row)


#: How the rows are judged (`SweepConfig.family`, `.correction`, `.level`): each run declares its own, which
#: config.json keeps (absent: the default), and rows drawn too few for it are recomputed.
READING = ("family", "correction", "level")
#: Config keys a run may extend or change; every other key must be equal.
EXTENDABLE = ("checkpoints", "split_points", "reference", "given_reference", "early_steps", "early_fraction", *READING)


def merge_configs(stored: dict[str, Any], new: dict[str, Any], *, where: str) -> dict[str, Any]:
    """The stored config extended by a run's config."""
    if (was := stored.get("format_version")) != (now := new.get("format_version")):
        older = f"its rows are of format {was}, written by another version of interpreto-anisotropy"
        _refuse(where, f"{older}; this one writes format {now}")
    if fixed := sorted(k for k in set(stored) | set(new) if k not in EXTENDABLE and stored.get(k) != new.get(k)):
        _refuse(where, f"{', '.join(fixed)} differ")
    kinds = set(KINDS_OF[stored["reference"]]) | set(KINDS_OF[new["reference"]])
    if "given" in kinds and len(kinds) > 1:
        _refuse(where, f"reference is {stored['reference']!r} there, {new['reference']!r} here")
    checkpoints = {checkpoint["step"]: checkpoint for checkpoint in stored["checkpoints"]}
    for checkpoint in new["checkpoints"]:
        if (known := checkpoints.setdefault(checkpoint["step"], checkpoint)) != checkpoint:
            _refuse(where, f"step {checkpoint['step']} is {known} there, {checkpoint} here")
    was, now = stored.get("given_reference"), new.get("given_reference")
    if was is not None and now is not None and (clashes := sorted(p for p in set(was) & set(now) if was[p] != now[p])):
        _refuse(where, f"the given reference of split point {', '.join(clashes)} is another subspace")
    return {
        **{key: value for key, value in stored.items() if key not in READING},
        **{key: new[key] for key in READING if key in new},
        "checkpoints": [checkpoints[step] for step in sorted(checkpoints)],
        "split_points": stored["split_points"] + [p for p in new["split_points"] if p not in stored["split_points"]],
        "reference": next(name for name, members in KINDS_OF.items() if set(members) == kinds),
        "given_reference": was if now is None else now if was is None else {**was, **now},
        **_merged_early(stored, new, where),
    }


def _refuse(where: str, why: str) -> None:
    raise InvalidInputError(
        f"{where} holds a sweep with other settings ({why}): use another results_dir, or "
        "overwrite=True (--overwrite) to start afresh."
    )


def _merged_early(stored: dict[str, Any], new: dict[str, Any], where: str) -> dict[str, Any]:
    """The early steps (and the fraction that chose them) of the merged sweep: the stored ones when it has a reference."""
    stored_early, new_early = ("early" in KINDS_OF[config["reference"]] for config in (stored, new))
    if stored_early and new_early and stored["early_steps"] != new["early_steps"]:
        last, latest_early = max(checkpoint["step"] for checkpoint in new["checkpoints"]), max(stored["early_steps"])
        keeping = f"early_fraction={min(1.0, (latest_early + 0.5) / last) if last else 1.0:.6g} keeps the same ones"
        advice = keeping if latest_early <= last else f"include the checkpoints up to step {latest_early} again"
        steps = f"steps {new['early_steps']} instead of {stored['early_steps']}"
        _refuse(where, f"the early checkpoints, which the reference tangent pools, would be {steps}; {advice}")
    chosen = new if new_early and not stored_early else stored
    return {"early_steps": chosen["early_steps"], "early_fraction": chosen["early_fraction"]}


def saved_reference(path: Path, plan: SweepPlan) -> Subspace:
    """A reference tangent saved by an earlier run, checked against the settings' rank."""
    reference = Subspace.load(path, device=plan.device)
    if reference.rank > plan.options.nb_concepts or (plan.streams and reference.rank != plan.options.nb_concepts):
        raise ResultsStoreError(
            f"{path} holds a rank-{reference.rank} reference but the sweep asks for nb_concepts="
            f"{plan.options.nb_concepts}: delete it to refit, or rerun with overwrite=True."
        )
    return reference


class ReferenceTangents:
    """The reference tangents of a sweep's split points, fitted on its early checkpoints where none is saved."""

    def __init__(self, sweep: CheckpointSweep):
        self.sweep, self.plan, self.store = sweep, sweep.plan, sweep.store

    def missing(self) -> list[int | str]:
        """The split points whose reference tangent is fitted on the early checkpoints and not saved yet."""
        early = "early" in self.plan.tangent_kinds
        return [layer for layer in self.plan.layers if early and not self.store.reference_path(layer).exists()]

    def fits_here(self) -> bool:
        """Whether this rank reads the early checkpoints for references (all if the method streams, else rank 0)."""
        return self.plan.streams or distributed.is_main_process()

    def by_layer(self) -> dict[int | str, Subspace]:
        """Each split point's reference tangent: given, saved in results_dir, or fitted on the early checkpoints."""
        if self.plan.given_reference:
            return self.plan.given_reference
        if "early" not in self.plan.tangent_kinds:
            return {}
        paths = {layer: self.store.reference_path(layer) for layer in self.plan.layers}
        saved = {layer: path for layer, path in paths.items() if path.exists()}
        missing = self.missing()
        if missing and self.fits_here():
            fitted = self._fit(missing)
            if distributed.is_main_process():
                for layer, subspace in fitted.items():
                    self.store.save_reference(layer, subspace)
        if missing and not self.plan.streams:
            distributed.barrier()  # rank 0 fits and saves; the others read its files
            saved = paths
        references = {layer: saved_reference(path, self.plan) for layer, path in saved.items()}
        if missing and self.plan.streams:
            references.update(fitted)
        return {layer: references[layer] for layer in self.plan.layers}

    def _fit(self, layers: list[int | str]) -> dict[int | str, Subspace]:
        """Fit the references of `layers` on the early checkpoints (in one process keeping each one's fit read)."""
        sweep, early, streamed = self.sweep, self.plan.early, self.plan.streams
        pools = {layer: EarlyPool(streamed=streamed, centering=self.plan.early_centering) for layer in layers}
        references: dict[int | str, Subspace] = {}
        bar = progress_bar(early, progress=sweep._shows(), desc="Reference tangent (early checkpoints)", unit="ckpt")
        for index, checkpoint in enumerate(bar):
            with sweep._load(checkpoint) as (model, tokenizer, _):
                sweep._fingerprints.of(checkpoint)  # taken while its files are cached (a budget evicts them after)
                for layer in layers:
                    splitter = sweep._splitter(model, tokenizer, layer, checkpoint)
                    pool = pools[layer]
                    pool.start_checkpoint(lambda splitter=splitter: sweep._new_tangent(splitter))
                    if pool.dim != (d := model.config.hidden_size) and index > 0:
                        raise InvalidInputError(
                            f"Checkpoint {checkpoint.name} has hidden size {d} but the earlier "
                            f"checkpoints have {pool.dim}: a sweep's checkpoints share theirs."
                        )
                    own = sweep._fit_reader(splitter) if checkpoint.step in sweep._kept_steps else None
                    for rows, ids, locations in sweep._activation_batches(splitter, sharded=streamed):
                        pool.add(rows)
                        if own is not None:
                            own.add_or_defer(rows, ids, locations)
                    pool.end_checkpoint()
                    if own is not None:  # its rows, in the main loop, take this read
                        sweep._kept_reads[(checkpoint.step, layer)] = own.kept()
                    if (
                        index == len(early) - 1
                    ):  # named "early", its info: which early checkpoints (and content) it pools
                        subspace = pool.fit()
                        pooled = {str(c.step): sweep._fingerprints.of(c) for c in early}
                        info = {**subspace.info, "early_steps": [c.step for c in early], "early_fingerprints": pooled}
                        references[layer] = subspace.replace(name="early", call=self.plan.options.call, info=info)
            sweep._pipeline.done(checkpoint)
        return references


class EarlyPool:
    """Rows of the early checkpoints, added checkpoint by checkpoint, and the reference tangent fitted on them."""

    def __init__(self, *, streamed: bool, centering: EarlyCentering):
        self.streamed, self.centering, self.count = streamed, centering, 0
        self.new_tangent: Callable[[], TangentExplainer] | None = None
        self.tangent: TangentExplainer | None = None  # streamed and pooled: one PCA fed every row
        self.dim: int | None = None
        self.rows: list[torch.Tensor] = []  # pooled methods: every row so far (centred per checkpoint if asked)
        self.checkpoint_rows: list[torch.Tensor] = []
        self.checkpoint_moments: MomentAccumulator | None = None
        self.within: torch.Tensor | None = None  # streamed, per checkpoint: summed within-checkpoint scatter (d, d)
        self.sums: torch.Tensor | None = None  # per checkpoint: the sum of every row (d,)

    def start_checkpoint(self, new_tangent: Callable[[], TangentExplainer]) -> None:
        """Start the rows of the next early checkpoint."""
        self.new_tangent = new_tangent
        if self.tangent is None and self.dim is None:
            self.dim = (first := new_tangent()).input_size
            if self.streamed and self.centering is EarlyCentering.POOLED:
                self.tangent = first
        self.checkpoint_rows, self.checkpoint_moments = [], None

    def add(self, rows: Float[torch.Tensor, "n d"]) -> None:
        """Add a batch of the current checkpoint's rows."""
        if self.tangent is not None:
            self.tangent.partial_fit(rows)
        elif self.streamed:
            if self.checkpoint_moments is None:
                self.checkpoint_moments = MomentAccumulator(rows.shape[1], device=rows.device)
            self.checkpoint_moments.update(rows)
        else:
            self.checkpoint_rows.append(rows.float().cpu())

    def end_checkpoint(self) -> None:
        """Close the current checkpoint: pool its rows, centred on their own mean when asked."""
        if self.tangent is None and self.streamed:  # every rank takes part, even with no rows
            moments = distributed.all_reduce_moments(self.checkpoint_moments or MomentAccumulator(self.dim))
            if moments.count > 0:
                scatter, row_sum = moments.covariance() * moments.count, moments.mean * moments.count
                self.within = scatter if self.within is None else self.within + scatter.to(self.within)
                self.sums = row_sum if self.sums is None else self.sums + row_sum.to(self.sums)
                self.count += moments.count
        elif self.tangent is None and self.checkpoint_rows:
            rows = torch.cat(self.checkpoint_rows)
            if self.centering is EarlyCentering.PER_CHECKPOINT:
                self.sums = rows.double().sum(0) if self.sums is None else self.sums + rows.double().sum(0)
                self.count += rows.shape[0]
                rows = rows - rows.mean(0)
            self.rows.append(rows)

    def fit(self) -> Subspace:
        """The reference tangent fitted on every early checkpoint's rows."""
        if self.tangent is not None:
            return self.tangent.merge_across_ranks().finalize().subspace
        if not (self.count if self.streamed else self.rows):
            raise InvalidInputError("The early checkpoints gave no activation rows to fit the reference on.")
        if self.streamed:
            tangent = self.new_tangent()
            values, vectors = top_eigenvectors(self.within / self.count, tangent.nb_concepts)
            rank = min(self.count - 1, _numerical_rank(values))  # warned about as a streamed PCA does
            _warn_if_rank_below(tangent.nb_concepts, self.count, rank, centred=True)
            mean, basis = (self.sums / self.count).float(), vectors.float().contiguous()
            return Subspace(basis, mean=mean, method="pca", split_point=tangent.splitter.split_point)
        subspace = self.new_tangent().fit(self.rows).subspace
        if self.centering is EarlyCentering.PER_CHECKPOINT:
            subspace = subspace.replace(mean=(self.sums / self.count).to(subspace.basis))
        return subspace
