# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The ``rows.columns.csv`` file a report writes next to ``rows.csv``: what each of its columns means.

Examples:
    >>> write_column_notes("runs/toy/report/rows.columns.csv", ["step", "energy_share"])  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from ..commons.files import write_atomically
from ..results.schema import describe

__all__ = ["write_column_notes", "COLUMNS_CSV_FILE"]

#: The file of column notes written next to a report's ``rows.csv``.
COLUMNS_CSV_FILE = "rows.columns.csv"


def write_column_notes(path: str | Path, names: Iterable[str]) -> Path:
    """Write a CSV with one line per column of `names`: name, meaning, unit, formula, concept section.

    Args:
        path: The file to write (atomically).
        names: The columns, in the order of the CSV they describe.

    Returns:
        The path written.
    """
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["column", "meaning", "unit", "formula", "defined_in"])
    for name in names:
        column = describe(name)
        if column is None:
            writer.writerow([name, "", "", "", ""])
        else:
            where = f"docs/concepts.md#{column.concept}" if column.concept else ""
            writer.writerow([name, column.meaning, column.unit.value, column.formula, where])
    return write_atomically(path, text.getvalue())
