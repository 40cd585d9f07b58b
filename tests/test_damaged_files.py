# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Crafted or damaged files in a results folder, a texts file or a checkpoint: each read gives our error naming the
file (and the line), never a bare RecursionError, UnicodeDecodeError, ValueError, TypeError or AttributeError; and
`overwrite=True` recovers from every one of them, reading none.

Recomputed another way: each file is built by hand, byte for byte, as a crafted or torn file would be.
"""

from __future__ import annotations

import json
import math
import re

import pytest

import interpreto_anisotropy as ia
from interpreto_anisotropy.cli import main, read_texts
from interpreto_anisotropy.commons.files import load_json
from interpreto_anisotropy.errors import CheckpointError, InvalidInputError, ResultsFileWarning, ResultsStoreError
from interpreto_anisotropy.results.records import read_provenance, read_top_tokens, saved_steps, versions_of_rows
from interpreto_anisotropy.results.store import LiveStore, SweepStore
from interpreto_anisotropy.visualizations.model_card import _read_json

DEEP = b"[" * 50_000 + b"]" * 50_000
CONFIG = {"live": True, "n_controls": 3}
ROW = {"step": 0, "checkpoint": "live-0", "layer": 1, "split_point": "gpt_neox.layers.1", "tangent": "given"}


def _folder(tmp_path, *, rows: list[bytes] | None = None, config: bytes | None = None):
    (tmp_path / "config.json").write_bytes(config if config is not None else json.dumps(CONFIG).encode())
    (tmp_path / "rows.jsonl").write_bytes(b"".join(line + b"\n" for line in rows or [json.dumps(ROW).encode()]))
    return tmp_path


CRAFTED_ROWS = {
    "deep": DEEP,
    "step 10**30": json.dumps({**ROW, "step": 10**30}).encode(),
    "step a string": json.dumps({**ROW, "step": "3"}).encode(),
    "dict layer": json.dumps({**ROW, "layer": {"a": 1}}).encode(),
    "layer ..": json.dumps({**ROW, "layer": ".."}).encode(),
    "layer with a slash": json.dumps({**ROW, "layer": "a/../b"}).encode(),
    "layer <script>": json.dumps({**ROW, "layer": "<script>alert(1)</script>"}).encode(),
    "tangent <script>": json.dumps({**ROW, "tangent": '"><script>'}).encode(),
    "energy a string": json.dumps({**ROW, "energy_share": "0.5"}).encode(),
    "controls of strings": json.dumps({**ROW, "control_energy_shares": ["a"]}).encode(),
    "not UTF-8": b'{"step": 0, "layer": "\xff"}',
    "energy NaN": json.dumps({**ROW, "energy_share": float("nan")}).encode(),
}


@pytest.mark.parametrize("name", sorted(CRAFTED_ROWS))
def test_a_crafted_row_is_our_error_naming_the_file_and_line(tmp_path, name):
    folder = _folder(tmp_path, rows=[json.dumps(ROW).encode(), CRAFTED_ROWS[name]])
    line = "" if name == "not UTF-8" else "Line 2 of "
    with pytest.raises(ResultsStoreError, match=rf"{line}.*rows\.jsonl.*overwrite=True"):
        ia.SweepResult.load(folder)
    with pytest.raises(ResultsStoreError, match=r"rows\.jsonl"):
        LiveStore(folder, CONFIG, overwrite=False, start_step=1, flush_seconds=0)  # a resume: not doubled, refused
    LiveStore(folder, CONFIG, overwrite=True, flush_seconds=0).close()
    assert ia.SweepResult.load(folder).rows == []


@pytest.mark.parametrize(
    "content",
    [
        DEEP,
        b'{"a": ' * 50_000,
        b"\xff\xfe{}",
        b"[1, 2]",
        b'{"n": 1' + b"0" * 5000 + b"}",
        b'{"live": true, "n_controls": NaN}',
        b'{"live": true, "confidence": -Infinity}',
        b'{"live": true, "confidence": 1e999}',
    ],
)
def test_a_damaged_config_is_our_error_and_overwrite_recovers_without_reading_it(tmp_path, content):
    folder = _folder(tmp_path, config=content)
    with pytest.raises(ResultsStoreError, match=r"config\.json.*overwrite=True"):
        ia.SweepResult.load(folder)
    with pytest.raises(ResultsStoreError, match=r"config\.json"):
        LiveStore(folder, CONFIG, overwrite=False, flush_seconds=0)
    LiveStore(folder, CONFIG, overwrite=True, flush_seconds=0).close()
    assert ia.SweepResult.load(folder).config == CONFIG
    _folder(tmp_path, config=content)
    store = SweepStore(folder)
    with store.lock():
        assert store.prepare(CONFIG, overwrite=True) == CONFIG


def _top_tokens(folder, content: bytes, name: str = "step-0.json"):
    (folder / "top_tokens" / "1").mkdir(parents=True, exist_ok=True)
    (folder / "top_tokens" / "1" / name).write_bytes(content)


GOOD_TOKENS = {"step": 0, "layer": 1, "split_point": "s", "n_rows": 1, "tangents": {}}
TOKEN = ["tok", "before", "after", 0.5, 0, 1]
CRAFTED_TOKENS = {
    "deep": DEEP,
    "not UTF-8": b'{"step": "\xff"}',
    "a list": b"[]",
    "n_rows a string": json.dumps({**GOOD_TOKENS, "n_rows": "x"}).encode(),
    "n_rows -1": json.dumps({**GOOD_TOKENS, "n_rows": -1}).encode(),
    "a step other than its name's": json.dumps({**GOOD_TOKENS, "step": 7}).encode(),
    "tangents a list": json.dumps({**GOOD_TOKENS, "tangents": []}).encode(),
    "direction a string": json.dumps({**GOOD_TOKENS, "tangents": {"early": ["x"]}}).encode(),
    "score a string": json.dumps(
        {
            **GOOD_TOKENS,
            "tangents": {
                "early": [{"direction": 0, "variance_share": 0.1, "high": [TOKEN[:3] + ["a", 0, 1]], "low": []}]
            },
        }
    ).encode(),
    "text a string": json.dumps(
        {
            **GOOD_TOKENS,
            "tangents": {
                "early": [{"direction": 0, "variance_share": 0.1, "high": [TOKEN[:4] + ['"><script>', 1]], "low": []}]
            },
        }
    ).encode(),
}


@pytest.mark.parametrize("name", sorted(CRAFTED_TOKENS))
def test_a_crafted_top_tokens_file_is_our_error_naming_it(tmp_path, name):
    _top_tokens(tmp_path, CRAFTED_TOKENS[name])
    with pytest.raises(ResultsStoreError, match=r"top_tokens/1/step-0\.json"):
        read_top_tokens(tmp_path, 1, 0)


def test_a_top_tokens_file_not_named_by_a_step_is_our_error_naming_it(tmp_path):
    _top_tokens(tmp_path, json.dumps(GOOD_TOKENS).encode())
    _top_tokens(tmp_path, json.dumps(GOOD_TOKENS).encode(), "step-abc.json")
    with pytest.raises(ResultsStoreError, match=r"top_tokens/1/step-abc\.json.*step-<step>\.json"):
        saved_steps(tmp_path, 1)
    _folder(tmp_path)
    with pytest.raises(ResultsStoreError, match=r"step-abc\.json"):
        ia.SweepResult.load(tmp_path).top_tokens(1)
    LiveStore(tmp_path, CONFIG, overwrite=True, flush_seconds=0).close()
    assert not (tmp_path / "top_tokens").exists()


CRAFTED_PROVENANCE = {
    "deep": DEEP + b"\n",
    "not UTF-8": b'{"versions": {"torch": "\xff"}}\n',
    "a row of two": json.dumps({"versions": {}, "rows": [[1, 2]]}).encode() + b"\n",
    "rows a number": json.dumps({"versions": {}, "rows": 5}).encode() + b"\n",
    "a step string": json.dumps({"versions": {}, "rows": [["a", "1", "early"]]}).encode() + b"\n",
    "versions of lists": json.dumps({"versions": {"torch": [1]}, "rows": []}).encode() + b"\n",
}


@pytest.mark.parametrize("name", sorted(CRAFTED_PROVENANCE))
def test_a_crafted_provenance_file_is_our_error_naming_it(tmp_path, name):
    (tmp_path / "provenance.jsonl").write_bytes(CRAFTED_PROVENANCE[name])
    with pytest.raises(ResultsStoreError, match=r"provenance\.jsonl"):
        read_provenance(tmp_path / "provenance.jsonl")
    with pytest.raises(ResultsStoreError, match=r"provenance\.jsonl"):
        versions_of_rows(tmp_path, [ROW])


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", DEEP),
        ("deep.jsonl", b'{"text": "a"}\n' + DEEP + b"\n"),
        ("big-number.json", b"[" + b"9" * 5000 + b"]"),
    ],
)
def test_a_crafted_texts_file_is_our_error_and_the_command_exits_2(tmp_path, capsys, name, content):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InvalidInputError, match=rf"{re.escape(name)}.*JSON"):
        read_texts(tmp_path / name)
    (tmp_path / "checkpoint-0").mkdir()
    (tmp_path / "checkpoint-0" / "config.json").write_text("{}")
    arguments = ["sweep", "--model", str(tmp_path), "--split-point", "1", "--texts", str(tmp_path / name)]
    assert main([*arguments, "--out", str(tmp_path / "out")]) == 2
    assert name in capsys.readouterr().err


def test_non_finite_numbers_are_refused_in_our_files_and_kept_in_a_checkpoint_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"a": NaN, "b": 1e999, "c": -Infinity}')
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(path))}.*NaN"):
        load_json(path)
    value = load_json(path, finite=False)  # what transformers wrote in a checkpoint's config, it may read
    assert math.isnan(value["a"]) and value["b"] == math.inf and value["c"] == -math.inf
    assert math.isnan(_read_json(path)["a"])  # the model card reads a checkpoint's config
    path.write_text('{"rows": [0.5, -1e400]}')
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(path))}.*float"):
        load_json(path)


def test_a_deep_checkpoint_config_is_our_error_or_unknown_in_the_model_card(tmp_path):
    (tmp_path / "config.json").write_bytes(DEEP)
    with pytest.raises(CheckpointError, match=r"config\.json.*\b64\b"):
        load_json(tmp_path / "config.json", error=CheckpointError)
    assert _read_json(tmp_path / "config.json") == {}


def test_a_deep_checkpoint_config_ends_the_sweep_with_our_error(tmp_path, capsys):
    (tmp_path / "checkpoint-0").mkdir()
    (tmp_path / "checkpoint-0" / "config.json").write_bytes(b'{"model_type": "gpt_neox", "x": ' + DEEP + b"}")
    (tmp_path / "texts.txt").write_text("a text\nanother text\n")
    arguments = ["sweep", "--model", str(tmp_path), "--split-point", "1", "--texts", str(tmp_path / "texts.txt")]
    assert main([*arguments, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint-0/config.json" in err and "64" in err  # the file, and the depth it exceeds


def test_a_tail_cut_inside_a_multibyte_character_leaves_the_whole_lines_readable(tmp_path):
    torn = json.dumps({**ROW, "step": 1, "checkpoint": "é"}, ensure_ascii=False).encode()[:-4]  # "é" cut in two
    folder = _folder(tmp_path, config=json.dumps(CONFIG).encode())
    with (folder / "rows.jsonl").open("ab") as handle:
        handle.write(torn[: torn.index("é".encode()) + 1])
    with pytest.warns(ResultsFileWarning, match=r"rows\.jsonl"):
        assert ia.SweepResult.load(folder).steps == [0]  # a live folder: the torn tail is left out
    line = json.dumps({"versions": {"torch": "é"}, "rows": []}, ensure_ascii=False).encode()
    (folder / "provenance.jsonl").write_bytes(line + b"\n" + line[: line.index("é".encode()) + 1])
    assert len(read_provenance(folder / "provenance.jsonl")) == 1


def test_a_subspace_file_with_deep_metadata_is_our_error_naming_it(tmp_path):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "1.safetensors"
    save_file(
        {"basis": torch.eye(4)[:, :2].contiguous()}, str(path), metadata={"interpreto_anisotropy": DEEP.decode()}
    )
    with pytest.raises(ResultsStoreError, match=r"1\.safetensors") as caught:
        ia.Subspace.load(path)
    assert "64" in str(caught.value) and "Subspace.save" in str(caught.value)  # the depth it exceeds, the fix


@pytest.mark.parametrize("given", [5, None, 1.5])
def test_a_results_dir_that_is_not_a_path_is_our_error(given):
    with pytest.raises(InvalidInputError, match=rf"results_dir.*{re.escape(repr(given))}"):
        ia.SweepResult.load(given)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        *[({"dpi": value}, rf"dpi.*{re.escape(repr(value))}") for value in (0, -5, float("nan"), "110", True)],
        ({"title": {"a": 1}}, "title.*dict"),
    ],
)
def test_report_options_are_our_errors_naming_them(tmp_path, options, named):
    result = ia.SweepResult.load(_folder(tmp_path))
    with pytest.raises(InvalidInputError, match=named):
        ia.write_report(result, tmp_path / "report", **options)
    with pytest.raises(InvalidInputError, match=r"out_dir.*\b5\b"):
        ia.write_report(result, 5)


def test_a_config_transformers_cannot_read_ends_the_sweep_with_our_error_naming_the_field(tmp_path, capsys):
    """transformers' own config check divides by num_attention_heads: the token estimate must not raise it."""
    from interpreto_anisotropy.visualizations.model_card import count_tokens

    (tmp_path / "checkpoint-0").mkdir()
    config = {"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 0, "num_hidden_layers": 2}
    (tmp_path / "checkpoint-0" / "config.json").write_text(json.dumps(config))
    assert count_tokens(tmp_path / "checkpoint-0", ["a text"]) is None
    (tmp_path / "texts.txt").write_text("a text\nanother text\n")
    arguments = ["sweep", "--model", str(tmp_path), "--split-point", "1", "--texts", str(tmp_path / "texts.txt")]
    assert main([*arguments, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "num_attention_heads = 0" in capsys.readouterr().err
