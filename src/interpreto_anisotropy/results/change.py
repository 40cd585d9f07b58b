# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What training added: each row's change from its curve's first checkpoint (docs/statistics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..probing.intervals import paired_change
from ..probing.result import number
from .schema import COLUMNS, is_skipped, row_key
from .store import SweepStore

#: Paired bootstrap resamples behind each row's change interval and p-value (as the energy share's interval).
CHANGE_RESAMPLES = 1000

#: The statistics whose change has an interval: (name, denominator field of the per-sequence lists).
_PAIRED = (("energy_share", "sequence_totals"), ("energy_ratio", "sequence_control_energies"))

#: The row fields `change_fields` fills, as `schema.COLUMNS` declares them.
CHANGE_FIELDS = tuple(column.name for column in COLUMNS if "change" in column.name)


def change_fields(
    rows: Sequence[Mapping[str, Any]], *, seed: int, n_resamples: int = CHANGE_RESAMPLES
) -> dict[tuple[int, str, str], dict[str, Any]]:
    """{row key: its change fields} for every computed row, against the first checkpoint of its curve."""
    computed = [row for row in rows if not is_skipped(row)]
    firsts: dict[tuple[str, str], Mapping[str, Any]] = {}  # each curve's row at its first step
    for row in sorted(computed, key=lambda row: row["step"]):
        firsts.setdefault(row_key(row)[1:], row)
    return {
        row_key(row): row_change(firsts[row_key(row)[1:]], row, seed=seed, n_resamples=n_resamples) for row in computed
    }


def row_change(
    first: Mapping[str, Any], row: Mapping[str, Any], *, seed: int, n_resamples: int = CHANGE_RESAMPLES
) -> dict[str, Any]:
    """The change fields of `row` against `first`, the first row of its curve (`change_fields`)."""
    fields: dict[str, Any] = dict.fromkeys(CHANGE_FIELDS)
    fields["change_reference_step"] = first["step"]
    fields["anisotropy_share_change"] = _difference(row.get("anisotropy_share"), first.get("anisotropy_share"))
    if row is first or row_key(row) == row_key(first):
        zero = {f"{name}_change{suffix}": 0.0 for name, _ in _PAIRED for suffix in ("", "_low", "_high")}
        return {**fields, **zero, "change_n_sequences": len(row.get("sequence_ids") or [])}
    # the sequences both probed, by increasing id, and their positions in each row's per-sequence lists
    where = [
        {sequence: index for index, sequence in enumerate(source.get("sequence_ids") or [])} for source in (first, row)
    ]
    common = sorted(set(where[0]) & set(where[1]))
    if not common:
        return fields
    fields["change_n_sequences"] = len(common)
    confidence = float(row.get("confidence") or 0.95)
    for name, denominator in _PAIRED:
        arrays = []  # the (n, 1) columns of the per-sequence energies at `common`: none with a short list or a hole
        for source, positions in zip((first, row), where, strict=True):
            for key in ("sequence_energies", denominator):
                values = source.get(key) or []
                picked = [
                    values[positions[sequence]] if positions[sequence] < len(values) else None for sequence in common
                ]
                arrays.append(None if None in picked else np.asarray(picked, dtype=np.float64)[:, None])
        if any(array is None for array in arrays):
            continue
        a0, b0, a1, b1 = arrays
        found = paired_change(
            (a0, a1), (b0, b1), n_resamples=n_resamples, confidence=confidence,
            generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        values = (found.change[0], found.low[0], found.high[0], found.p_value[0])
        for suffix, value in zip(("", "_low", "_high", "_p_value"), values, strict=True):
            fields[f"{name}_change{suffix}"] = _difference(float(value), 0)
    return fields


#: The statistics whose change `unpaired_change` gives (a difference, without an interval).
UNPAIRED_CHANGES = ("energy_share", "energy_ratio", "anisotropy_share")


def unpaired_change(first: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """The differences of `UNPAIRED_CHANGES` alone, when nothing pairs `first`'s sequences with `row`'s."""
    fields: dict[str, Any] = dict.fromkeys(CHANGE_FIELDS)
    fields["change_reference_step"] = first["step"]
    for name in UNPAIRED_CHANGES:
        fields[f"{name}_change"] = _difference(row.get(name), first.get(name))
    return fields


def refresh_changes(store: SweepStore, *, seed: int) -> None:
    """Recompute every row's change (a resumed sweep may have gained an earlier first checkpoint)."""
    fields = change_fields(store.rows(), seed=seed)
    store.update_rows(lambda row: {**row, **fields[row_key(row)]} if row_key(row) in fields else row)


def _difference(value: Any, reference: Any) -> float | None:
    """`value - reference` as a float, None when either is no number or the difference is not finite."""
    return None if number(value) is None or number(reference) is None else number(value - reference)
