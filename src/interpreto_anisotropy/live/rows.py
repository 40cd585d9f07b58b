# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A live run's rows: a closed window as a sweep row, and a stopped run's rows and tangents read back to resume it.

A row has a sweep row's identity fields (``checkpoint`` "live-{step}", ``source`` "live"), every `ProbeResult` field
but the per-sequence lists (a window's sequences are its own: nothing pairs them with another window's), and the
window's (``window_*``, ``retrospective``, ``tangent_fitted_at``); each column's meaning is in `results.schema`
(docs/columns.md). A resumed run scores its windows against the tangents the stopped run fitted, and measures its
changes from each curve's first window (docs/how-to/live-probe.md, "Resuming").
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from ..commons import distributed
from ..errors import LiveProbeWarning, OutOfOrderError, ResultsStoreError
from ..probing.result import PER_SEQUENCE_FIELDS, ProbeResult
from ..results.change import UNPAIRED_CHANGES
from ..results.records import step_of
from ..results.store import SweepStore
from ..tangents.subspace import Subspace
from .options import ROW_SOURCE, LiveTangent

#: The `ProbeResult` fields a `TrainingProbe` logs after each window (`figures`): the exact p-values the finding
#: uses, with the anisotropy share, and the paper's approximate `p_value` after them.
LOGGED_FIELDS = tuple(
    "energy_share control_mean energy_ratio p_value_exact anisotropy_share anisotropy_p_value_exact p_value "
    "oracle_energy_share isoscore_star delta_isoscore_star".split()
)


def live_row(
    result: ProbeResult,
    *,
    step: int,
    first_step: int,
    micro_batches: int,
    layer: int | str,
    path: str,
    kind: str,
    retrospective: bool,
    fitted_at: int | None,
) -> dict[str, Any]:
    """The sweep row of one window at one split point (`results.schema` has each column's meaning)."""
    return {
        "step": step,
        "checkpoint": f"live-{step}",
        "source": ROW_SOURCE,
        "revision": None,
        "layer": layer if isinstance(layer, int) else str(layer),
        "split_point": path,
        "tangent": kind,
        **{key: value for key, value in result.to_dict().items() if key not in PER_SEQUENCE_FIELDS},
        "window_first_step": first_step,
        "window_steps": step - first_step + 1,
        "window_micro_batches": micro_batches,
        "retrospective": retrospective,
        "tangent_fitted_at": fitted_at,
    }


def figures(row: dict[str, Any]) -> dict[str, float]:
    """The logged figures of a row, keyed ``anisotropy/<split point>/<field>`` (None values left out)."""
    return {
        f"anisotropy/{row['layer']}/{name}": float(row[name]) for name in LOGGED_FIELDS if row.get(name) is not None
    }


def first_windows(results_dir: Path, start_step: int) -> dict[tuple[str, str], dict[str, Any]]:
    """The first row of each curve (split point, tangent kind) a stopped run wrote before `start_step`, on every rank."""
    firsts: dict[tuple[str, str], dict[str, Any]] = {}
    if distributed.is_main_process():
        for row in SweepStore(results_dir).rows():
            key = (str(row["split_point"]), str(row["tangent"]))
            if row["step"] < start_step and (key not in firsts or row["step"] < firsts[key]["step"]):
                firsts[key] = {name: row.get(name) for name in ("step", *UNPAIRED_CHANGES)}
    return distributed.broadcast_object(firsts)


def saved_tangents(
    results_dir: Path, layers: dict[str, int | str], kind: LiveTangent, config: dict[str, Any], start_step: int
) -> dict[str, Subspace]:
    """The tangents in use at `start_step` per module path, on every rank, for a run of `config` (its config.json)."""
    found: dict[str, Subspace] | tuple[type, str] = {}
    if distributed.is_main_process():
        try:
            found = _read(SweepStore(results_dir), layers, kind, config, start_step)
        except (OutOfOrderError, ResultsStoreError) as error:
            found = (type(error), str(error))
    found = distributed.broadcast_object(found)
    if isinstance(found, tuple):
        raise found[0](found[1])
    return found


def _read(store: SweepStore, layers: dict, kind: LiveTangent, config: dict, start_step: int) -> dict[str, Subspace]:
    fit_every, every, nb_concepts = config["fit_until"], config["every"], config["nb_concepts"]
    found = {}
    for path, layer in layers.items():
        if kind is LiveTangent.EARLY:
            fitted_at = math.ceil(fit_every / every) * every  # the first window close at or after the early steps
            file = store.reference_path(layer)
            saved = Subspace.load(file) if file.exists() else None
            saved = saved if saved is not None and (saved.step or 0) <= start_step else None
        else:  # the tangent refitted last at or before `start_step`
            fitted_at = start_step - start_step % fit_every
            folder = store.tangent_path(layer, 0).parent
            steps = [step for file in folder.glob("step-*.safetensors") if (step := step_of(file)) <= start_step]
            file = store.tangent_path(layer, max(steps) if steps else fitted_at)
            saved = Subspace.load(file) if steps else None
        if saved is None and 0 < fitted_at <= start_step:
            raise ResultsStoreError(
                f"The live run resumed at step {start_step} scores its windows at split point {layer!r} against the {kind.value} tangent fitted at step {fitted_at}, but {file} is missing. Resume into the results_dir the stopped run wrote, pass that tangent as tangent=Subspace.load(...), or restart from step 0."
            )
        if saved is not None and saved.rank != nb_concepts:
            raise ResultsStoreError(
                f"{file} holds a tangent of rank {saved.rank}, but this run's nb_concepts is {nb_concepts}: another run wrote it. Resume into the results_dir the stopped run wrote, or start afresh with overwrite=True."
            )
        if saved is not None:
            found[path] = saved
        if saved is None or (kind is LiveTangent.REFIT and saved.step != start_step):
            _warn_partial_fit(path, kind, fitted_at if kind is LiveTangent.EARLY else fit_every, start_step, saved)
    return found


def _warn_partial_fit(path: str, kind: LiveTangent, fit_at: int, start_step: int, tangent: Subspace | None) -> None:
    """Say that the next fit pools the steps from `start_step` only (the stopped run's pooled activations are lost)."""
    since = 0 if tangent is None else (tangent.step or 0)
    unscored = f"the windows of steps 0 to {start_step - 1}, which awaited"
    if kind is LiveTangent.EARLY:
        what = f"the early tangent is fitted on the steps from {start_step} to {fit_at - 1} only"
        lost = f"{unscored} it, will have no rows"
    else:
        what = f"the next refit, at step {since + fit_at}, pools the steps from {start_step} only"
        lost = f"the activations of steps {since} to {start_step - 1} are lost"
        lost += "" if tangent is not None else f", and {unscored} the first fit, will have no rows"
    warnings.warn(
        f"The live run resumes at step {start_step} at split point '{path}': {what}; {lost} (the stopped run pooled them, and they are not saved). Resume from a checkpoint saved when a tangent was fitted to avoid this.",
        LiveProbeWarning,
        stacklevel=4,
    )
