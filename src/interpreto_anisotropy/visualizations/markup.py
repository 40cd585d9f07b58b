# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The one escaping path of the HTML the package writes: every value from the rows, the settings, the top-tokens
files or the model's config reaches the page through `escape`, in text and in attribute values alike (titles, alt
texts, ids), so that a crafted value (``"><script>...``) is shown as text, never run.

Examples:
    >>> escape('"><script>alert(1)</script>')
    '&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;'
    >>> escape(3)
    '3'
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["escape"]


def escape(value: Any) -> str:
    """`value` as text, HTML-escaped with its quotes (``&``, ``<``, ``>``, ``"``, ``'``): safe in an element's text
    and inside a single- or double-quoted attribute.

    Args:
        value: Any value; a non-string is shown as ``str(value)``.

    Returns:
        The escaped text.
    """
    return html.escape(value if isinstance(value, str) else str(value), quote=True)
