# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How results show in a notebook: a short `repr` of named values, and an HTML table with every string escaped."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from html import escape
from typing import Any


def number(value: Any, digits: int = 4) -> str:
    """A value as a repr shows it: numbers plainly, floats to `digits` significant digits, the rest as `repr`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))  # numpy's integers too, without their type's name
    return "nan" if math.isnan(value) else f"{float(value):.{digits}g}"


def short_repr(kind: str, fields: Sequence[tuple[str, Any]], *, tail: Sequence[str] = ()) -> str:
    """`kind(name=value, ...; tail; ...)`, each value through `number`."""
    return f"{kind}({'; '.join([', '.join(f'{name}={number(value)}' for name, value in fields), *tail])})"


def html_table(
    title: str, header: Sequence[str] | None, rows: Sequence[Sequence[Any]], *, notes: Sequence[str] = ()
) -> str:
    """A titled HTML table (a header row when `header`), then `notes` as paragraphs; every cell is escaped."""
    head = "" if header is None else "<tr>" + "".join(f"<th>{escape(str(cell))}</th>" for cell in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    said = "".join(f"<p>{escape(line)}</p>" for line in notes)
    return f"<div><strong>{escape(title)}</strong>{said}<table>{head}{body}</table></div>"
