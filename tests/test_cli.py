# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The `interpreto-anisotropy` command line: help, sweep, report and clear errors."""

from __future__ import annotations

import json
import re

import pytest

from interpreto_anisotropy.cli import build_parser, main, read_texts
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.results.table import SweepResult


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
    with pytest.raises(InvalidInputError, match=re.escape(str(tmp_path / "empty.txt"))):
        read_texts(tmp_path / "empty.txt")
    with pytest.raises(InvalidInputError, match=re.escape(str(tmp_path / "missing.txt"))):
        read_texts(tmp_path / "missing.txt")


BAD_TEXTS_FILES = {
    "binary.txt": (b"first text\n\xff\xfe\x00binary", r"binary\.txt.*line 2"),
    "no-field.jsonl": (b'{"text": "a"}\n{"body": "b"}\n', r'Line 2 of .*no-field\.jsonl.*"text"'),
    "torn.jsonl": (b'{"text": "a"}\n\n{"text": \n', r"Line 3 of .*torn\.jsonl"),
    "list-line.jsonl": (b'["a"]\n', r'Line 1 of .*list-line\.jsonl.*"text"'),
    "number.jsonl": (b'{"text": 3}\n', r'Line 1 of .*number\.jsonl.*"text"'),
    "null.jsonl": (b'{"text": null}\n', r'Line 1 of .*null\.jsonl.*"text"'),
    "torn.json": (b'["a", ', r"torn\.json.*line 1, column 7"),
    "object.json": (b'{"text": "a"}', r"object\.json"),
    "numbers.json": (b'["a", 2]', r"Item 1 of .*numbers\.json"),
}


@pytest.mark.parametrize("name", sorted(BAD_TEXTS_FILES))
def test_a_malformed_texts_file_is_our_error_naming_it(tmp_path, name):
    content, message = BAD_TEXTS_FILES[name]
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InvalidInputError, match=message) as error:
        read_texts(tmp_path / name)
    assert ".json" in str(error.value)  # the formats expected
    assert "\n" not in str(error.value)


def test_texts_files_with_a_byte_order_mark_or_a_line_separator_in_a_text(tmp_path):
    (tmp_path / "bom.txt").write_bytes("\ufefffirst\nsecond\n".encode())
    (tmp_path / "separator.jsonl").write_text(json.dumps({"text": "a\u2028b"}, ensure_ascii=False) + "\n")
    assert read_texts(tmp_path / "bom.txt") == ["first", "second"]
    assert read_texts(tmp_path / "separator.jsonl") == ["a\u2028b"]
    with pytest.raises(InvalidInputError, match=re.escape(str(tmp_path))):
        read_texts(tmp_path)


def test_a_malformed_texts_file_ends_the_command_with_one_line(tmp_path, capsys):
    (tmp_path / "checkpoint-0").mkdir()
    (tmp_path / "checkpoint-0" / "config.json").write_text("{}")
    (tmp_path / "texts.jsonl").write_text('{"body": "a"}\n')
    arguments = ["sweep", "--model", str(tmp_path), "--split-point", "1", "--texts", str(tmp_path / "texts.jsonl")]
    assert main([*arguments, "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert error.startswith("interpreto-anisotropy sweep: error: Line 1 of ") and "texts.jsonl" in error


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
    assert printed.rstrip("\n").endswith(SweepResult.load(out).summary())  # the verdict is the last thing printed
    rows = (out / "rows.jsonl").read_text().splitlines()
    assert len(rows) == len(toy_checkpoints.checkpoints)
    (out / "report" / "index.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report" / "index.html").exists()


def test_user_mistakes_print_a_clear_error_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "config.json" in err
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


SWEEP = ["sweep", "--model", "runs/toy", "--split-point", "1", "--texts", "t.txt", "--out", "o"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ([*SWEEP, "--max-fit-tokens", "0"], r"--max-fit-tokens.*'0'"),
        ([*SWEEP, "--max-tokens", "-5"], r"--max-tokens.*'-5'"),
        ([*SWEEP, "--batch-size", "two"], r"--batch-size.*'two'"),
        ([*SWEEP, "--n-controls", "0"], r"--n-controls.*'0'"),
        ([*SWEEP, "--nb-concepts", "0"], r"--nb-concepts.*'0'"),
        ([*SWEEP, "--seed", "-1"], r"--seed.*\[0, 2\*\*32\).*'-1'"),
        ([*SWEEP, "--seed", str(2**32)], r"--seed.*\[0, 2\*\*32\)"),
        ([*SWEEP, "--early-fraction", "0"], r"--early-fraction.*\(0, 1\].*'0'"),
        ([*SWEEP, "--early-fraction", "nan"], r"--early-fraction.*\(0, 1\]"),
        ([*SWEEP, "--steps", "0,-1000"], r"--steps.*comma-separated"),
        (["demo", "--steps", "0"], r"--steps.*'0'"),
        (["demo", "--n-controls", "0"], r"--n-controls.*'0'"),
    ],
)
def test_an_option_out_of_range_is_refused_naming_the_flag(arguments, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == 2
    assert re.search(named, capsys.readouterr().err)


def test_a_demo_rank_without_room_for_controls_is_refused_before_training(tmp_path, capsys):
    assert main(["demo", "--nb-concepts", "32", "--out", str(tmp_path / "demo"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "--nb-concepts=32 in R^64 (d=64)" in error and "--nb-concepts <= 31" in error
    assert not (tmp_path / "demo").exists()


def test_options_in_range_are_parsed():
    arguments = [*SWEEP, "--max-fit-tokens", "1", "--seed", str(2**32 - 1), "--early-fraction", "1", "--steps", "0,8"]
    args = build_parser().parse_args(arguments)
    assert (args.max_fit_tokens, args.seed, args.early_fraction, args.steps) == (1, 2**32 - 1, 1.0, [0, 8])
    assert (args.max_tokens, args.batch_size, args.n_controls, args.nb_concepts) == (None, 8, 20, 16)


@pytest.mark.slow
def test_demo_trains_with_a_live_probe_and_reports_it_next_to_the_sweep(tmp_path, monkeypatch, capsys):
    """A 4-step demo (a window every step) on a few texts: live rows next to the sweep's, one row per step, and the
    report's live figure drawn from them."""
    import interpreto_anisotropy as ia

    corpus = ia.demo.load_corpus
    monkeypatch.setattr(ia.demo, "load_corpus", lambda split, **kwargs: corpus(split, **kwargs)[:8])
    assert main(["demo", "--steps", "4", "--out", str(tmp_path), "--n-controls", "5", "--no-progress"]) == 0
    assert "4 live windows" in capsys.readouterr().out
    live, sweep = ia.SweepResult.load(tmp_path / "live"), ia.SweepResult.load(tmp_path / "sweep")
    assert live.steps == [0, 1, 2, 3] and {row["source"] for row in live.rows} == {"live"}
    assert live.split_points == sweep.split_points and live.config["seed"] == sweep.config["seed"] == 0
    assert (tmp_path / "report" / "figures" / "live.png").exists()
    assert 'id="figure-live"' in (tmp_path / "report" / "index.html").read_text()
