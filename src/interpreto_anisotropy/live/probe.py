# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`TrainingProbe`: the gradient probe run on the training step's own gradients, window after window."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter

from ..commons import distributed
from ..commons.options import byte_size, check_bool, check_folder, check_nonnegative_int
from ..commons.tensors import one_thread
from ..errors import InvalidInputError, LiveProbeWarning, NonFiniteError, OutOfOrderError, ResultsStoreError
from ..probing.objectives import ObjectiveName, Reduction, make_objective
from ..reading.batching import special_token_ids
from ..reading.sourceless import tolerate_sourceless_backward
from ..reading.split_point import (
    TrainingCapture,
    TrainingRead,
    resolve_split_point,
    split_point_module,
    splitter_model,
)
from ..results.change import unpaired_change
from ..results.schema import sort_rows
from ..results.store import LiveStore
from ..results.table import SweepResult
from ..tangents.subspace import Subspace
from .options import LiveConfig, LiveTangent, window_n_random
from .point import LivePoint, TangentSchedule, moments_bytes
from .rows import first_windows, saved_tangents
from .tokens import ScaleCheck, gradient_weight, loss_rows, loss_terms, scaling

__all__ = ["TrainingProbe"]


class TrainingProbe:
    """Gradient energy of a tangent subspace vs matched-rank normal controls, measured on the training gradients.

    Attach it to the model being trained and call `step()` after each optimizer step; every `every` steps a
    window's dL/dh at each split point becomes a `ProbeResult` and a sweep row (docs/how-to/live-probe.md).

    Args:
        model: The model being trained (a Hugging Face model, or an Interpreto `ModelWithSplitPoints` holding it).
        split_points: Layer indices or module paths (default: the splitter's split point).
        tokenizer: The model's tokenizer: its special tokens are not rows (as in the probe). None: every token is.
        tangent: "early", "refit", a `Subspace` / fitted `TangentExplainer`, or a dict split point -> either.
        results_dir: Where config.json, rows.jsonl and the fitted tangents go (None: rows kept in memory only).
        start_step: Optimizer steps already done (a resumed run: later rows are rewritten, saved tangents read back).
        overwrite: Start afresh: remove everything the package wrote in `results_dir`; files it did not write stay.
        grad_scaler: The `torch.amp.GradScaler` whose scaled loss is differentiated: its scale is undone, and the
            micro-batches it skips are skipped and counted.
        config: The other settings (`LiveConfig`).
        **options: Any `LiveConfig` field by name, in place of the one of `config`.

    Raises:
        InvalidInputError: A bad option, an unknown split point, an objective that does not fit the model's head,
            or an "early" tangent without `early_steps` nor `total_steps`.

    Examples:
        >>> with ia.TrainingProbe(model, split_points=[2], tokenizer=tok, results_dir="runs/live",
        ...                       early_steps=100) as probe:  # doctest: +SKIP
        ...     for batch in loader:
        ...         model(**batch).loss.backward()
        ...         optimizer.step(); optimizer.zero_grad()
        ...         probe.step()
        >>> ia.write_report(ia.SweepResult.load("runs/live"), "runs/live/report")  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module | BaseSplitter,
        split_points: int | str | Sequence[int | str] | None = None,
        *,
        tokenizer: Any = None,
        tangent: str | Subspace | Any = "early",
        results_dir: str | os.PathLike | None = None,
        start_step: int = 0,
        overwrite: bool = False,
        grad_scaler: Any = None,
        config: LiveConfig | None = None,
        **options: Any,
    ):
        self.settings = settings = LiveConfig.of(config, options)
        self.model, layers, tokenizer = _unwrap(model, split_points, tokenizer, grad_scaler)
        self.layers = {resolve_split_point(self.model, layer): layer for layer in layers}
        self.objective = ObjectiveName(make_objective(settings.objective, model=self.model).name)
        self.reduction = Reduction(settings.reduction)
        self.every = settings.every
        if results_dir is not None:
            check_folder("results_dir", results_dir)
        self.results_dir, self.overwrite = results_dir, check_bool("overwrite", overwrite)
        self.grad_scaler = grad_scaler
        special_ids = special_token_ids(tokenizer) if tokenizer is not None else torch.zeros(0, dtype=torch.long)
        self.special_ids = special_ids  # the token ids that are not rows
        self._special_ids = {special_ids.device: special_ids}  # copied to each gradient device once
        self.kind, fit_until, given = _tangent_plan(tangent, self.layers, settings)
        schedule = {name: getattr(settings, name) for name in ("nb_concepts", "n_controls", "seed")}
        schedule["fit_until"] = fit_until
        self.n_random = n_random = window_n_random(settings)  # R' of every window, recorded in each row
        plan = {"call": settings.call, "n_random": n_random, **schedule}
        shared = {"objective": make_objective(self.objective.value, reduction="sum")}
        shared["max_pending_bytes"] = settings.max_pending_bytes // len(self.layers)
        self.points = {
            path: LivePoint(
                layer, path, TangentSchedule(self.kind, path, given=given.get(path), **plan), settings, **shared
            )
            for path, layer in self.layers.items()
        }
        self.config = {  # what config.json records, and what a resumed run must match
            "live": True,
            "model": type(self.model).__name__,
            "split_points": list(self.layers.values()),
            "objective": self.objective.value,
            "reduction": self.reduction.value,
            "reference": self.kind.value,
            "every": settings.every,
            **schedule,
            **{name: getattr(settings, name) for name in ("n_bootstrap", "confidence", "include_special")},
            **({} if settings.call is None else {"call": settings.call}),  # results written before `call` resume
            **({} if n_random == settings.n_controls else {"n_random": n_random}),  # and those before `n_random`
        }
        self.steps_done = self.window_start = check_nonnegative_int("start_step", start_step)
        self.rows: list[dict[str, Any]] = []
        self._capture = self._scale = self._store = None  # TrainingCapture, ScaleCheck, LiveStore once attached
        self._firsts: dict[tuple[str, str], dict[str, Any]] = {}  # each curve's first row, the changes' reference

    # ------------------------------------------------------------------ attaching
    @property
    def attached(self) -> bool:
        """Whether the probe is watching the model."""
        return self._capture is not None

    def attach(self) -> TrainingProbe:
        """Start watching the model's training forwards and backwards (and lock `results_dir`). Returns self.

        Raises:
            OutOfOrderError: Already attached.
            InvalidInputError: `max_pending_bytes` cannot hold one window awaiting the tangent at each split point (of
                the width its module or the model's config gives).
            InvalidInputError: `results_dir` holds results with other settings.
            SweepLockedError: Another process writes `results_dir`.
        """
        if self.attached:
            raise OutOfOrderError(
                "This TrainingProbe is already attached; detach() it first (or use one `with probe:` block)."
            )
        self._check_pending_room(max(split_point_width(self.model, path) or 0 for path in self.points))  # 0: unknown
        resuming = self.results_dir is not None and self.steps_done and not self.overwrite
        if self.results_dir is not None and distributed.is_main_process():
            options = {"overwrite": self.overwrite, "start_step": self.steps_done}
            self._store = LiveStore(
                self.results_dir, self.config, flush_seconds=self.settings.flush_seconds, **options
            )
        if resuming and self.kind is not LiveTangent.GIVEN:  # score against the tangents the stopped run fitted
            try:
                saved = saved_tangents(self.results_dir, self.layers, self.kind, self.config, self.steps_done)
            except (OutOfOrderError, ResultsStoreError):
                self._release()
                raise
            for path, subspace in saved.items():
                self.points[path].schedule.resume(subspace)
        if resuming:
            self._firsts = first_windows(self.results_dir, self.steps_done)
        tolerate_sourceless_backward()  # `loss.backward()` typed into `python -` (nnsight's tracer reads the source)
        self._scale = ScaleCheck(self.objective, self.reduction, self._weight)
        on_logits = lambda inputs, logits: self._scale.watch(inputs, logits, self.window_start)  # noqa: E731
        capture = TrainingCapture(
            self.model, list(self.layers), self._on_read, call=self.settings.call, on_logits=on_logits
        )
        self._capture = capture.attach()
        return self

    def _release(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            store.close()

    def detach(self) -> None:
        """Stop watching; write the rows of the closed windows (the open window is dropped) and release the folder.

        Raises:
            OutOfOrderError: Not attached.
        """
        if not self.attached:
            raise OutOfOrderError("This TrainingProbe is not attached: nothing to detach. Call attach() first.")
        self._capture.detach()
        self._capture = None
        if not self._scale.done:
            self._scale.verdict(stacklevel=2)
        self._release()

    def __enter__(self) -> TrainingProbe:
        return self.attach()

    def __exit__(self, *exc_info: Any) -> None:
        if self.attached:
            if exc_info[0] is None and not self._scale.done:
                self._scale.verdict(stacklevel=2)  # said at the `with` block
            self._scale.done = True  # nothing read while an error propagates
            self.detach()

    # ------------------------------------------------------------------ training
    def _on_read(self, read: TrainingRead) -> None:
        """Pool one micro-batch's (h, dL/dh) at one split point (called inside the user's backward)."""
        point, gradient = self.points[read.path], read.gradient
        device = gradient.device
        if point.start(gradient.shape[-1], device, self.window_start):
            self._check_pending_room(point.dim)  # a width that neither its module nor the config gave
        inputs = read.inputs or {"attention_mask": torch.ones(gradient.shape[:2], dtype=torch.long, device=device)}
        inputs = {key: value.to(device) for key, value in inputs.items()}
        inputs.setdefault("input_ids", torch.zeros_like(inputs["attention_mask"]))
        if device not in self._special_ids:
            self._special_ids[device] = next(iter(self._special_ids.values())).to(device)
        include_special = self.settings.include_special or "input_ids" not in read.inputs
        rows = loss_rows(inputs, self.objective, self._special_ids[device], include_special=include_special)
        weight = self._weight(inputs)
        if gradient.element_size() < 4:  # half-precision gradients are pooled in float32 products
            gradient = gradient.float()
        if weight is not None:
            gradient = gradient * weight.to(gradient.dtype)
        terms = loss_terms(inputs, self.objective).double()
        # the model's output device, not the split point's, when dispatched; without a loss: NaN, taken as finite
        loss = torch.full((), math.nan, device=device) if read.output_loss is None else read.output_loss.to(device)
        finite = torch.isfinite(loss) | (read.output_loss is None)
        point.add(read.hidden, gradient, rows, finite, loss.double() * terms, terms)

    def _weight(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The factor 1 / c_j of a micro-batch's gradients (`gradient_weight`), on its inputs' device."""
        settings = {"objective": self.objective, "reduction": self.reduction, "loss_scale": self.settings.loss_scale}
        return gradient_weight(inputs, **settings, scaler=self.grad_scaler, device=inputs["attention_mask"].device)

    def step(self, updates: int | None = None) -> list[dict[str, Any]]:
        """Record that an optimizer step was made; close the window when it holds `every` steps.

        Args:
            updates: The number of optimizer steps done now (a Trainer's `state.global_step`); default: one more.

        Returns:
            The rows completed now (empty unless a window closed, or the tangent was fitted).

        Raises:
            OutOfOrderError: Not attached.
            InvalidInputError: Training forwards ran but no backward reached a split point, or none ran it.
            NonFiniteError: Non-finite dL/dh in the window (with `on_nonfinite="raise"` and no gradient scaler).
        """
        if not self.attached:
            raise OutOfOrderError("step() needs an attached TrainingProbe: call attach() (or use `with probe:`).")
        self.steps_done = self.steps_done + 1 if updates is None else int(updates)
        if self.steps_done - self.window_start < self.settings.every:
            return []
        if self._scale.ready:
            self._scale.verdict(stacklevel=2)
        return self._close_window()

    def _close_window(self) -> list[dict[str, Any]]:
        step, first = self.steps_done - 1, self.window_start
        self._check_reads(first, step)
        rows: list[dict[str, Any]] = []
        sharded = distributed.is_distributed()
        for point in self.points.values():
            with one_thread():  # small linear algebra between the step's big products (see commons.tensors)
                window_rows, sums, fitted = point.close(step, sharded=sharded)
            skipped = 0 if sums is None else sums.tally.skipped_batches
            if skipped and self.settings.on_nonfinite == "raise" and not scaling(self.grad_scaler):
                raise NonFiniteError(
                    f"Non-finite loss or dL/dh at split point '{point.path}' in {skipped} micro-batch(es) of steps {first} to {step}. Lower the learning rate, use a gradient scaler, or pass on_nonfinite='skip'."
                )
            if fitted is not None and self._store is not None:  # on the main process only
                self._store.save_tangent(point.layer, fitted, reference=self.kind is LiveTangent.EARLY)
            rows.extend(window_rows)
            point.open(self.steps_done)
        self.window_start = self.steps_done
        self._capture.forwards, self._capture.runs = 0, dict.fromkeys(self.points, 0)  # counted again per window
        rows = sort_rows(rows)
        for row in rows:  # the change from the first window of the row's curve: a difference, without an interval
            row.update(unpaired_change(self._firsts.setdefault((row["split_point"], row["tangent"]), row), row))
        self.rows.extend(rows)
        if self._store is not None and rows:
            self._store.add(rows)
        return rows

    def flush(self) -> None:
        """Write the rows of the closed windows to `results_dir` now."""
        if self._store is not None:
            self._store.flush(force=True)

    def result(self) -> SweepResult:
        """The rows of the closed windows as a `SweepResult` (plots, report, CSV)."""
        return SweepResult(sort_rows(self.rows), dict(self.config), None)

    # ------------------------------------------------------------------ checks
    def _check_reads(self, first: int, step: int) -> None:
        """Our errors for a window whose training forwards never reached a split point's backward."""
        for path, point in self.points.items():
            forwards, runs = self._capture.forwards, self._capture.runs[path]
            if point.window is not None and point.window.reads:
                continue
            if forwards == 0:
                warnings.warn(
                    f"No training forward ran during the window of steps {first} to {step} (forwards under no_grad are ignored): it has no row. Attach the probe before training, and call step() after each optimizer step.",
                    LiveProbeWarning,
                    stacklevel=4,
                )
            elif runs == 0:
                raise InvalidInputError(
                    f"Split point '{path}' was not run by the {forwards} training forward(s) of steps {first} to {step}: choose a layer the model's forward runs."
                )
            else:
                raise InvalidInputError(
                    f"The backward never reached split point '{path}' during steps {first} to {step} ({runs} training forward(s) ran it): the loss does not depend on it, its output needs no gradient (every layer below it frozen, and the embeddings too), or backward() was not called before step(). Call loss.backward() in each step, or choose a split point the loss depends on."
                )

    def _check_pending_room(self, dim: int) -> None:
        """Refuse a `max_pending_bytes` whose share per split point (of width up to `dim`) holds no waiting window."""
        budget, count = self.settings.max_pending_bytes, len(self.points)
        if self.kind is LiveTangent.GIVEN or budget // count >= moments_bytes(dim):
            return
        needed = moments_bytes(dim) * count
        raise InvalidInputError(
            f"Until the tangent is fitted, each split point keeps at least one window's float64 gradient moments (d x d x 8 bytes at d={dim}): {byte_size(needed)} for {count} split point(s), above max_pending_bytes={budget} ({byte_size(budget)}). Set max_pending_bytes to at least {needed}, or give a fitted tangent (tangent=<Subspace>)."
        )


def split_point_width(model: torch.nn.Module, path: str) -> int | None:
    """The width of a split point's output (a linear layer's, an embedding's, the config's), or None if unknown."""
    module = split_point_module(model, path)
    if isinstance(module, torch.nn.Linear):
        return module.out_features
    if isinstance(module, torch.nn.Embedding):
        return module.embedding_dim
    config = getattr(model, "config", None)
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    widths = (getattr(config, key, None) for key in ("hidden_size", "d_model", "n_embd", "dim"))
    return next((width for width in widths if isinstance(width, int) and width > 0), None)


def _unwrap(
    model: Any, split_points: Any, tokenizer: Any, grad_scaler: Any
) -> tuple[torch.nn.Module, list[int | str], Any]:
    """The torch model, split points and tokenizer, from a model or an Interpreto splitter, checked."""
    if isinstance(model, BaseSplitter):
        tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        split_points = model.split_point if split_points is None else split_points
        model = splitter_model(model)
    if type(model).__name__ == "OptimizedModule":
        raise InvalidInputError(
            "The live probe cannot watch a torch.compile'd model (its hooks would break the compiled graph). Attach it to the model before compiling and train that model eagerly, or probe saved checkpoints with CheckpointSweep."
        )
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError(
            f"TrainingProbe needs a torch model or a ModelWithSplitPoints, got {type(model).__name__}."
        )
    scaler_methods = [getattr(grad_scaler, name, None) for name in ("is_enabled", "get_scale")]
    if grad_scaler is not None and not all(map(callable, scaler_methods)):
        raise InvalidInputError(
            f"grad_scaler must be the torch.amp.GradScaler whose scaled loss is differentiated (or None), got {grad_scaler!r}."
        )
    if tokenizer is not None and not hasattr(tokenizer, "all_special_ids"):
        raise InvalidInputError(
            f"tokenizer must be the model's Hugging Face tokenizer (its special tokens are left out of the rows) or None (every token is a row), got {type(tokenizer).__name__}."
        )
    return model, split_point_list(split_points), tokenizer


def split_point_list(split_points: Any) -> list[int | str]:
    """The split points as a list, each a layer index or a module path (checked without the model)."""
    layers = list(split_points) if isinstance(split_points, (list, tuple)) else [split_points]
    if split_points is None or not layers:
        what = "Give split_points:" if split_points is None else "split_points is empty: give"
        raise InvalidInputError(f"{what} a layer index, a module path, or a list of them.")
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, (int, str)):
            raise InvalidInputError(
                f"A split point is a layer index (an integer) or a module path (a string), got {layer!r}."
            )
    return layers


def _subspace(item: Any) -> Subspace | None:
    """A `Subspace`, or a fitted `TangentExplainer`'s; None for anything else."""
    subspace = item if isinstance(item, Subspace) else getattr(item, "subspace", None)
    return subspace if isinstance(subspace, Subspace) else None


def tangent_kind(tangent: Any) -> LiveTangent:
    """The kind of tangent the `tangent` option asks for, its form checked without the model."""
    if isinstance(tangent, str):
        if tangent not in ("early", "refit"):
            hint = " (pass the subspace itself: tangent=<Subspace>)" if tangent == "given" else ""
            raise InvalidInputError(f"tangent must be 'early', 'refit' or a Subspace, got {tangent!r}{hint}.")
        return LiveTangent(tangent)
    for item in tangent.values() if isinstance(tangent, Mapping) else [tangent]:
        if _subspace(item) is None:
            raise InvalidInputError(
                f"tangent must be 'early', 'refit', a Subspace, a fitted TangentExplainer, or a dict of them per split point; got {type(item).__name__}."
            )
    return LiveTangent.GIVEN


def _tangent_plan(
    tangent: Any, layers: dict[str, int | str], settings: LiveConfig
) -> tuple[LiveTangent, int | None, dict[str, Subspace]]:
    """(kind, steps of the fit or the refit period, given subspace per module path)."""
    kind = tangent_kind(tangent)
    if kind is LiveTangent.REFIT and (settings.refit_every is None or settings.refit_every % settings.every):
        raise InvalidInputError(
            f"tangent='refit' needs refit_every, a multiple of every={settings.every} (got {settings.refit_every!r})."
        )
    if kind is LiveTangent.EARLY and settings.early_steps is None and settings.total_steps is None:
        raise InvalidInputError(
            "tangent='early' needs early_steps (the steps whose activations fit the tangent), or total_steps (early_fraction of it is used)."
        )
    if kind is LiveTangent.REFIT:
        return kind, settings.refit_every, {}
    if kind is LiveTangent.EARLY:
        early = settings.early_steps
        return kind, max(1, math.ceil(settings.early_fraction * settings.total_steps)) if early is None else early, {}
    given = tangent if isinstance(tangent, Mapping) else dict.fromkeys(layers.values(), tangent)
    by_path = {path: _subspace(given.get(layer, given.get(path))) for path, layer in layers.items()}
    if missing := [layers[path] for path, subspace in by_path.items() if subspace is None]:
        raise InvalidInputError(f"tangent gives no Subspace for split point(s) {missing}: give one for each of them.")
    return kind, None, by_path
