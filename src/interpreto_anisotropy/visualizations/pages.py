# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The one path from data to the HTML the package writes: Jinja2 templates with autoescaping on.

Examples:
    >>> render("top_tokens.html.j2", top_tokens=[], token_headers=[])[:40]
    '<p>No top tokens are saved in this sweep'
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

__all__ = ["render"]


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("interpreto_anisotropy.visualizations", "templates"),
        autoescape=True,  # every template is HTML (".html.j2", which select_autoescape(["html"]) would not match)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, **context: Any) -> str:
    """A template of ``visualizations/templates`` rendered with `context`, every value HTML-escaped.

    Args:
        template: The template's file name (``"report.html.j2"``).
        **context: The values it shows: strings, numbers, and lists and dicts of them.

    Returns:
        The HTML text.
    """
    return _environment().get_template(template).render(**context)
