"""The report's section on what the tangent directions mean: their top-activating tokens, in context.

Examples:
    >>> html_text = top_tokens_section(ia.SweepResult.load("runs/toy/sweep"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tangents.top_tokens import DirectionTokens, TokenInContext
from .pages import render

if TYPE_CHECKING:  # pragma: no cover
    from ..results.table import SweepResult

__all__ = ["top_tokens_section", "top_tokens_context", "top_tokens_tables", "TOKEN_HEADERS"]

#: The token tables' columns: name, and meaning (their headers' tooltips and the section's definitions).
TOKEN_HEADERS = (
    ("direction", "Index j of the direction: column j of the tangent's orthonormal basis Q."),
    (
        "variance",
        "Share of the sampled activations' variance along the direction: mean of s^2 over the tokens, over the mean "
        "squared distance of the activations to their mean. Unit: fraction of 1.",
    ),
    (
        "+ end: largest scores",
        "The distinct tokens with the largest score s = (h - mean) . q_j, most extreme first, each at its most "
        "extreme occurrence and shown in its text (highlighted). Hover for the score.",
    ),
    (
        "- end: smallest scores",
        "The distinct tokens with the smallest score s = (h - mean) . q_j (the other end of the direction, whose "
        "sign is arbitrary), most extreme first. Hover for the score.",
    ),
)

_KIND_TITLES = {
    "early": "early tangent (the reference fitted on the early checkpoints)",
    "each": "each tangent (refitted on this checkpoint)",
    "given": "given tangent (the user's subspace)",
}


def top_tokens_section(result: SweepResult) -> str:
    """The section's HTML: an explanation, then per split point one table per tangent kind (or why there is none).

    Args:
        result: The sweep (loaded from its results folder: the top tokens are read from there).

    Returns:
        HTML, every text from the files escaped.

    Raises:
        ResultsStoreError: A top-tokens file that cannot be read.
    """
    return render("top_tokens.html.j2", **top_tokens_context(result))


def top_tokens_context(result: SweepResult) -> dict[str, Any]:
    """What ``top_tokens.html.j2`` shows: the tables (`top_tokens_tables`) and their columns (`TOKEN_HEADERS`)."""
    headers = [{"name": name, "meaning": meaning} for name, meaning in TOKEN_HEADERS]
    return {"top_tokens": top_tokens_tables(result), "token_headers": headers}


def top_tokens_tables(result: SweepResult) -> list[dict[str, Any]]:
    """The token tables as plain data, texts unescaped (the template escapes them).

    Args:
        result: The sweep (loaded from its results folder).

    Returns:
        One dict per split point with saved top tokens: ``split_point``, ``step``, ``n_rows`` (texts) and ``kinds``,
        one per tangent kind: ``title`` and ``directions``, each ``direction``, ``variance`` (texts), ``high`` and
        ``low``: its tokens, each ``title`` (the tooltip), ``before``, ``token`` and ``after`` (line breaks shown as
        arrows). Empty when the folder holds none.

    Raises:
        ResultsStoreError: A top-tokens file that cannot be read.
    """
    layers = list(dict.fromkeys(row.get("layer", row.get("split_point")) for row in result.rows))
    found = [result.top_tokens(layer) for layer in layers]
    return [
        {
            "split_point": str(content["split_point"]),
            "step": str(content["step"]),
            "n_rows": _thousands(content["n_rows"]),
            "kinds": [
                {"title": _KIND_TITLES.get(kind, f"{kind} tangent"), "directions": list(map(_direction, directions))}
                for kind, directions in content["tangents"].items()
            ],
        }
        for content in found
        if content is not None
    ]


def _direction(direction: DirectionTokens) -> dict[str, Any]:
    return {
        "direction": str(direction.direction),
        "variance": format(direction.variance_share, ".3f"),
        "high": list(map(_token, direction.high)),
        "low": list(map(_token, direction.low)),
    }


def _token(token: TokenInContext) -> dict[str, str]:
    """A token in its context, and its tooltip: its score, its text and its position."""
    return {
        "title": f"score {token.score:.4g}, text {token.text}, token {token.position}",
        "before": _visible(token.before),
        "token": _visible(token.token),
        "after": _visible(token.after),
    }


def _thousands(count: Any) -> str:
    return f"{count:,}" if isinstance(count, int) else str(count)


def _visible(text: str) -> str:
    """The text with line breaks and tabs shown as arrows (the context stays on one line)."""
    return text.replace("\r\n", "\u21b5").replace("\n", "\u21b5").replace("\r", "\u21b5").replace("\t", "\u2192")
