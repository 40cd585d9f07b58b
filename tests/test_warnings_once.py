# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep says each warning once, naming the checkpoints it concerns, and the CLI prints it as one line (issue 39:
the demo printed the same 400-character `DegenerateStatisticsWarning` 16 times, with source paths)."""

from __future__ import annotations

import re
import warnings

import interpreto_anisotropy as ia
from interpreto_anisotropy.cli import main
from interpreto_anisotropy.errors import DegenerateStatisticsWarning
from interpreto_anisotropy.sweeps.runner import SaidOnce

SETTINGS = {"split_point": 1, "nb_concepts": 3, "n_controls": 3, "seed": 0, "max_fit_tokens": 400, "progress": False}
SAID_FOR = re.compile(r" \[said once for: (.*)\]$")


def _said(caught: list[warnings.WarningMessage]) -> list[tuple[type[Warning], str, list[str]]]:
    """(category, message without its label, the names the label gives) of each warning caught."""
    said = []
    for item in caught:
        text = str(item.message)
        label = SAID_FOR.search(text)
        said.append((item.category, SAID_FOR.sub("", text), label.group(1).split(", ") if label else []))
    return said


def test_a_sweep_says_each_warning_once_with_the_checkpoints_it_concerns(toy_checkpoints, fit_texts, texts, tmp_path):
    checkpoints = [c for c in ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*")) if c.step <= 4]
    sweep = ia.CheckpointSweep(
        checkpoints, results_dir=tmp_path / "sweep", texts=fit_texts[:8], probe_texts=texts[:6], **SETTINGS
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning raised, none left out as said before at its place
        sweep.run()
    said = _said(caught)
    keys = [(category, text) for category, text, _ in said]
    assert len(keys) == len(set(keys)), keys  # no warning twice
    few = [names for category, text, names in said if category is DegenerateStatisticsWarning and "6 probe" in text]
    assert few == [[checkpoint.name for checkpoint in checkpoints]]  # once, naming every checkpoint it concerns
    assert all(names for _, _, names in said)  # each one says what it concerns


def test_said_once_keeps_distinct_messages_and_the_place_of_the_first():
    said = SaidOnce()
    for name, value in (("a", 1), ("b", 2), ("c", 1)):
        with said.about(name):
            warnings.warn(f"value {value}", UserWarning, stacklevel=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        said.say()
        said.say()  # said once: nothing is left to say
    assert [str(item.message) for item in caught] == ["value 1 [said once for: a, c]", "value 2 [said once for: b]"]
    assert {item.filename for item in caught} == {__file__}


def test_the_cli_prints_each_warning_as_one_line_without_source_paths(
    toy_checkpoints, fit_texts, texts, tmp_path, capsys
):
    (tmp_path / "fit.txt").write_text("\n".join(t.replace("\n", " ") for t in fit_texts[:10]))
    (tmp_path / "probe.txt").write_text("\n".join(t.replace("\n", " ") for t in texts[:6]))
    arguments = ["sweep", "--model", str(toy_checkpoints.out_dir), "--split-point", "1", "--texts"]
    arguments += [str(tmp_path / "fit.txt"), "--probe-texts", str(tmp_path / "probe.txt"), "--nb-concepts", "3"]
    arguments += ["--n-controls", "3", "--max-fit-tokens", "400", "--out", str(tmp_path / "sweep"), "--no-progress"]
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as a plain `python` run shows them
        assert main(arguments) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    warned = [line for line in lines if line.startswith("interpreto-anisotropy sweep: warning: ")]
    assert any("DegenerateStatisticsWarning: The interval of the energy share rests on 6" in line for line in warned)
    assert warned == lines  # nothing else: no source line, no path
    assert not any(".py:" in line or "warnings.warn" in line for line in lines)
    assert len(warned) == len(set(warned))
