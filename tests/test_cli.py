# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The `interpreto-anisotropy` command line: help, sweep, report and clear errors."""

from __future__ import annotations

import json

import pytest

from interpreto_anisotropy.cli import build_parser, main, read_texts
from interpreto_anisotropy.errors import EmptyInputError, InvalidInputError


@pytest.mark.parametrize("command", [[], ["demo"], ["sweep"], ["report"]])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: interpreto-anisotropy" in capsys.readouterr().out


def test_read_texts_formats(tmp_path):
    (tmp_path / "a.txt").write_text("first text\n\nsecond text\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "one"}) + "\n" + json.dumps({"text": "two"}) + "\n")
    (tmp_path / "c.json").write_text(json.dumps(["x", "y", " "]))
    assert read_texts(tmp_path / "a.txt") == ["first text", "second text"]
    assert read_texts(tmp_path / "b.jsonl") == ["one", "two"]
    assert read_texts(tmp_path / "c.json") == ["x", "y"]
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(EmptyInputError, match="empty"):
        read_texts(tmp_path / "empty.txt")
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_texts(tmp_path / "missing.txt")


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_sweep_and_report_commands(toy_checkpoints, fit_texts, texts, tmp_path, capsys):
    (tmp_path / "fit.txt").write_text("\n".join(t.replace("\n", " ") for t in fit_texts[:10]))
    (tmp_path / "probe.txt").write_text("\n".join(t.replace("\n", " ") for t in texts[:8]))
    out = tmp_path / "sweep"
    arguments = ["sweep", "--model", str(toy_checkpoints.out_dir), "--split-point", "1", "--texts"]
    arguments += [str(tmp_path / "fit.txt"), "--probe-texts", str(tmp_path / "probe.txt"), "--nb-concepts", "4"]
    arguments += [
        "--n-controls",
        "4",
        "--max-fit-tokens",
        "800",
        "--out",
        str(out),
        "--no-progress",
        "--device",
        "cpu",
        "--autocast",
        "bf16",
    ]
    assert main(arguments) == 0
    assert json.loads((out / "config.json").read_text())["autocast_dtype"] == "bfloat16"
    printed = capsys.readouterr().out
    assert "ratio" in printed and (out / "report" / "index.html").exists()
    rows = (out / "rows.jsonl").read_text().splitlines()
    assert len(rows) == len(toy_checkpoints.checkpoints)
    (out / "report" / "index.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report" / "index.html").exists()


def test_user_mistakes_print_a_clear_error_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    assert "not a sweep's results directory" in capsys.readouterr().err
    arguments = ["sweep", "--model", str(tmp_path / "no-such-*"), "--split-point", "1"]
    assert main([*arguments, "--texts", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "error:" in capsys.readouterr().err
    assert main(["sweep", "--pythia", "160m", "--split-point", "1", "--texts", "t", "--out", "o"]) == 2
    assert "--steps" in capsys.readouterr().err


def test_parser_reads_split_points_and_steps():
    args = build_parser().parse_args(
        [
            "sweep",
            "--pythia",
            "160m",
            "--steps",
            "0,1000",
            "--split-point",
            "3",
            "gpt_neox.layers.5",
            "--texts",
            "t",
            "--out",
            "o",
        ]
    )
    assert args.steps == [0, 1000] and args.split_point == [3, "gpt_neox.layers.5"]
