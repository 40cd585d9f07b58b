# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The one path from data to the HTML the package writes: Jinja2 templates with autoescaping on.

The templates (``templates/*.html.j2``) and the style sheet (``templates/report.css``) are package data. Every value
a template shows, from the rows, the settings, the top-tokens files or the model's config, is escaped by Jinja2's
autoescape, in text and in attribute values alike (titles, alt texts, ids), so that a crafted value
(``"><script>...``) is shown as text, never run. No template marks a value safe (no ``|safe``, no ``Markup``): the
markup of the page is the templates' own text. Undefined names are errors, not empty strings.

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
