# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests assert an error's class and what its message names, not its sentences.

A ``pytest.raises``/``pytest.warns`` check matches the option, file, checkpoint, module or column the message names
(and the numbers the library computes), so that rephrasing a message breaks no test. This guard reads every test
module and refuses a ``match=`` string of more than `MAX_WORDS` words, whether written at the call or in a
``parametrize`` table whose column feeds it (``match``, ``message``, ``named``, ``words``, ``allowed``).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAX_WORDS = 8
#: Columns of a parametrize table that hold what a message must match.
MATCH_COLUMNS = {"match", "message", "named", "words", "allowed"}
#: {(file name, first words): why it may stay longer}. Keep it as short as possible.
ALLOWED: dict[tuple[str, str], str] = {}


def _text(node: ast.expr) -> str | None:
    """The words of a literal string or f-string (each replacement field one word); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else " {} " for part in node.values)
    return None


def _table_strings(call: ast.Call) -> list[ast.expr]:
    """The cells of a parametrize table's match columns."""
    names = _text(call.args[0]) if call.args else None
    if names is None and call.args and isinstance(call.args[0], (ast.Tuple, ast.List)):
        names = ",".join(_text(elt) or "" for elt in call.args[0].elts)
    if names is None or len(call.args) < 2 or not isinstance(call.args[1], (ast.List, ast.Tuple)):
        return []
    columns = [i for i, name in enumerate(name.strip() for name in names.split(",")) if name in MATCH_COLUMNS]
    rows = [row for row in call.args[1].elts if isinstance(row, (ast.Tuple, ast.List))]
    return [row.elts[i] for row in rows for i in columns if i < len(row.elts)]


def _match_strings(tree: ast.AST) -> list[ast.expr]:
    """Every literal a `match=` receives directly, or through a parametrize table."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "match":
            found.append(node.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "parametrize":
            found += _table_strings(node)
    return found


def test_no_match_asserts_a_whole_sentence():
    long = []
    for path in sorted(TESTS.glob("*.py")):
        for node in _match_strings(ast.parse(path.read_text(encoding="utf-8"))):
            words = (_text(node) or "").split()
            if len(words) > MAX_WORDS and (path.name, " ".join(words[:3])) not in ALLOWED:
                long.append(f"{path.name}:{node.lineno}: {' '.join(words)!r}")
    assert not long, (
        f"match= strings of more than {MAX_WORDS} words assert a message's prose; match the class and the option, "
        "file, checkpoint or column it names instead:\n" + "\n".join(long)
    )


def test_the_guard_sees_calls_and_tables():
    source = """
@pytest.mark.parametrize(("value", "named"), [(1, "one two three four five six seven eight nine"), (2, "x")])
def test_x(value, named):
    with pytest.raises(InvalidInputError, match=f"a b c d e f g h {value}"):
        pass
"""
    found = [_text(node) for node in _match_strings(ast.parse(source))]
    assert sorted(len(text.split()) for text in found if text) == [1, 9, 9]
