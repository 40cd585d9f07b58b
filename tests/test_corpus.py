# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The toy corpus: harvest rules (on a fake standard library), splits, determinism and the disk cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interpreto_anisotropy.demo import corpus
from interpreto_anisotropy.demo.corpus import CACHE_ENV_VAR, corpus_cache_path, default_cache_dir, load_corpus
from interpreto_anisotropy.errors import EnvironmentWarning, InvalidInputError

LONG = "This sentence is long enough to pass the minimum length filter of the corpus. "


def _write(root: Path, relative: str, source: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")


@pytest.fixture
def fake_stdlib(tmp_path, monkeypatch):
    """A small fake standard library, and a fresh cache folder; the in-memory cache is emptied."""
    root = tmp_path / "stdlib"
    _write(root, "alpha.py", f'"""Module alpha. {LONG}"""\n\ndef f():\n    """Function f. {LONG}"""\n')
    _write(
        root,
        "pkg/beta.py",
        f'class B:\n    """Class B. {LONG}"""\n\n    async def m(self):\n        """Method m. {LONG}"""\n'
        f"# Comment block line one {LONG}\n# line two.\nx = 1\n",
    )
    _write(root, "pkg/duplicate.py", f'"""Module alpha. {LONG}"""\n')  # same text as alpha's: kept once
    _write(root, "pkg/short.py", '"""Too short."""\n')
    _write(root, "pkg/long.py", '"""' + "\n\n".join(f"Paragraph {i}. {LONG}" for i in range(60)) + '"""\n')
    _write(root, "broken.py", '"""Never read: this file does not parse."""\ndef (:\n')
    for skipped in ("test/test_x.py", "idlelib/x.py", "site-packages/pkg/x.py", "pkg/tests/x.py", "test_top.py"):
        _write(root, skipped, f'"""Skipped {skipped}. {LONG}"""\n')
    monkeypatch.setattr(corpus, "_stdlib_dir", lambda: root.resolve())
    monkeypatch.setattr(corpus, "_MEMORY", {})
    return root, tmp_path / "cache"


def test_harvest_reads_docstrings_and_skips_tests_and_non_prose(fake_stdlib):
    _, cache_dir = fake_stdlib
    texts = load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False)
    starts = sorted(t.split(".")[0] for t in texts)
    assert starts == ["Class B", "Function f", "Method m", "Module alpha", "Paragraph 0"]
    assert not any("Skipped" in t or "Never read" in t or "Too short" in t for t in texts)
    capped = next(t for t in texts if t.startswith("Paragraph"))
    assert len(capped) <= corpus._MAX_TEXT_CHARS and capped.endswith(".")


def test_comments_are_harvested_only_when_asked(fake_stdlib):
    _, cache_dir = fake_stdlib
    with_comments = load_corpus("all", min_chars=0, include_comments=True, cache_dir=cache_dir, progress=False)
    assert any(t.startswith("Comment block line one") and t.endswith("line two.") for t in with_comments)
    without = load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False)
    assert not any("Comment block" in t for t in without)
    assert corpus_cache_path(include_comments=True, cache_dir=cache_dir).is_file()


def test_cache_is_written_atomically_and_reused(fake_stdlib, monkeypatch):
    root, cache_dir = fake_stdlib
    first = load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False)
    cache_file = corpus_cache_path(cache_dir=cache_dir)
    assert cache_file.is_file()
    assert [p.name for p in cache_dir.iterdir()] == [cache_file.name]  # no temporary file left
    assert json.loads(cache_file.read_text())["texts"]

    # From disk: new sources are not read again.
    _write(root, "gamma.py", f'"""Module gamma. {LONG}"""\n')
    monkeypatch.setattr(corpus, "_MEMORY", {})
    assert load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False) == first


def test_corrupted_cache_is_harvested_again(fake_stdlib, monkeypatch):
    _, cache_dir = fake_stdlib
    first = load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False)
    corpus_cache_path(cache_dir=cache_dir).write_text("{not json")
    monkeypatch.setattr(corpus, "_MEMORY", {})
    assert load_corpus("all", min_chars=0, cache_dir=cache_dir, progress=False) == first
    assert json.loads(corpus_cache_path(cache_dir=cache_dir).read_text())["texts"]


def test_unwritable_cache_only_warns(fake_stdlib, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.warns(EnvironmentWarning, match=rf"{re.escape(str(a_file / 'cache'))}.*INTERPRETO_ANISOTROPY_CACHE"):
        texts = load_corpus("all", min_chars=0, cache_dir=a_file / "cache", progress=False)
    assert len(texts) == 5


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    assert corpus_cache_path().parent == tmp_path / "elsewhere"
    monkeypatch.delenv(CACHE_ENV_VAR)
    assert default_cache_dir() == Path.home() / ".cache" / "interpreto_anisotropy"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"split": "dev"}, "split.*'dev'"),
        ({"max_texts": -1}, "max_texts"),
        ({"max_texts": 2.5}, "max_texts"),
        ({"min_chars": None}, "min_chars"),
    ],
)
def test_bad_arguments_raise_our_error(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        load_corpus(**kwargs)


# The real corpus (the standard library of this Python), harvested once per machine and cached.


def test_real_corpus_splits_are_disjoint_and_cover_all():
    splits = {name: load_corpus(name, progress=False) for name in ("train", "fit", "probe")}
    everything = load_corpus("all", progress=False)
    assert sum(map(len, splits.values())) == len(everything)
    assert set().union(*map(set, splits.values())) == set(everything)
    assert len(splits["train"]) > 6 * len(splits["fit"]) > 0 and len(splits["probe"]) > 0
    assert len(everything) > 2000 and all(isinstance(t, str) and len(t) >= 64 for t in everything)
    assert len(everything) == len(set(everything))


def test_real_corpus_max_texts_and_min_chars():
    fit = load_corpus("fit", progress=False)
    assert load_corpus("fit", max_texts=10, progress=False) == fit[:10]
    assert load_corpus("fit", max_texts=0, progress=False) == []
    longer = load_corpus("fit", min_chars=500, progress=False)
    assert longer == [t for t in fit if len(t) >= 500]


def test_real_corpus_cached_call_reads_the_cache_and_returns_a_fresh_list(monkeypatch):
    load_corpus("train", progress=False)  # harvested (first run on this machine) or read
    monkeypatch.setattr(corpus, "_MEMORY", {})  # force a read from the disk cache

    def no_harvest(*args, **kwargs):
        raise AssertionError("the cached corpus was harvested again")

    monkeypatch.setattr(corpus, "_harvest", no_harvest)
    texts = load_corpus("train", progress=False)
    assert texts
    texts.clear()
    assert load_corpus("train", progress=False)


def test_no_test_or_idle_files_in_real_corpus():
    sources = corpus._source_files(corpus._stdlib_dir())
    relative = [p.relative_to(corpus._stdlib_dir()).as_posix() for p in sources]
    assert relative == sorted(relative) and len(relative) > 100
    assert not any(part in {"test", "tests", "idlelib", "site-packages"} for r in relative for part in r.split("/"))


def test_fresh_harvests_of_real_sources_are_identical(tmp_path, monkeypatch):
    email_package = corpus._stdlib_dir() / "email"
    monkeypatch.setattr(corpus, "_stdlib_dir", lambda: email_package)
    harvests = []
    for name in ("first", "second"):
        monkeypatch.setattr(corpus, "_MEMORY", {})
        harvests.append(load_corpus("all", cache_dir=tmp_path / name, progress=False))
    assert harvests[0] == harvests[1] and len(harvests[0]) > 50
    assert corpus_cache_path(cache_dir=tmp_path / "second").read_bytes() == (
        corpus_cache_path(cache_dir=tmp_path / "first").read_bytes()
    )
