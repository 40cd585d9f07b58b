# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The command line works from the README as written: a built-in corpus, "does not exist" for a missing model,
the valid split-point range before anything loads, help and defaults on every option, a token estimate."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from interpreto_anisotropy import cli
from interpreto_anisotropy.cli import Corpus, build_parser, main


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return commands.choices[name]


@pytest.mark.parametrize("command", ["demo", "sweep", "report"])
def test_every_option_has_help_and_shows_its_default(command):
    parser = _subparser(command)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        assert action.help and len(action.help) > 8, f"{command} {action.option_strings[0]} has no help"
        shown = formatter._get_help_string(action)
        if action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in shown, f"{command} {action.option_strings[0]} hides its default"


def test_a_missing_model_folder_does_not_exist(tmp_path, capsys):
    arguments = ["sweep", "--model", str(tmp_path / "toy"), "--split-point", "1", "--out", str(tmp_path / "o")]
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert f"--model {tmp_path / 'toy'} does not exist" in error and "runs/demo/toy" in error


def test_a_split_point_out_of_range_names_the_range_before_loading(toy_checkpoints, tmp_path, capsys, monkeypatch):
    def no_loading(*args, **kwargs):
        raise AssertionError("the split point must be checked before any checkpoint or text is read")

    monkeypatch.setattr(cli, "_sweep_texts", no_loading)
    arguments = ["sweep", "--model", str(toy_checkpoints.out_dir), "--split-point", "5", "--out", str(tmp_path)]
    assert main(arguments) == 2
    assert re.search(r"--split-point 5\b.*\b2 layers \(0-1\)", capsys.readouterr().err)


def test_a_bad_method_or_objective_is_refused_by_the_parser(capsys):
    for option, value in (("--method", "lda"), ("--objective", "mse")):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o", option, value])
        assert f"argument {option}: invalid choice: '{value}'" in capsys.readouterr().err


def test_texts_and_corpus_are_alternatives():
    args = build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o"])
    assert args.texts is None and args.corpus is None  # the built-in corpus then
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o", "--texts", "t",
                                   "--corpus", "stdlib"])  # fmt: skip


def test_the_stdlib_corpus_is_as_small_as_the_demos():
    fit, probe = cli.corpus_texts(Corpus.STDLIB)
    assert len(fit) == cli.CORPUS_FIT_TEXTS and len(probe) == cli.CORPUS_PROBE_TEXTS
    assert max(map(len, fit + probe)) <= cli.CORPUS_MAX_CHARS
    assert not set(fit) & set(probe)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")
def test_a_sweep_with_the_built_in_corpus_prints_an_estimate_first(toy_checkpoints, tmp_path, capsys, monkeypatch):
    fit, probe = cli.corpus_texts(Corpus.STDLIB)
    monkeypatch.setattr(cli, "corpus_texts", lambda corpus, progress=False: (fit[:12], probe[:6]))
    out = tmp_path / "sweep"
    arguments = ["sweep", "--model", str(toy_checkpoints.out_dir), "--split-point", "1", "--corpus", "stdlib"]
    arguments += ["--nb-concepts", "4", "--n-controls", "4", "--out", str(out), "--no-progress", "--no-report"]
    assert main(arguments) == 0
    printed = capsys.readouterr()
    first = printed.out.splitlines()[0]
    assert first.startswith(f"sweep: {len(toy_checkpoints.checkpoints)} checkpoints; per checkpoint about ")
    assert "probed tokens" in first and "fit activations" in first
    n = len(toy_checkpoints.checkpoints)
    said = [line for line in printed.out.splitlines() if line.startswith("sweep: ")]
    assert said[1].startswith(f"sweep: {n} checkpoints to compute, after the reference tangent is fitted on ")
    assert said[1].endswith("the time per checkpoint is measured on the first one")
    assert re.fullmatch(
        rf"sweep: about [\d.]+ s per checkpoint, [\d.]+ (s|min) for the {n - 1} checkpoints left", said[2]
    )
    assert json.loads((out / "config.json").read_text())["n_fit_texts"] == 12
    assert "Loading weights" not in printed.err and "sequence length is longer" not in printed.err
