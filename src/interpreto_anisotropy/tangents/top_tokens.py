# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Top-activating tokens of a tangent's directions: the tokens of the texts that lie furthest along each one.

A token's score along direction q_j is s_ij = (h_i - mean h) . q_j; a direction's sign is arbitrary, so both ends
are listed, each token type once per end at its most extreme occurrence, with its context. On the rows the sweep
already read; why not Interpreto's `TopKInputs`: docs/how-to/reading-the-report.md#tangent-directions-top-tokens.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import Any

import torch
from jaxtyping import Float, Int

from ..errors import InvalidInputError
from .subspace import Subspace

__all__ = [
    "TokenInContext",
    "DirectionTokens",
    "top_tokens",
    "TOP_TOKENS",
    "CONTEXT_BEFORE",
    "CONTEXT_AFTER",
    "TOKEN_FIELDS",
]

#: Distinct tokens listed at each end of a direction.
TOP_TOKENS = 5
#: Tokens of context shown before a top token (within its text).
CONTEXT_BEFORE = 4
#: Tokens of context shown after a top token (within its text).
CONTEXT_AFTER = 2


@dataclass(frozen=True)
class TokenInContext:
    """One occurrence of a token: its text, a little context, its score along a direction, and where it is.

    Attributes:
        token: The token, decoded.
        before: The decoded tokens just before it in its text (at most `CONTEXT_BEFORE`).
        after: The decoded tokens just after it (at most `CONTEXT_AFTER`).
        score: s_ij, its projection onto the direction relative to the rows' mean.
        text: Index of its text among the texts read.
        position: Index of the token in its text's tokenisation (special tokens included).
    """

    token: str
    before: str
    after: str
    score: float
    text: int
    position: int

    def to_list(self) -> list[Any]:
        """JSON-ready values, in the order of `TOKEN_FIELDS` (a compact form for files)."""
        return list(astuple(self))

    @classmethod
    def from_list(cls, values: list[Any]) -> TokenInContext:
        """The occurrence `to_list` wrote."""
        return cls(*values)


#: The fields of a `TokenInContext`, in the order of its compact form (`TokenInContext.to_list`).
TOKEN_FIELDS = tuple(field.name for field in fields(TokenInContext))


@dataclass(frozen=True)
class DirectionTokens:
    """The top tokens at both ends of one direction of a subspace.

    Attributes:
        direction: Index j of the direction (column j of the basis).
        variance_share: Share of the rows' variance along the direction: mean_i s_ij^2 / mean_i ||h_i - mean||^2.
        high: The distinct tokens of largest scores, most extreme first.
        low: The distinct tokens of smallest scores, most extreme first.
    """

    direction: int
    variance_share: float
    high: list[TokenInContext]
    low: list[TokenInContext]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (each token as `TokenInContext.to_list`)."""
        ends = {"high": [token.to_list() for token in self.high], "low": [token.to_list() for token in self.low]}
        return {"direction": self.direction, "variance_share": self.variance_share, **ends}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DirectionTokens:
        """The direction `to_dict` wrote."""
        high, low = ([TokenInContext.from_list(token) for token in data[end]] for end in ("high", "low"))
        return cls(int(data["direction"]), float(data["variance_share"]), high, low)


def direction_scores(
    rows: Float[torch.Tensor, "n d"], subspace: Subspace
) -> tuple[Float[torch.Tensor, "n k"], Float[torch.Tensor, " k"]]:
    """Scores s_ij (n, k) of rows (n, d) along each direction (column) of `subspace`, and each direction's variance
    share (k,), float64 on CPU; `InvalidInputError` for rows of another width."""
    if rows.dim() != 2 or rows.shape[1] != subspace.dim:
        raise InvalidInputError(f"Rows of shape {tuple(rows.shape)} for a subspace of R^{subspace.dim}.")
    centred = rows.detach().double().cpu()
    centred = centred - centred.mean(0)
    scores = centred @ subspace.basis.detach().double().cpu()
    total = centred.pow(2).sum(1).mean()
    shares = scores.pow(2).mean(0) / total if total > 0 else torch.zeros(scores.shape[1], dtype=torch.float64)
    return scores, shares


def top_tokens(
    rows: Float[torch.Tensor, "n d"],
    token_ids: Int[torch.Tensor, " n"],
    locations: Int[torch.Tensor, "n 2"],
    subspace: Subspace,
    tokenizer: Any,
    *,
    k: int = TOP_TOKENS,
) -> list[DirectionTokens]:
    """The `k` distinct top tokens at both ends of every direction of `subspace`, with their context.

    Args:
        rows: Activation rows (n, d), text by text and token by token within a text (as the reader gives them).
        token_ids: Their token ids, (n,).
        locations: Their (text index, token position), (n, 2) (`iter_located_token_activations`).
        subspace: The tangent (or any subspace) whose directions are described.
        tokenizer: The model's tokenizer, to decode the tokens.
        k: Distinct tokens per end.

    Returns:
        One `DirectionTokens` per direction, in the basis' order.

    Raises:
        InvalidInputError: No rows, or ids and locations of another length than the rows.

    Examples:
        >>> found = top_tokens(rows, ids, where, tangent, tokenizer)  # doctest: +SKIP
        >>> [token.token for token in found[0].high]  # doctest: +SKIP
        [' return', ' self', ...]
    """
    if rows.shape[0] == 0 or not rows.shape[0] == token_ids.shape[0] == locations.shape[0]:
        raise InvalidInputError(
            f"top_tokens got {rows.shape[0]} rows, {token_ids.shape[0]} ids, {locations.shape[0]} locations."
        )
    scores, shares = direction_scores(rows, subspace)
    ids, where = token_ids.detach().cpu().tolist(), locations.detach().cpu().tolist()

    def decode(index: int, offsets: range) -> str:
        near = [index + offset for offset in offsets if 0 <= index + offset < len(ids)]
        kept = [ids[i] for i in near if where[i][0] == where[index][0]]
        return tokenizer.decode(kept, skip_special_tokens=False, clean_up_tokenization_spaces=False) if kept else ""

    def occurrence(i: int, score: float) -> TokenInContext:
        context = decode(i, range(-CONTEXT_BEFORE, 0)), decode(i, range(1, CONTEXT_AFTER + 1))
        return TokenInContext(decode(i, range(1)), *context, score, int(where[i][0]), int(where[i][1]))

    def end(column: torch.Tensor, descending: bool) -> list[TokenInContext]:
        first: dict[int, int] = {}  # token id -> its first row in score order (ties: the earlier row)
        for index in torch.sort(column, descending=descending, stable=True).indices.tolist():
            first.setdefault(ids[index], index)
        return [occurrence(i, float(column[i])) for i in list(first.values())[:k]]

    return [
        DirectionTokens(j, float(shares[j]), end(scores[:, j], True), end(scores[:, j], False))
        for j in range(scores.shape[1])
    ]
