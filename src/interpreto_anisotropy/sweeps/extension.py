# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Extending a sweep: the config of a results directory merged with a run that asks for more of the same.

Examples:
    >>> stored = {"checkpoints": [{"step": 0, "source": "a", "revision": None}], "split_points": [1],
    ...           "reference": "early", "given_reference": None, "early_steps": [0], "early_fraction": 0.3}
    >>> new = {**stored, "split_points": [2], "reference": "each"}
    >>> merged = merge_configs(stored, new, where="sweep")
    >>> merged["split_points"], merged["reference"]
    ([1, 2], 'both')
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigMismatchError

__all__ = ["EXTENDABLE", "READING", "merge_configs", "tangent_kinds"]

#: How the rows are judged (`SweepConfig.family`, `.correction`, `.level`): each run declares its own, which
#: config.json keeps (absent: the default), and rows drawn too few for it are recomputed.
READING = ("family", "correction", "level")
#: Config keys a run may extend or change; every other key must be equal.
EXTENDABLE = ("checkpoints", "split_points", "reference", "given_reference", "early_steps", "early_fraction", *READING)

_KINDS = {"early": {"early"}, "each": {"each"}, "both": {"early", "each"}, "given": {"given"}}


def merge_configs(stored: dict[str, Any], new: dict[str, Any], *, where: str) -> dict[str, Any]:
    """The stored config extended by a run's config.

    Args:
        stored: The results directory's ``config.json``.
        new: The config of the run that wants to write there.
        where: The results directory, for messages.

    Returns:
        The merged config (equal to `stored` when the run adds nothing).

    Raises:
        ConfigMismatchError: A setting that determines the numbers differs, a step names another checkpoint, or the
            early checkpoints would change; the message names them.
    """
    if stored.get("format_version") != new.get("format_version"):
        _refuse(
            where,
            f"its rows are of format {stored.get('format_version')}, written by another version of "
            f"interpreto-anisotropy; this one writes format {new.get('format_version')}, whose rows hold other fields, "
            "so the two are not mixed",
        )
    fixed = sorted(key for key in set(stored) | set(new) if key not in EXTENDABLE and stored.get(key) != new.get(key))
    if fixed:
        _refuse(where, f"{', '.join(fixed)} differ")
    kinds = _merged_kinds(stored, new, where)
    return {
        **{key: value for key, value in stored.items() if key not in READING},
        **{key: new[key] for key in READING if key in new},
        "checkpoints": _merged_checkpoints(stored["checkpoints"], new["checkpoints"], where),
        "split_points": stored["split_points"] + [p for p in new["split_points"] if p not in stored["split_points"]],
        "reference": kinds,
        "given_reference": _merged_given(stored.get("given_reference"), new.get("given_reference"), where),
        **_merged_early(stored, new, where),
    }


def _refuse(where: str, why: str) -> None:
    raise ConfigMismatchError(
        f"{where} holds a sweep with other settings ({why}). Use another results_dir, or overwrite=True "
        "(--overwrite) to start afresh."
    )


def _merged_checkpoints(stored: list[dict], new: list[dict], where: str) -> list[dict]:
    by_step = {checkpoint["step"]: checkpoint for checkpoint in stored}
    for checkpoint in new:
        known = by_step.setdefault(checkpoint["step"], checkpoint)
        if known != checkpoint:
            _refuse(where, f"step {checkpoint['step']} is {known} there, {checkpoint} here")
    return [by_step[step] for step in sorted(by_step)]


def tangent_kinds(reference: str) -> set[str]:
    """The tangent kinds of a config's `reference` ("both": early and each)."""
    return _KINDS[reference]


def _merged_kinds(stored: dict[str, Any], new: dict[str, Any], where: str) -> str:
    kinds = _KINDS[stored["reference"]] | _KINDS[new["reference"]]
    if "given" in kinds and len(kinds) > 1:
        _refuse(where, f"reference is {stored['reference']!r} there, {new['reference']!r} here")
    return next(name for name, members in _KINDS.items() if members == kinds)


def _merged_given(stored: dict | None, new: dict | None, where: str) -> dict | None:
    if stored is None or new is None:
        return stored if new is None else new
    clashes = sorted(layer for layer in set(stored) & set(new) if stored[layer] != new[layer])
    if clashes:
        _refuse(where, f"the given reference of split point {', '.join(clashes)} is another subspace")
    return {**stored, **new}


def _merged_early(stored: dict[str, Any], new: dict[str, Any], where: str) -> dict[str, Any]:
    """The early steps (and the fraction that chose them) of the merged sweep: the stored ones when it has a reference."""
    uses_early = {name: "early" in _KINDS[config["reference"]] for name, config in (("stored", stored), ("new", new))}
    if uses_early["stored"] and uses_early["new"] and stored["early_steps"] != new["early_steps"]:
        last, latest_early = max(checkpoint["step"] for checkpoint in new["checkpoints"]), max(stored["early_steps"])
        keeping = min(1.0, (latest_early + 0.5) / last) if last else 1.0
        advice = (
            f"early_fraction={keeping:.6g} keeps the same ones"
            if latest_early <= last
            else f"include the checkpoints up to step {latest_early} again"
        )
        _refuse(
            where,
            f"the early checkpoints, which the reference tangent pools, would be steps {new['early_steps']} instead "
            f"of {stored['early_steps']}; {advice}",
        )
    chosen = new if uses_early["new"] and not uses_early["stored"] else stored
    return {"early_steps": chosen["early_steps"], "early_fraction": chosen["early_fraction"]}
