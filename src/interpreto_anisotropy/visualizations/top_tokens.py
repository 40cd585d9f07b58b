# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The report's section on what the tangent directions mean: their top-activating tokens, in context.

For each split point, at the last checkpoint whose top tokens the sweep saved (``top_tokens/<split point>/
step-<step>.json``, see `interpreto_anisotropy.tangents.top_tokens`), one table per tangent kind: a row per direction
with its share of the activations' variance and the distinct tokens at both of its ends, each shown in its context
with the token highlighted. Every text from the files is HTML-escaped.

Examples:
    >>> html_text = top_tokens_section(ia.SweepResult.load("runs/toy/sweep"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tangents.top_tokens import DirectionTokens, TokenInContext
from .markup import escape

if TYPE_CHECKING:  # pragma: no cover
    from ..sweeps.result import SweepResult

__all__ = ["top_tokens_section", "TOP_TOKENS_STYLE"]

#: CSS of the section (added to the report's style sheet).
TOP_TOKENS_STYLE = """
table.tokens td { text-align: left; white-space: normal; vertical-align: top; }
table.tokens td.number { text-align: right; white-space: nowrap; }
span.context { white-space: pre; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.95em;
               display: inline-block; margin: 0.1em 0.4em 0.1em 0; padding: 0 0.3em; color: #666;
               border: 1px solid #e4e4e4; border-radius: 3px; background: #fff; }
span.context mark { background: #ffe08a; color: #000; padding: 0 0.1em; }
details.tokens { margin: 0.6em 0; }
details.tokens summary { cursor: pointer; }
"""

_HEADERS = (
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
    layers = list(dict.fromkeys(row.get("layer", row.get("split_point")) for row in result.rows))
    found = [(layer, result.top_tokens(layer)) for layer in layers]
    saved = [(layer, content) for layer, content in found if content is not None]
    if not saved:
        return (
            "<p>No top tokens are saved in this sweep's results folder (results written before the sweep saved "
            "them, or a table that was not loaded from a folder): rerun the sweep into a new folder to see them.</p>"
        )
    parts = [_explanation(), _definitions()]
    for _, content in saved:
        parts.append(
            f"<h3>Split point {escape(content['split_point'])}, checkpoint at step {escape(content['step'])}"
            f" ({escape(_thousands(content['n_rows']))} fit tokens ranked)</h3>"
        )
        for kind, directions in content["tangents"].items():
            parts.append(_kind_table(kind, directions, open_=kind == next(iter(content["tangents"]))))
    return "\n".join(parts)


def _explanation() -> str:
    return (
        '<div class="explain"><p>What each tangent direction q<sub>j</sub> picks out in the texts: every fit token '
        "of the checkpoint (the first tokens of the fit texts, the sample of the activation metrics) gets the score "
        "s = (h - mean) &middot; q<sub>j</sub>, its activation's coordinate along the direction relative to the "
        "tokens' mean. A direction's sign is arbitrary (a PCA or SVD eigenvector is defined up to sign), so both ends "
        "are listed: <b>+</b> the largest scores, <b>-</b> the smallest. Each token type appears once per end, at its "
        "most extreme occurrence, in its context with the token <mark>highlighted</mark> (&#8629; a line break). The "
        "early tangent's directions are read on this checkpoint's activations. Every checkpoint's top tokens are in "
        "<code>top_tokens/&lt;split point&gt;/step-&lt;step&gt;.json</code> and "
        "<code>SweepResult.top_tokens(split_point, step=...)</code>.</p></div>"
    )


def _definitions() -> str:
    """The token tables' columns defined, in the report's definitions style (their headers' tooltips say the same)."""
    body = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td>{escape(meaning)}</td></tr>" for name, meaning in _HEADERS
    )
    return (
        '<details class="tokens"><summary>What the columns of the token tables mean</summary><div class="scroll">'
        '<table class="definitions"><thead><tr><th>column</th><th>meaning</th></tr></thead>'
        f"<tbody>{body}</tbody></table></div></details>"
    )


def _kind_table(kind: str, directions: list[DirectionTokens], *, open_: bool) -> str:
    header = "".join(f'<th class="text" title="{escape(tip)}">{escape(name)}</th>' for name, tip in _HEADERS)
    body = "".join(
        f'<tr><td class="number">{escape(direction.direction)}</td>'
        f'<td class="number">{escape(format(direction.variance_share, ".3f"))}</td>'
        f"<td>{_contexts(direction.high)}</td><td>{_contexts(direction.low)}</td></tr>"
        for direction in directions
    )
    title = _KIND_TITLES.get(kind, f"{kind} tangent")
    return (
        f'<details class="tokens"{" open" if open_ else ""}><summary>{escape(title)}: {len(directions)} '
        f'directions</summary><div class="scroll"><table class="tokens"><thead><tr>{header}</tr></thead>'
        f"<tbody>{body}</tbody></table></div></details>"
    )


def _contexts(tokens: list[TokenInContext]) -> str:
    return "".join(
        f'<span class="context" title="{escape(_token_title(token))}">'
        f"{_visible(token.before)}<mark>{_visible(token.token)}</mark>{_visible(token.after)}</span>"
        for token in tokens
    )


def _token_title(token: TokenInContext) -> str:
    """A token's tooltip: its score, its text and its position (escaped by the caller, as every attribute)."""
    return f"score {token.score:.4g}, text {token.text}, token {token.position}"


def _thousands(count: Any) -> str:
    return f"{count:,}" if isinstance(count, int) else str(count)


def _visible(text: str) -> str:
    """Escaped text with line breaks and tabs shown as arrows (the context stays on one line)."""
    return (
        escape(text).replace("\r\n", "\u21b5").replace("\n", "\u21b5").replace("\r", "\u21b5").replace("\t", "\u2192")
    )
