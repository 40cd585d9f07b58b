# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`AnisotropyCallback`: the live probe inside a Hugging Face `Trainer`."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..commons import distributed
from ..errors import InvalidInputError
from ..results.table import SweepResult
from ..visualizations.report import write_report
from .options import LiveConfig
from .probe import TrainingProbe, split_point_list, tangent_kind
from .rows import figures

__all__ = ["AnisotropyCallback"]


class AnisotropyCallback(TrainerCallback):
    """A `transformers.TrainerCallback` that runs a `TrainingProbe` during `Trainer.train()`.

    Args:
        split_points: Layer indices or module paths of the Trainer's model.
        results_dir: Where the rows (and tangents) go.
        report_dir: Where the HTML report goes at the end of training (default: ``results_dir/report``; False: none).
        **probe_options: Any other `TrainingProbe` option (`tangent`, `config`, any `LiveConfig` field), checked
            here. Unless given, `total_steps` is the Trainer's `max_steps` and `reduction` follows its loss.

    Raises:
        InvalidInputError: A bad `results_dir`, `report_dir`, option name or value, split point form or `tangent`
            (whether the split points exist in the model is checked at `on_train_begin`).

    Each window's figures reach the Trainer's `report_to` integrations and `state.log_history` at the window's step
    (docs/how-to/live-probe.md, "Where the figures go").

    Examples:
        >>> callback = AnisotropyCallback([2, 4], results_dir="runs/live", every=10)
        >>> trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])  # doctest: +SKIP
        >>> trainer.train()  # doctest: +SKIP
    """

    def __init__(
        self,
        split_points: int | str | list[int | str],
        *,
        results_dir: str | os.PathLike,
        report_dir: str | os.PathLike | bool | None = None,
        **probe_options: Any,
    ):
        if not isinstance(results_dir, (str, os.PathLike)):
            raise InvalidInputError(f"results_dir must be a folder path, got {type(results_dir).__name__}.")
        if not isinstance(report_dir, (str, os.PathLike)) and report_dir not in (None, False):
            raise InvalidInputError(f"report_dir must be a folder path, False or None, got {report_dir!r}.")
        settings = {field.name for field in dataclasses.fields(LiveConfig)}
        taken = set(inspect.signature(TrainingProbe).parameters) - {"model", "split_points", "options"} | settings
        if unknown := sorted(set(probe_options) - taken):
            raise InvalidInputError(
                f"AnisotropyCallback got options TrainingProbe does not take: {', '.join(unknown)}. Its options: {', '.join(sorted(taken))}."
            )
        LiveConfig(**{name: value for name, value in probe_options.items() if name in settings})  # checks values
        split_point_list(split_points)  # their forms; the model, known at on_train_begin, resolves them
        tangent_kind(probe_options.get("tangent", "early"))
        self.split_points, self.probe_options, self.results_dir = split_points, probe_options, Path(results_dir)
        self.report_dir = self.results_dir / "report" if report_dir is None else report_dir
        self.trainer = self.probe = None  # the Trainer (bound or found at on_train_begin), the attached TrainingProbe

    @classmethod
    def add_to(cls, trainer: Any, split_points: int | str | list[int | str], **options: Any) -> AnisotropyCallback:
        """Create the callback, add it to `trainer` and bind it (the same as passing it in `callbacks=[...]`)."""
        callback = cls(split_points, **options)
        trainer.add_callback(callback)
        return callback.bind(trainer)

    def bind(self, trainer: Any) -> AnisotropyCallback:
        """Use `trainer`'s integrations and gradient scaler (the Trainer that trains is found at `on_train_begin`)."""
        self.trainer = trainer
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Attach the probe to the Trainer's model."""
        self.trainer = _calling_trainer() or self.trainer  # the Trainer training now, or the one bound
        # the probe's options: the user's, then what the Trainer says (a `config` given keeps its reduction)
        options = dict(self.probe_options)
        config = options.get("config")
        options.setdefault("tokenizer", kwargs.get("processing_class", kwargs.get("tokenizer")))
        if state.max_steps and state.max_steps > 0 and getattr(config, "total_steps", None) is None:
            options.setdefault("total_steps", state.max_steps)
        if config is None:
            accepts = getattr(self.trainer, "model_accepts_loss_kwargs", None)  # the loss is summed per step
            accepts = getattr(model, "accepts_loss_kwargs", None) if accepts is None else accepts
            if accepts is None:
                parameters = inspect.signature(model.forward).parameters.values()
                accepts = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters)
            options.setdefault("reduction", "sum" if accepts else "mean")
        scaler = getattr(getattr(self.trainer, "accelerator", None), "scaler", None)
        if scaler is not None:
            options.setdefault("grad_scaler", scaler)
        probe = TrainingProbe(
            model, self.split_points, results_dir=self.results_dir, start_step=state.global_step, **options
        )
        self.probe = probe.attach()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the windows that are due; report each one's figures at its step."""
        if self.probe is None:
            return
        by_step: dict[int, dict[str, float]] = {}  # each window's logged figures (one row per split point)
        for row in self.probe.step(updates=state.global_step):
            by_step.setdefault(row["step"], {}).update(figures(row))
        for step, logs in by_step.items():
            state.log_history.append({**logs, "step": step})
            if self.trainer is not None:
                _report(self.trainer.callback_handler, args, state, control, step=step, logs=logs)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the rows of the closed windows with the checkpoint."""
        if self.probe is not None:
            self.probe.flush()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Detach the probe and write the report."""
        if self.probe is None or not self.probe.attached:
            return
        self.probe.detach()
        if self.report_dir is not False and self.probe.rows and distributed.is_main_process():
            write_report(SweepResult.load(self.results_dir), self.report_dir)


def _report(handler: Any, args: Any, state: Any, control: Any, *, step: int, logs: dict[str, float]) -> None:
    """Call `on_log` at `step` of `handler`'s integration callbacks only, leaving the Trainer's `control` and `state`."""
    from transformers.integrations import INTEGRATION_TO_CALLBACK

    integrations = tuple(INTEGRATION_TO_CALLBACK.values())
    loggers = copy.copy(handler)
    loggers.callbacks = [callback for callback in handler.callbacks if isinstance(callback, integrations)]
    at_step = copy.copy(state)
    at_step.global_step = step
    loggers.call_event("on_log", args, at_step, copy.copy(control), logs=dict(logs))


def _calling_trainer() -> Any:
    """The `transformers.Trainer` up the call stack (callbacks are not handed it), or None."""
    from transformers import Trainer

    frame = inspect.currentframe().f_back
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), Trainer):
            return frame.f_locals["self"]
        frame = frame.f_back
    return None
