# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A battery of bad inputs and faults against the public API and the command line, each classified HELD or FAILED.

An outside tester's check of the hardening (issue 27). Each case runs in a forked child (a memory cap and a time
bound, so that a case that allocates without bound or hangs cannot take the machine with it) and is

- HELD: it raised one of our errors (an `AnisotropyError` subclass) with a message, or the command exited 2 with a
  message on stderr, or (cases marked so) it warned with a message and went on, within the time bound; a misspelt
  keyword's `TypeError: ... unexpected keyword argument 'x'` (Python's own check, naming it) holds too;
- FAILED: a raw Python exception, a hang past the bound, a child killed (memory), or silent acceptance of the bad
  input (it returned normally).

Covers crafted and damaged results folders (rows, config, top tokens, provenance), options of every public
constructor and function (types, ranges, NaN / inf, bools), checkpoint folders (huge or zero configs, missing,
mis-shaped or truncated weights), and the command line's flags and texts files. Not part of the test suite: a
script. Run: `python benchmarks/fault_cases.py [--bound 60] [-k SUBSTRING] [--verbose]`. Prints the counts and
every FAILED case.

Accepted by design, so not cases here: a single string where texts are expected is one text (the readers' and the
probe's convention; `CheckpointSweep`, whose texts are split into fit and probe halves, refuses it), and a results
folder with a config but no rows.jsonl yet is a sweep that has not finished a checkpoint (no rows), and a
`TrainingProbe` without a tokenizer makes every token a gradient row (the tokenizer only names the special tokens
left out; an `AnisotropyCallback` passes the Trainer's, which may be None); a tokenizer that is no tokenizer is a
case.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # no OpenMP pool in the parent: forked children must not inherit a busy one

import interpreto_anisotropy as ia  # noqa: E402
from interpreto_anisotropy.cli import main as cli_main  # noqa: E402
from interpreto_anisotropy.errors import AnisotropyError  # noqa: E402
from interpreto_anisotropy.live.callback import AnisotropyCallback  # noqa: E402

NAN, INF = float("nan"), float("inf")
DEEP = b"[" * 50_000 + b"]" * 50_000
MEMORY_CAP = 6 * 1024**3  # bytes of address space a case may take


@dataclass
class Case:
    group: str
    name: str
    run: Callable[[], Any]
    cli: bool = False  # run returns an exit status: 2 with a message on stderr holds
    warn_ok: bool = False  # a warning with a message, then going on, holds


CASES: list[Case] = []


def case(group: str, name: str, *, cli: bool = False, warn_ok: bool = False):
    def register(function: Callable[[], Any]) -> Callable[[], Any]:
        CASES.append(Case(group, name, function, cli=cli, warn_ok=warn_ok))
        return function

    return register


def add(group: str, name: str, function: Callable[[], Any], **flags: Any) -> None:
    CASES.append(Case(group, name, function, **flags))


# ------------------------------------------------------------------ shared fixtures (built once, in the parent)
ROOT = Path(tempfile.mkdtemp(prefix="fault-cases-"))
FIX: dict[str, Any] = {}


def fixtures() -> dict[str, Any]:
    """A toy decoder, its tokenizer and splitter, a saved checkpoint folder, a texts file, a good results folder."""
    if FIX:
        return FIX
    from interpreto import ModelWithSplitPoints

    from interpreto_anisotropy.demo import build_model, train_tokenizer
    from interpreto_anisotropy.demo.corpus import load_corpus

    corpus = load_corpus("train", max_texts=120, progress=False)
    tokenizer = train_tokenizer(corpus, arch="gpt_neox", vocab_size=384)
    model = build_model(
        "gpt_neox", vocab_size=len(tokenizer), hidden_size=32, num_layers=2, num_heads=4, seed=0, tokenizer=tokenizer
    )
    checkpoint = ROOT / "run" / "checkpoint-0"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    texts = [text for text in corpus if 40 < len(text) < 300][:12]
    (ROOT / "texts.txt").write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n")
    import copy

    training_model = copy.deepcopy(model)
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=4)
    tangent = ia.Subspace.random(32, 2, seed=0)
    FIX.update(
        model=training_model, tokenizer=tokenizer, mwsp=mwsp, texts=texts, checkpoint=checkpoint, tangent=tangent
    )
    return FIX


def fresh(name: str) -> Path:
    path = ROOT / "cases" / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# ------------------------------------------------------------------ results folders
CONFIG = {"live": True, "n_controls": 3}
ROW = {"step": 0, "checkpoint": "live-0", "layer": 1, "split_point": "gpt_neox.layers.1", "tangent": "given"}


def results_folder(name: str, *, rows: list[bytes] | None = None, config: bytes | None = None) -> Path:
    folder = fresh(name)
    (folder / "config.json").write_bytes(config if config is not None else json.dumps(CONFIG).encode())
    lines = rows if rows is not None else [json.dumps(ROW).encode()]
    (folder / "rows.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    return folder


def row(**change: Any) -> bytes:
    return json.dumps({**ROW, **change}).encode()


CRAFTED_ROWS: dict[str, bytes] = {
    "deep JSON": DEEP,
    "step 10**30": row(step=10**30),
    "step -1": row(step=-1),
    "step 1.5": row(step=1.5),
    "step true": row(step=True),
    "step null": row(step=None),
    "step a string": row(step="3"),
    "no step": json.dumps({k: v for k, v in ROW.items() if k != "step"}).encode(),
    "layer a dict": row(layer={"a": 1}),
    "layer ..": row(layer=".."),
    "layer a/../b": row(layer="a/../b"),
    "layer <script>": row(layer="<script>alert(1)</script>"),
    "layer a list": row(layer=[1]),
    "tangent <script>": row(tangent='"><script>'),
    "tangent a number": row(tangent=5),
    "split_point a dict": row(split_point={"x": 1}),
    "checkpoint a list": row(checkpoint=[1]),
    "energy a string": row(energy_share="0.5"),
    "energy a list": row(energy_share=[0.5]),
    "energy NaN literal": json.dumps({**ROW, "energy_share": NAN}).encode(),
    "energy 1e400 (inf)": row()[:-1] + b', "energy_share": 1e400}',
    "controls of strings": row(control_energy_shares=["a"]),
    "controls a string": row(control_energy_shares="abc"),
    "controls nested": row(control_energy_shares=[[0.1]]),
    "not UTF-8": b'{"step": 0, "layer": "\xff"}',
    "a JSON list": b"[1, 2]",
    "a JSON number": b"5",
    "a JSON null": b"null",
    "a JSON string": b'"row"',
    "a torn middle line": row()[:20],
    "a 10**5-digit number": b'{"step": ' + b"9" * 100_000 + b"}",
    "a UTF-8 BOM": b"\xef\xbb\xbf" + row(),
    "NUL bytes": b"\x00" * 64,
}

for _name, _line in CRAFTED_ROWS.items():

    def _load(line=_line, name=_name):
        folder = results_folder("rows-" + str(abs(hash(name))), rows=[row(), line, row(step=1)])
        return ia.SweepResult.load(folder)

    add("results: rows.jsonl", _name, _load)

for _name in ("deep JSON", "step 10**30", "layer <script>", "not UTF-8", "energy a string", "a JSON list"):

    def _report(line=CRAFTED_ROWS[_name], name=_name):
        folder = results_folder("report-" + str(abs(hash(name))), rows=[row(), line])
        return cli_main(["report", str(folder)])

    add("results: CLI report", _name, _report, cli=True)

CRAFTED_CONFIGS = {
    "deep list": DEEP,
    "deep dict": b'{"a": ' * 50_000,
    "UTF-16 BOM": b"\xff\xfe{}",
    "a list": b"[1, 2]",
    "a 5000-digit number": b'{"n": 1' + b"0" * 5000 + b"}",
    "null": b"null",
    "empty file": b"",
    "truncated": json.dumps(CONFIG).encode()[:10],
    "NaN literal": b'{"n_controls": NaN}',
    "-Infinity literal": b'{"confidence": -Infinity}',
    "1e999 (infinity)": b'{"confidence": 1e999}',
}
for _name, _content in CRAFTED_CONFIGS.items():
    add(
        "results: config.json",
        _name,
        lambda content=_content, name=_name: ia.SweepResult.load(
            results_folder("config-" + str(abs(hash(name))), config=content)
        ),
    )


@case("results: folder", "missing folder")
def _():
    return ia.SweepResult.load(ROOT / "does-not-exist")


@case("results: folder", "a file, not a folder")
def _():
    (ROOT / "a-file").write_text("x")
    return ia.SweepResult.load(ROOT / "a-file")


@case("results: folder", "rows.jsonl is a folder")
def _():
    folder = fresh("rows-folder")
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "rows.jsonl").mkdir()
    return ia.SweepResult.load(folder)


@case("results: folder", "load(5)")
def _():
    return ia.SweepResult.load(5)


@case("results: folder", "load(None)")
def _():
    return ia.SweepResult.load(None)


@case("results: folder", "a torn last line of a live folder", warn_ok=True)
def _():
    folder = results_folder("torn-tail")
    with (folder / "rows.jsonl").open("ab") as handle:
        handle.write(row(step=1)[:15])
    return ia.SweepResult.load(folder)


GOOD_TOKENS = {"step": 0, "layer": 1, "split_point": "s", "n_rows": 1, "tangents": {}}
TOKEN = ["tok", "before", "after", 0.5, 0, 1]


def tokens_with(entry: Any) -> bytes:
    return json.dumps({**GOOD_TOKENS, "tangents": {"early": [entry]}}).encode()


CRAFTED_TOKENS = {
    "deep JSON": DEEP,
    "not UTF-8": b'{"step": "\xff"}',
    "a list": b"[]",
    "truncated": json.dumps(GOOD_TOKENS).encode()[:12],
    "n_rows a string": json.dumps({**GOOD_TOKENS, "n_rows": "x"}).encode(),
    "n_rows -1": json.dumps({**GOOD_TOKENS, "n_rows": -1}).encode(),
    "step mismatching its name": json.dumps({**GOOD_TOKENS, "step": 7}).encode(),
    "tangents a list": json.dumps({**GOOD_TOKENS, "tangents": []}).encode(),
    "direction a string": tokens_with("x"),
    "score a string": tokens_with(
        {"direction": 0, "variance_share": 0.1, "high": [TOKEN[:3] + ["a", 0, 1]], "low": []}
    ),
    "text a string id": tokens_with(
        {"direction": 0, "variance_share": 0.1, "high": [TOKEN[:4] + ["<b>", 1]], "low": []}
    ),
    "token of 2 fields": tokens_with({"direction": 0, "variance_share": 0.1, "high": [["a", "b"]], "low": []}),
    "high a dict": tokens_with({"direction": 0, "variance_share": 0.1, "high": {"a": 1}, "low": []}),
    "variance_share a string": tokens_with({"direction": 0, "variance_share": "big", "high": [], "low": []}),
}
for _name, _content in CRAFTED_TOKENS.items():

    def _tokens(content=_content, name=_name):
        folder = results_folder("tokens-" + str(abs(hash(name))))
        (folder / "top_tokens" / "1").mkdir(parents=True)
        (folder / "top_tokens" / "1" / "step-0.json").write_bytes(content)
        return ia.SweepResult.load(folder).top_tokens(1, step=0)

    add("results: top_tokens", _name, _tokens)


@case("results: top_tokens", "a file named step-abc.json")
def _():
    folder = results_folder("tokens-badname")
    (folder / "top_tokens" / "1").mkdir(parents=True)
    (folder / "top_tokens" / "1" / "step-abc.json").write_text(json.dumps(GOOD_TOKENS))
    return ia.SweepResult.load(folder).top_tokens(1)


CRAFTED_PROVENANCE = {
    "deep JSON": DEEP + b"\n",
    "not UTF-8": b'{"versions": {"torch": "\xff"}}\n',
    "a row of two": json.dumps({"versions": {}, "rows": [[1, 2]]}).encode() + b"\n",
    "rows a number": json.dumps({"versions": {}, "rows": 5}).encode() + b"\n",
    "a step string": json.dumps({"versions": {}, "rows": [["a", "1", "early"]]}).encode() + b"\n",
    "versions of lists": json.dumps({"versions": {"torch": [1]}, "rows": []}).encode() + b"\n",
    "versions null": json.dumps({"versions": None, "rows": []}).encode() + b"\n",
    "a JSON list": b"[1]\n",
}
for _name, _content in CRAFTED_PROVENANCE.items():

    def _provenance(content=_content):
        from interpreto_anisotropy.results.records import versions_of_rows

        folder = results_folder("prov-" + str(abs(hash(content))))
        (folder / "provenance.jsonl").write_bytes(content)
        return versions_of_rows(folder, [ROW])

    add("results: provenance.jsonl", _name, _provenance)


# ------------------------------------------------------------------ report options
def good_result() -> Any:
    folder = results_folder("good", rows=[row(energy_share=0.2, control_energy_shares=[0.1, 0.15, 0.12])])
    return ia.SweepResult.load(folder)


for _name, _value in {"dpi 0": 0, "dpi -5": -5, "dpi NaN": NAN, "dpi '110'": "110", "dpi True": True}.items():
    add("report options", _name, lambda value=_value: ia.write_report(good_result(), fresh("report-opts"), dpi=value))
add(
    "report options",
    "out_dir an existing file",
    lambda: ia.write_report(good_result(), (ROOT / "a-file", (ROOT / "a-file").write_text("x"))[0]),
)
add("report options", "out_dir 5", lambda: ia.write_report(good_result(), 5))
add("report options", "title a dict", lambda: ia.write_report(good_result(), fresh("report-title"), title={"a": 1}))


# ------------------------------------------------------------------ option values
def probe(**options: Any) -> Any:
    return ia.GradientProbe(fixtures()["mwsp"], **options)


BAD_PROBE_OPTIONS: dict[str, dict[str, Any]] = {
    "objective 5": {"objective": 5},
    "objective 'nope'": {"objective": "nope"},
    "objective a lambda of 1 argument": {"objective": lambda output: output.logits.sum()},
    "reduction 'max'": {"reduction": "max"},
    "reduction None": {"reduction": None},
    "mlm_probability 2 on causal": {"objective": "masked_lm", "mlm_probability": 2.0},
    "mlm_probability NaN": {"mlm_probability": NAN},
    "seed -1": {"seed": -1},
    "seed 1.5": {"seed": 1.5},
    "seed NaN": {"seed": NAN},
    "seed True": {"seed": True},
    "seed '0'": {"seed": "0"},
    "batch_size 0": {"batch_size": 0},
    "batch_size -1": {"batch_size": -1},
    "batch_size 1.5": {"batch_size": 1.5},
    "batch_size NaN": {"batch_size": NAN},
    "batch_size True": {"batch_size": True},
    "batch_size '8'": {"batch_size": "8"},
    "max_length 0": {"max_length": 0},
    "max_length NaN": {"max_length": NAN},
    "max_length True": {"max_length": True},
    "max_length 10**6": {"max_length": 10**6},
    "on_nonfinite 'ignore'": {"on_nonfinite": "ignore"},
    "on_nonfinite None": {"on_nonfinite": None},
    "autocast_dtype 'fp8'": {"autocast_dtype": "fp8"},
    "autocast_dtype torch.int8": {"autocast_dtype": torch.int8},
    "autocast_dtype 5": {"autocast_dtype": 5},
    "distributed 'yes'": {"distributed": "yes"},
    "include_special 1": {"include_special": 1},
    "call 'middle'": {"call": "middle"},
    "call 1.5": {"call": 1.5},
    "call True": {"call": True},
}
for _name, _options in BAD_PROBE_OPTIONS.items():
    add("options: GradientProbe", _name, lambda options=_options: probe(**options))
add("options: GradientProbe", "splitter None", lambda: ia.GradientProbe(None))
add("options: GradientProbe", "splitter a bare model", lambda: ia.GradientProbe(fixtures()["model"]))


def run_probe(texts: Any = None, tangent: Any = None, **options: Any) -> Any:
    fix = fixtures()
    texts = fix["texts"][:4] if texts is None else texts
    tangent = fix["tangent"] if tangent is None else tangent
    return ia.GradientProbe(fix["mwsp"]).run(texts, tangent, **{"n_controls": 2, "progress": False, **options})


BAD_RUNS: dict[str, Callable[[], Any]] = {
    "texts []": lambda: run_probe([]),
    "texts [1, 2]": lambda: run_probe([1, 2]),
    "texts [None]": lambda: run_probe([None]),
    "texts all empty strings": lambda: run_probe(["", ""]),
    "tangent a string": lambda: run_probe(tangent="pca"),
    "tangent of another width": lambda: run_probe(tangent=ia.Subspace.random(48, 2, seed=0)),
    "tangent a NaN tensor": lambda: run_probe(tangent=torch.full((32, 2), NAN)),
    "n_controls 0": lambda: run_probe(n_controls=0),
    "n_controls -1": lambda: run_probe(n_controls=-1),
    "n_controls NaN": lambda: run_probe(n_controls=NAN),
    "n_controls True": lambda: run_probe(n_controls=True),
    "n_controls '5'": lambda: run_probe(n_controls="5"),
    "n_controls 10**9": lambda: run_probe(n_controls=10**9),
    "confidence 0": lambda: run_probe(confidence=0),
    "confidence 1": lambda: run_probe(confidence=1),
    "confidence NaN": lambda: run_probe(confidence=NAN),
    "confidence True": lambda: run_probe(confidence=True),
    "max_tokens 0": lambda: run_probe(max_tokens=0),
    "max_tokens 1.5": lambda: run_probe(max_tokens=1.5),
    "seed NaN": lambda: run_probe(seed=NAN),
    "unknown option": lambda: run_probe(colour="red"),
}
for _name, _function in BAD_RUNS.items():
    add("options: GradientProbe.run", _name, _function)


def training_probe(**options: Any) -> Any:
    fix = fixtures()
    return ia.TrainingProbe(fix["model"], 1, tokenizer=fix["tokenizer"], **{"early_steps": 2, **options})


BAD_TRAINING: dict[str, dict[str, Any]] = {
    "split point 99": {"split_points": 99},
    "split point 'nope'": {"split_points": "nope.layer"},
    "split point 1.5": {"split_points": 1.5},
    "tangent 'weird'": {"tangent": "weird"},
    "objective 'x'": {"objective": "x"},
    "reduction 'x'": {"reduction": "x"},
    "on_nonfinite 'x'": {"on_nonfinite": "x"},
    "refit_every 0": {"refit_every": 0},
    "refit_every NaN": {"refit_every": NAN},
    "total_steps -1": {"total_steps": -1, "early_steps": None},
    "early_steps 0": {"early_steps": 0},
    "early_steps NaN": {"early_steps": NAN},
    "nb_concepts True": {"nb_concepts": True},
    "every True": {"every": True},
    "n_controls 10**9": {"n_controls": 10**9},
    "confidence INF": {"confidence": INF},
    "loss_scale -INF": {"loss_scale": -INF},
    "flush_seconds NaN": {"flush_seconds": NAN},
    "max_pending_bytes '1GB'": {"max_pending_bytes": "1GB"},
    "results_dir 3": {"results_dir": 3},
}
for _name, _options in BAD_TRAINING.items():

    def _training(options=_options):
        options = dict(options)
        fix = fixtures()
        split_points = options.pop("split_points", 1)
        if options.get("early_steps", 2) is None:
            options.pop("early_steps")
        return ia.TrainingProbe(fix["model"], split_points, tokenizer=fix["tokenizer"], **options)

    add("options: TrainingProbe", _name, _training)
add("options: TrainingProbe", "model a string", lambda: ia.TrainingProbe("gpt2", 1))
add(
    "options: TrainingProbe",
    "tokenizer 5",
    lambda: ia.TrainingProbe(fixtures()["model"], 1, tokenizer=5, early_steps=2),
)
add(
    "options: TrainingProbe",
    "tokenizer a string",
    lambda: ia.TrainingProbe(fixtures()["model"], 1, tokenizer="gpt2", early_steps=2),
)


def callback(**options: Any) -> Any:
    return AnisotropyCallback(1, **{"results_dir": fresh("callback"), **options})


add("options: AnisotropyCallback", "results_dir 3", lambda: AnisotropyCallback(1, results_dir=3))
add("options: AnisotropyCallback", "results_dir None", lambda: AnisotropyCallback(1, results_dir=None))
add("options: AnisotropyCallback", "report_dir 5", lambda: callback(report_dir=5))
add("options: AnisotropyCallback", "unknown option colour='red'", lambda: callback(colour="red"))
add("options: AnisotropyCallback", "n_controls 0", lambda: callback(n_controls=0))
add("options: AnisotropyCallback", "split point 1.5", lambda: AnisotropyCallback(1.5, results_dir=fresh("cb")))
add("options: AnisotropyCallback", "tangent 'weird'", lambda: callback(tangent="weird"))
add("options: AnisotropyCallback", "tangent a dict of strings", lambda: callback(tangent={1: "pca"}))
add(
    "options: AnisotropyCallback",
    "split points [1, None]",
    lambda: AnisotropyCallback([1, None], results_dir=fresh("cb")),
)


def sweep(**change: Any) -> Any:
    fix = fixtures()
    arguments = {
        "checkpoints": str(fix["checkpoint"].parent / "checkpoint-*"),
        "split_point": 1,
        "texts": fix["texts"][:6],
        "probe_texts": fix["texts"][6:],
        "nb_concepts": 2,
        "results_dir": fresh("sweep"),
        "progress": False,
    }
    return ia.CheckpointSweep(**{**arguments, **change})


BAD_SWEEP: dict[str, dict[str, Any]] = {
    "checkpoints a missing glob": {"checkpoints": str(ROOT / "nowhere-*")},
    "checkpoints 5": {"checkpoints": 5},
    "checkpoints []": {"checkpoints": []},
    "split_point None": {"split_point": None},
    "split_point 1.5": {"split_point": 1.5},
    "split_point []": {"split_point": []},
    "texts []": {"texts": []},
    "texts [1]": {"texts": [1]},
    "texts a string": {"texts": "abc"},
    "probe_texts a string": {"probe_texts": "abc"},
    "nb_concepts 0": {"nb_concepts": 0},
    "nb_concepts True": {"nb_concepts": True},
    "nb_concepts NaN": {"nb_concepts": NAN},
    "method 'xyz'": {"method": "xyz"},
    "reference 'late'": {"reference": "late"},
    "reference 5": {"reference": 5},
    "early_fraction 0": {"early_fraction": 0},
    "early_fraction NaN": {"early_fraction": NAN},
    "early_fraction 2": {"early_fraction": 2},
    "total_steps -1": {"total_steps": -1},
    "total_steps '5'": {"total_steps": "5"},
    "early_centering 'x'": {"early_centering": "x"},
    "n_controls 0": {"n_controls": 0},
    "n_controls NaN": {"n_controls": NAN},
    "n_controls True": {"n_controls": True},
    "n_random 0": {"n_random": 0},
    "isoscore_convention 'x'": {"isoscore_convention": "x"},
    "isoscore_zeta 2": {"isoscore_zeta": 2.0},
    "isoscore_zeta NaN": {"isoscore_zeta": NAN},
    "isoscore_c0 'x'": {"isoscore_c0": "x"},
    "seed -1": {"seed": -1},
    "max_tokens 0": {"max_tokens": 0},
    "max_fit_tokens 0": {"max_fit_tokens": 0},
    "max_metric_tokens NaN": {"max_metric_tokens": NAN},
    "results_dir None": {"results_dir": None},
    "device 'quantum'": {"device": "quantum"},
    "device 'meta'": {"device": "meta"},
    "results_dir 'bad\\x00name'": {"results_dir": "bad\x00name"},
    "split_point [1, 1]": {"split_point": [1, 1]},
    "split_point the same path twice": {"split_point": ["gpt_neox.layers.1", "gpt_neox.layers.1"]},
    "batch_size 0": {"batch_size": 0},
    "overwrite 'yes'": {"overwrite": "yes"},
    "progress 'yes'": {"progress": "yes"},
    "method_kwargs 5": {"method_kwargs": 5},
    "method_kwargs unknown to ICA": {"method": "ica", "method_kwargs": {"bogus": 1}},
    "parallel 'x'": {"parallel": "x"},
    "autocast_dtype 'x'": {"autocast_dtype": "x"},
    "include_special 2": {"include_special": 2},
    "recompute_changed 1": {"recompute_changed": 1},
    "skip_bad_checkpoints 'no'": {"skip_bad_checkpoints": "no"},
    "prefetch -1": {"prefetch": -1},
    "prefetch NaN": {"prefetch": NAN},
    "max_concurrent_downloads 0": {"max_concurrent_downloads": 0},
    "max_cache_gb -1": {"max_cache_gb": -1},
    "max_cache_gb NaN": {"max_cache_gb": NAN},
    "hub_timeout 0": {"hub_timeout": 0},
    "hub_timeout NaN": {"hub_timeout": NAN},
    "hub_timeout -1": {"hub_timeout": -1},
}
for _name, _change in BAD_SWEEP.items():
    add("options: CheckpointSweep", _name, lambda change=_change: sweep(**change))
add("options: CheckpointSweep", "split_point 'nope' (run)", lambda: sweep(split_point="nope.layer").run())


BAD_TANGENTS: dict[str, Callable[[], Any]] = {
    "PCATangent nb_concepts 0": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=0),
    "PCATangent nb_concepts -1": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=-1),
    "PCATangent nb_concepts NaN": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=NAN),
    "PCATangent nb_concepts True": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=True),
    "PCATangent nb_concepts '4'": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts="4"),
    "PCATangent nb_concepts 10**6 (fit)": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=10**6).fit(
        fixtures()["texts"][:2]
    ),
    "PCATangent rtol NaN": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, rtol=NAN),
    "PCATangent rtol -1": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, rtol=-1),
    "PCATangent seed NaN": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, seed=NAN),
    "PCATangent device 'quantum'": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, device="quantum"),
    "PCATangent splitter None": lambda: ia.PCATangent(None, nb_concepts=2),
    "PCATangent fit texts []": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2).fit([]),
    "TangentExplainer method 'nope'": lambda: ia.TangentExplainer(fixtures()["mwsp"], nb_concepts=2, method="nope"),
    "TangentExplainer method 5": lambda: ia.TangentExplainer(fixtures()["mwsp"], nb_concepts=2, method=5),
    "ICATangent unknown kwarg": lambda: ia.ICATangent(fixtures()["mwsp"], nb_concepts=2, colour="red"),
    "PCATangent (streamed) a method kwarg": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, top_k=3),
    "Subspace NaN basis": lambda: ia.Subspace(torch.full((8, 2), NAN)),
    "Subspace 1-D basis": lambda: ia.Subspace(torch.ones(8)),
    "Subspace rank 0": lambda: ia.Subspace(torch.zeros(8, 0)),
    "Subspace a string": lambda: ia.Subspace("basis"),
    "Subspace.random d 0": lambda: ia.Subspace.random(0, 2, seed=0),
    "Subspace.random k > d": lambda: ia.Subspace.random(4, 8, seed=0),
    "Subspace.random k NaN": lambda: ia.Subspace.random(8, NAN, seed=0),
    "normal_controls n 0": lambda: ia.controls.normal_controls(ia.Subspace.random(8, 2, seed=0), n=0),
    "Subspace.load a missing file": lambda: ia.Subspace.load(ROOT / "missing.safetensors"),
    "Subspace.load a text file": lambda: ia.Subspace.load(ROOT / "texts.txt"),
}
for _name, _function in BAD_TANGENTS.items():
    add("options: tangents", _name, _function)


BAD_READS: dict[str, dict[str, Any]] = {
    "batch_size 0": {"batch_size": 0},
    "max_length NaN": {"max_length": NAN},
    "max_tokens 0": {"max_tokens": 0},
    "include_special 'x'": {"include_special": "x"},
    "call 'x'": {"call": "x"},
    "unknown option": {"colour": "red"},
}
for _name, _options in BAD_READS.items():
    add(
        "options: token_activations",
        _name,
        lambda options=_options: ia.token_activations(fixtures()["mwsp"], fixtures()["texts"][:2], **options),
    )
for _name, _texts in {"texts []": [], "texts [1]": [1], "texts None": None}.items():
    add("options: token_activations", _name, lambda texts=_texts: ia.token_activations(fixtures()["mwsp"], texts))


RNG = np.random.default_rng(0)
CLOUD = RNG.normal(size=(50, 6))
m = ia.metrics
BAD_METRICS: dict[str, Callable[[], Any]] = {
    "isoscore NaN": lambda: m.isoscore(np.full((5, 3), NAN)),
    "isoscore inf": lambda: m.isoscore(np.full((5, 3), INF)),
    "isoscore empty": lambda: m.isoscore(np.zeros((0, 3))),
    "isoscore a string": lambda: m.isoscore("abc"),
    "isoscore None": lambda: m.isoscore(None),
    "isoscore 1-D": lambda: m.isoscore(np.ones(4)),
    "isoscore 3-D": lambda: m.isoscore(np.ones((2, 3, 4))),
    "isoscore complex": lambda: m.isoscore(np.ones((4, 3), dtype=complex)),
    "isoscore object array": lambda: m.isoscore(np.array([["a", "b"], ["c", "d"]], dtype=object)),
    "isoscore ragged list": lambda: m.isoscore([[1.0, 2.0], [3.0]]),
    "isoscore_star zeta 2": lambda: m.isoscore_star(CLOUD, zeta=2.0),
    "isoscore_star zeta NaN": lambda: m.isoscore_star(CLOUD, zeta=NAN),
    "isoscore_star zeta 'x'": lambda: m.isoscore_star(CLOUD, zeta="x"),
    "isoscore_star zeta True": lambda: m.isoscore_star(CLOUD, zeta=True),
    "isoscore_star C0 wrong shape": lambda: m.isoscore_star(CLOUD, C0=np.eye(3)),
    "isoscore_star C0 NaN": lambda: m.isoscore_star(CLOUD, C0=np.full((6, 6), NAN)),
    "mean_cosine a zero row": lambda: m.mean_cosine_similarity(np.array([[1.0, 0.0], [0.0, 0.0]])),
    "mean_cosine one row": lambda: m.mean_cosine_similarity(np.ones((1, 3))),
    "effective_rank 3-D": lambda: m.effective_rank(np.ones((2, 3, 4))),
    "effective_rank NaN": lambda: m.effective_rank(np.full((3, 3), NAN)),
    "partition_isotropy inf": lambda: m.partition_isotropy(np.full((3, 3), INF)),
    "partition_isotropy one row": lambda: m.partition_isotropy(np.ones((1, 3))),
    "summary top 0": lambda: m.summary(CLOUD, top=0),
    "summary zeta NaN": lambda: m.summary(CLOUD, zeta=NAN),
    "summary constant cloud": lambda: m.summary(np.ones((5, 3))),
    "rogue_dimensions top 0": lambda: m.rogue_dimensions(CLOUD, top=0),
    "rogue_dimensions top True": lambda: m.rogue_dimensions(CLOUD, top=True),
    "rogue_dimensions top 1.5": lambda: m.rogue_dimensions(CLOUD, top=1.5),
    "outlier_dimensions n_std 0": lambda: m.outlier_dimensions(CLOUD, n_std=0),
    "outlier_dimensions n_std NaN": lambda: m.outlier_dimensions(CLOUD, n_std=NAN),
    "outlier_dimensions n_std '3'": lambda: m.outlier_dimensions(CLOUD, n_std="3"),
    "oas_shrinkage n 1": lambda: m.oas_shrinkage(np.eye(3), n=1),
    "oas_shrinkage n 1.5": lambda: m.oas_shrinkage(np.eye(3), n=1.5),
    "oas_shrinkage n True": lambda: m.oas_shrinkage(np.eye(3), n=True),
    "isoscore_from_covariance non-square": lambda: m.isoscore_from_covariance(np.ones((2, 3))),
    "isoscore_from_covariance zero": lambda: m.isoscore_from_covariance(np.zeros((3, 3))),
    "isoscore_star_from_trace_and_norm trace 0": lambda: m.isoscore_star_from_trace_and_norm(0.0, 1.0, 3),
    "isoscore_star_from_trace_and_norm dim 0": lambda: m.isoscore_star_from_trace_and_norm(1.0, 1.0, 0),
    "isoscore_star_from_trace_and_norm NaN": lambda: m.isoscore_star_from_trace_and_norm(NAN, 1.0, 3),
    "knn_entropy k 0": lambda: m.knn_entropy(CLOUD, k=0),
    "knn_entropy k > n": lambda: m.knn_entropy(CLOUD, k=500),
    "knn_entropy k NaN": lambda: m.knn_entropy(CLOUD, k=NAN),
    "frequency_distance_correlation lengths differ": lambda: m.frequency_distance_correlation(
        CLOUD, np.arange(10), np.ones(100)
    ),
    "frequency_distance_correlation negative ids": lambda: m.frequency_distance_correlation(
        CLOUD, -np.ones(50, dtype=int), np.ones(100)
    ),
    "curvature_visibility n_strata 0": lambda: m.curvature_visibility(
        CLOUD, np.arange(50) % 10, np.ones(10), n_strata=0
    ),
    "count_token_frequencies tokenizer None": lambda: m.count_token_frequencies(["a"], None),
    "count_token_frequencies texts of ints": lambda: m.count_token_frequencies([1, 2], fixtures()["tokenizer"]),
    "analytic_null k > d": lambda: ia.controls.analytic_null(0.5, 4, 8),
    "analytic_null energy NaN": lambda: ia.controls.analytic_null(NAN, 8, 2),
    "p_value of NaN": lambda: ia.controls.p_value(NAN, [0.1, 0.2]),
    "p_value controls []": lambda: ia.controls.p_value(0.5, []),
    "chance_std k 0": lambda: ia.controls.chance_std(np.eye(8), 0),
    "chance_std NaN moment": lambda: ia.controls.chance_std(np.full((8, 8), NAN), 2),
}
for _name, _function in BAD_METRICS.items():
    add("options: metrics", _name, _function)


# ------------------------------------------------------------------ checkpoint folders
def checkpoint_copy(name: str, edit_config: dict[str, Any] | None = None) -> Path:
    source = fixtures()["checkpoint"]
    target = ROOT / "checkpoints" / name / "checkpoint-0"
    shutil.rmtree(target.parent, ignore_errors=True)
    shutil.copytree(source, target)
    if edit_config is not None:
        config = json.loads((target / "config.json").read_text())
        config.update(edit_config)
        (target / "config.json").write_text(json.dumps(config))
    return target


def load_folder(folder: Path) -> Any:
    return ia.checkpoints.load_checkpoint(ia.checkpoints.Checkpoint(step=0, source=str(folder)))


def sweep_folder(folder: Path) -> int:
    arguments = ["sweep", "--model", str(folder.parent), "--split-point", "1", "--texts", str(ROOT / "texts.txt")]
    return cli_main(
        [
            *arguments,
            "--nb-concepts",
            "2",
            "--n-controls",
            "2",
            "--out",
            str(fresh("cli-sweep")),
            "--no-progress",
            "--no-report",
            "--device",
            "cpu",
        ]
    )


def weights(folder: Path) -> Path:
    return next(folder.glob("*.safetensors"))


CONFIG_EDITS: dict[str, dict[str, Any]] = {
    "num_hidden_layers 10**6": {"num_hidden_layers": 10**6},
    "num_hidden_layers 0": {"num_hidden_layers": 0},
    "num_hidden_layers -1": {"num_hidden_layers": -1},
    "num_attention_heads 0": {"num_attention_heads": 0},
    "num_attention_heads 5 (32 not divisible)": {"num_attention_heads": 5},
    "hidden_size 10**6": {"hidden_size": 10**6},
    "hidden_size -32": {"hidden_size": -32},
    "vocab_size 0": {"vocab_size": 0},
    "vocab_size 10**9": {"vocab_size": 10**9},
    "intermediate_size 10**8": {"intermediate_size": 10**8},
    "hidden_size 64 (weights of 32)": {"hidden_size": 64},
    "model_type 'nonexistent'": {"model_type": "nonexistent"},
    "model_type a number": {"model_type": 5},
    "max_position_embeddings 0": {"max_position_embeddings": 0},
    "architectures a string": {"architectures": "GPTNeoXForCausalLM"},
    "torch_dtype 'float7'": {"torch_dtype": "float7", "dtype": "float7"},
}
for _name, _edit in CONFIG_EDITS.items():
    add(
        "checkpoints: load_checkpoint",
        _name,
        lambda edit=_edit, name=_name: load_folder(checkpoint_copy("l" + str(abs(hash(name))), edit)),
    )
for _name in ("num_hidden_layers 10**6", "num_attention_heads 0", "hidden_size 64 (weights of 32)", "vocab_size 0"):
    add(
        "checkpoints: CLI sweep",
        _name,
        lambda edit=CONFIG_EDITS[_name], name=_name: sweep_folder(checkpoint_copy("s" + str(abs(hash(name))), edit)),
        cli=True,
    )


def _damaged(kind: str) -> Path:
    folder = checkpoint_copy("damaged-" + kind)
    path = weights(folder)
    data = path.read_bytes()
    if kind == "missing weights":
        path.unlink()
    elif kind == "truncated weights":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "weights of 10 bytes":
        path.write_bytes(data[:10])
    elif kind == "empty weights":
        path.write_bytes(b"")
    elif kind == "garbage header":
        path.write_bytes(b"\xff" * 8 + b"{not json" + data[100:])
    elif kind == "header length 10**15":
        path.write_bytes((10**15).to_bytes(8, "little") + data[8:])
    elif kind == "mis-shaped weights":
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(path))
        key = next(k for k in tensors if k.endswith("query_key_value.weight"))
        tensors[key] = torch.zeros(3, 3)
        save_file(tensors, str(path), metadata={"format": "pt"})
    elif kind == "a weight missing":
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(path))
        del tensors[next(k for k in tensors if k.endswith("query_key_value.weight"))]
        save_file(tensors, str(path), metadata={"format": "pt"})
    elif kind == "NaN weights":
        from safetensors.torch import load_file, save_file

        tensors = {k: torch.full_like(v, NAN) if v.is_floating_point() else v for k, v in load_file(str(path)).items()}
        save_file(tensors, str(path), metadata={"format": "pt"})
    elif kind == "config not JSON":
        (folder / "config.json").write_text("{not json")
    elif kind == "config missing":
        (folder / "config.json").unlink()
    elif kind == "config deep":
        (folder / "config.json").write_bytes(b'{"model_type": "gpt_neox", "x": ' + DEEP + b"}")
    elif kind == "config a list":
        (folder / "config.json").write_text("[1, 2]")
    elif kind == "tokenizer files missing":
        for file in folder.glob("tokenizer*"):
            file.unlink()
    elif kind == "tokenizer.json garbage":
        (folder / "tokenizer.json").write_text("{garbage")
    return folder


DAMAGES = [
    "missing weights",
    "truncated weights",
    "weights of 10 bytes",
    "empty weights",
    "garbage header",
    "header length 10**15",
    "mis-shaped weights",
    "a weight missing",
    "NaN weights",
    "config not JSON",
    "config missing",
    "config deep",
    "config a list",
    "tokenizer files missing",
    "tokenizer.json garbage",
]
for _kind in DAMAGES:
    add("checkpoints: load_checkpoint", _kind, lambda kind=_kind: load_folder(_damaged(kind)))
for _kind in ("truncated weights", "mis-shaped weights", "config missing", "NaN weights", "tokenizer.json garbage"):
    add("checkpoints: CLI sweep", _kind, lambda kind=_kind: sweep_folder(_damaged(kind)), cli=True)
add("checkpoints: load_checkpoint", "an empty folder", lambda: load_folder(fresh("empty-ckpt")))
add("checkpoints: load_checkpoint", "a file, not a folder", lambda: load_folder(ROOT / "texts.txt"))
add("checkpoints: Checkpoint", "step -1", lambda: ia.checkpoints.Checkpoint(step=-1, source="x"))
add("checkpoints: Checkpoint", "step 1.5", lambda: ia.checkpoints.Checkpoint(step=1.5, source="x"))
add("checkpoints: Checkpoint", "step True", lambda: ia.checkpoints.Checkpoint(step=True, source="x"))
add("checkpoints: Checkpoint", "source ''", lambda: ia.checkpoints.Checkpoint(step=0, source=""))
add("checkpoints: Checkpoint", "revision 5", lambda: ia.checkpoints.Checkpoint(step=0, source="a/b", revision=5))


# ------------------------------------------------------------------ command line
# ------------------------------------------------------------------ issue 40: the doors of sharing, duplicates


# ------------------------------------------------------------------ issue 40: what a resume reads back is fingerprinted
def _fingerprinted(name: str, tamper: Callable[[Path], Any], *, resume_steps: tuple[int, ...] = (0, 4)) -> Any:
    """A finished sweep of two checkpoints (steps 0 and 4), copied with the rows of step 4 lost (interrupted),
    `tamper`ed, then resumed over `resume_steps`. Holds (warning again the `ResultsFileWarning` it saw) when the
    resume fitted the altered file again and its rows equal the finished sweep's; our error when it refuses."""
    from interpreto_anisotropy.errors import ResultsFileWarning

    fix = fixtures()
    run = ROOT / "fingerprinted" / name
    shutil.rmtree(run, ignore_errors=True)
    for step in (0, 4):
        shutil.copytree(fix["checkpoint"], run / f"checkpoint-{step}")
    checkpoints = ia.checkpoints.local(str(run / "checkpoint-*"))
    arguments = {"split_point": 1, "texts": fix["texts"][:6], "probe_texts": fix["texts"][6:], "nb_concepts": 2}
    arguments.update(reference="both", progress=False)
    with warnings.catch_warnings(record=True) as caught:  # only the resume's ResultsFileWarning is shown again
        warnings.simplefilter("always")
        whole = ia.CheckpointSweep(checkpoints, results_dir=run / "whole", **arguments).run()
        folder = run / "resumed"
        shutil.copytree(run / "whole", folder)
        lines = (folder / "rows.jsonl").read_text().splitlines(keepends=True)
        (folder / "rows.jsonl").write_text("".join(line for line in lines if json.loads(line)["step"] != 4))
        tamper(folder)
        ours = [c for c in checkpoints if c.step in resume_steps]
        resumed = ia.CheckpointSweep(ours, results_dir=folder, **arguments).run()
    altered = [w.message for w in caught if issubclass(w.category, ResultsFileWarning)]
    same = [_timeless(row) for row in resumed.rows] == [_timeless(row) for row in whole.rows]
    if not altered or not same:
        raise AssertionError(f"resumed past an altered file: warned {bool(altered)}, rows equal {same}")
    warnings.warn(altered[0], stacklevel=1)
    return resumed


def _timeless(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "wall_seconds"}


def _swap(target: str, source: str) -> Callable[[Path], Any]:
    return lambda folder: shutil.copy(folder / source, folder / target)


def _more_rows(name: str) -> Callable[[Path], Any]:
    def tamper(folder: Path) -> None:
        content = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**content, "n_rows": content["n_rows"] + 1}))

    return tamper


def _read_altered_top_tokens() -> Any:
    folder = fresh("fingerprinted-read")
    finished = sweep(results_dir=folder).run()
    _more_rows("top_tokens/1/step-0.json")(folder)
    return finished.top_tokens(1)


FINGERPRINTED = {
    "reference tangent swapped for another valid tangent": _swap(
        "reference/1.safetensors", "tangents/1/step-0.safetensors"
    ),
    "per-checkpoint tangent swapped for another valid tangent": _swap(
        "tangents/1/step-0.safetensors", "reference/1.safetensors"
    ),
    "top-tokens file altered (still valid)": _more_rows("top_tokens/1/step-0.json"),
}
for _name, _tamper in FINGERPRINTED.items():
    add(
        "results: fingerprinted files",
        _name,
        lambda tamper=_tamper, name=_name: _fingerprinted(str(abs(hash(name))), tamper),
        warn_ok=True,
    )
add(
    "results: fingerprinted files",
    "tangent of a checkpoint the resume lacks altered",
    lambda: _fingerprinted(
        "lacks", _swap("tangents/1/step-4.safetensors", "reference/1.safetensors"), resume_steps=(0,)
    ),
)
add("results: fingerprinted files", "top-tokens file altered, then read", _read_altered_top_tokens)


def _unfitted() -> Any:
    return ia.PCATangent(fixtures()["mwsp"], nb_concepts=2)


ISSUE_40 = {
    "save_pretrained(None)": lambda: _unfitted().save_pretrained(None),
    "save_pretrained(5)": lambda: _unfitted().save_pretrained(5),
    "save_pretrained('')": lambda: _unfitted().save_pretrained(""),
    "from_pretrained(None)": lambda: ia.TangentExplainer.from_pretrained(None, fixtures()["mwsp"]),
    "from_pretrained(5)": lambda: ia.TangentExplainer.from_pretrained(5, fixtures()["mwsp"]),
    "from_pretrained(300 characters)": lambda: ia.TangentExplainer.from_pretrained("x" * 300, fixtures()["mwsp"]),
    "push_to_hub('../x')": lambda: _unfitted().push_to_hub("../x"),
    "push_to_hub('a/b/c')": lambda: _unfitted().push_to_hub("a/b/c"),
    "push_to_hub('')": lambda: _unfitted().push_to_hub(""),
    "push_to_hub('me/t<script>')": lambda: _unfitted().push_to_hub("me/t<script>"),
    "push_to_hub(private='yes')": lambda: _unfitted().push_to_hub("me/t", private="yes"),
    "PCATangent device 'meta'": lambda: ia.PCATangent(fixtures()["mwsp"], nb_concepts=2, device="meta"),
    "two checkpoints of one step": lambda: sweep(
        checkpoints=[ia.checkpoints.Checkpoint(8, "/a/step-8"), ia.checkpoints.Checkpoint(8, "/b/step-8")]
    ),
    "two tangents of one name": lambda: ia.GradientProbe(fixtures()["mwsp"]).run(
        fixtures()["texts"][:2], {1: fixtures()["tangent"], "1": fixtures()["tangent"]}, progress=False
    ),
}
for _name, _call in ISSUE_40.items():
    add("issue 40: doors and duplicates", _name, _call)
add(
    "issue 40: doors and duplicates",
    "sweep --device-map deep JSON",
    lambda: cli_sweep("--device-map", DEEP.decode()),
    cli=True,
)
add(
    "issue 40: doors and duplicates",
    "sweep --method-kwargs deep JSON",
    lambda: cli_sweep("--method-kwargs", DEEP.decode()),
    cli=True,
)


def cli(*arguments: str) -> int:
    return cli_main(list(arguments))


def cli_sweep(*extra: str, texts: str | None = None) -> int:
    fix = fixtures()
    arguments = ["sweep", "--model", str(fix["checkpoint"].parent), "--split-point", "1"]
    arguments += ["--texts", texts if texts is not None else str(ROOT / "texts.txt")]
    return cli(*arguments, "--out", str(fresh("cli")), "--no-progress", "--no-report", *extra)


BAD_FLAGS: dict[str, tuple[str, ...]] = {
    "--batch-size 0": ("--batch-size", "0"),
    "--batch-size -1": ("--batch-size", "-1"),
    "--batch-size abc": ("--batch-size", "abc"),
    "--batch-size 1.5": ("--batch-size", "1.5"),
    "--batch-size nan": ("--batch-size", "nan"),
    "--n-controls 0": ("--n-controls", "0"),
    "--nb-concepts x": ("--nb-concepts", "x"),
    "--nb-concepts 10**6": ("--nb-concepts", "1000000"),
    "--early-fraction 2": ("--early-fraction", "2"),
    "--early-fraction nan": ("--early-fraction", "nan"),
    "--seed -1": ("--seed", "-1"),
    "--seed 2**70": ("--seed", str(2**70)),
    "--max-tokens 0": ("--max-tokens", "0"),
    "--max-fit-tokens -3": ("--max-fit-tokens", "-3"),
    "--device quantum": ("--device", "quantum"),
    "--autocast fp8": ("--autocast", "fp8"),
    "--parallel x": ("--parallel", "x"),
    "--objective nope": ("--objective", "nope"),
    "--method nope": ("--method", "nope"),
    "--reference late": ("--reference", "late"),
    "--prefetch -1": ("--prefetch", "-1"),
    "--max-cache-gb nan": ("--max-cache-gb", "nan"),
    "--hub-timeout 0": ("--hub-timeout", "0"),
    "--n-random 0": ("--n-random", "0"),
    "--steps a,b": ("--steps", "a,b"),
    "--revisions with a folder": ("--revisions", "main"),
    "--split-point ''": ("--split-point", ""),
    "--split-point nope.layer": ("--split-point", "nope.layer"),
    "--split-point 99": ("--split-point", "99"),
    "--corpus nope": ("--corpus", "nope"),
}
for _name, _flags in BAD_FLAGS.items():
    add("CLI: sweep flags", _name, lambda flags=_flags: cli_sweep(*flags), cli=True)


def texts_file(name: str, content: bytes) -> str:
    path = ROOT / "texts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    return str(path)


BAD_TEXTS: dict[str, tuple[str, bytes]] = {
    "empty .txt": ("empty.txt", b""),
    "only blank lines": ("blank.txt", b"\n\n  \n"),
    "binary .txt": ("binary.txt", bytes(range(256)) * 10),
    "not UTF-8 .txt": ("latin.txt", b"caf\xe9 au lait\n"),
    "deep .json": ("deep.json", DEEP),
    "deep .jsonl line": ("deep.jsonl", b'{"text": "a"}\n' + DEEP + b"\n"),
    "5000-digit number .json": ("big.json", b"[" + b"9" * 5000 + b"]"),
    ".json a dict": ("dict.json", b'{"a": 1}'),
    ".json of numbers": ("numbers.json", b"[1, 2, 3]"),
    ".jsonl without text key": ("nokey.jsonl", b'{"body": "a"}\n'),
    ".jsonl text a number": ("number.jsonl", b'{"text": 5}\n'),
    ".jsonl a torn line": ("torn.jsonl", b'{"text": "a"}\n{"text": "b'),
    ".json truncated": ("torn.json", b'["a", "b'),
}
for _name, (_file, _content) in BAD_TEXTS.items():
    add(
        "CLI: texts files",
        _name,
        lambda file=_file, content=_content: cli_sweep(texts=texts_file(file, content)),
        cli=True,
    )
add("CLI: texts files", "a missing texts file", lambda: cli_sweep(texts=str(ROOT / "missing.txt")), cli=True)
add("CLI: texts files", "a folder as texts file", lambda: cli_sweep(texts=str(ROOT)), cli=True)
add("CLI: texts files", "--probe-texts missing", lambda: cli_sweep("--probe-texts", str(ROOT / "nope.txt")), cli=True)

add("CLI: commands", "no command", lambda: cli(), cli=True)
add("CLI: commands", "unknown command", lambda: cli("frobnicate"), cli=True)
add(
    "CLI: commands",
    "sweep without --model",
    lambda: cli("sweep", "--split-point", "1", "--out", str(fresh("x"))),
    cli=True,
)
add(
    "CLI: commands",
    "sweep --model a missing folder",
    lambda: cli(
        "sweep", "--model", str(ROOT / "nope"), "--split-point", "1", "--out", str(fresh("y")), "--no-progress"
    ),
    cli=True,
)
add(
    "CLI: commands",
    "sweep --out an existing file",
    lambda: cli(
        "sweep",
        "--model",
        str(fixtures()["checkpoint"].parent),
        "--split-point",
        "1",
        "--texts",
        str(ROOT / "texts.txt"),
        "--out",
        str(ROOT / "texts.txt"),
        "--no-progress",
    ),
    cli=True,
)
add(
    "CLI: commands",
    "sweep --pythia and --model",
    lambda: cli("sweep", "--pythia", "70m", "--model", "x", "--split-point", "1", "--out", str(fresh("z"))),
    cli=True,
)
add(
    "CLI: commands",
    "sweep --pythia 3b (no such size)",
    lambda: cli(
        "sweep", "--pythia", "3b", "--steps", "0", "--split-point", "1", "--out", str(fresh("w")), "--no-progress"
    ),
    cli=True,
)
add("CLI: commands", "report a missing folder", lambda: cli("report", str(ROOT / "nope")), cli=True)
add("CLI: commands", "report a file", lambda: cli("report", str(ROOT / "texts.txt")), cli=True)
add(
    "CLI: commands",
    "report --out onto a file",
    lambda: cli("report", str(results_folder("rep-out")), "--out", str(ROOT / "texts.txt")),
    cli=True,
)
add("CLI: commands", "demo --steps 0", lambda: cli("demo", "--steps", "0", "--out", str(fresh("demo"))), cli=True)
add(
    "CLI: commands",
    "demo --n-controls -1",
    lambda: cli("demo", "--n-controls", "-1", "--out", str(fresh("demo2"))),
    cli=True,
)
add(
    "CLI: commands",
    "demo --device quantum",
    lambda: cli("demo", "--device", "quantum", "--steps", "1", "--out", str(fresh("demo3")), "--no-progress"),
    cli=True,
)


# ------------------------------------------------------------------ running and classifying
def _classify(item: Case) -> tuple[str, str]:
    stderr = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
        warnings.simplefilter("always")
        try:
            returned = item.run()
        except AnisotropyError as error:
            message = str(error).strip()
            return ("HELD", f"{type(error).__name__}: {message[:160]}") if message else ("FAILED", "our error, empty")
        except SystemExit as exit_:
            code = exit_.code
            text = stderr.getvalue().strip().splitlines()
            if item.cli and code == 2 and text:
                return "HELD", f"exit 2 (argparse): {text[-1][:160]}"
            return "FAILED", f"SystemExit {code!r}"
        except TypeError as error:
            if "unexpected keyword argument" in str(error):  # Python's own signature check, naming the option
                return "HELD", f"TypeError (signature): {str(error)[:160]}"
            tb = traceback.extract_tb(error.__traceback__)[-1]
            return "FAILED", f"raw TypeError at {Path(tb.filename).name}:{tb.lineno}: {str(error).strip()[:160]}"
        except BaseException as error:  # noqa: BLE001  (classifying is the point)
            tb = traceback.extract_tb(error.__traceback__)[-1]
            where = f"{Path(tb.filename).name}:{tb.lineno}"
            return "FAILED", f"raw {type(error).__name__} at {where}: {str(error).strip()[:160]}"
    text = stderr.getvalue().strip().splitlines()
    if item.cli:
        if returned == 2 and text:
            return "HELD", f"exit 2: {text[-1][:160]}"
        return "FAILED", f"exit {returned!r}, stderr {text[-1][:120] if text else '(empty)'!r}"
    messages = [str(w.message) for w in caught if str(w.message).strip()]
    if item.warn_ok and messages:
        return "HELD", f"warned: {messages[0][:160]}"
    return "FAILED", f"silently accepted (returned {type(returned).__name__})" + (
        f"; warned {messages[0][:100]!r}" if messages else ""
    )


def _child(item: Case, connection: Any) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    try:
        connection.send(_classify(item))
    except BaseException as error:  # noqa: BLE001
        connection.send(("FAILED", f"the case itself broke: {type(error).__name__}: {error}"))


def run_case(item: Case, bound: float) -> tuple[str, str]:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(item, sender))
    process.start()
    if receiver.poll(bound):
        outcome = receiver.recv()
        process.join(5)
        return outcome
    process.kill()
    process.join()
    if process.exitcode not in (None, -9):
        return "FAILED", f"child died with exit code {process.exitcode} (memory cap {MEMORY_CAP >> 30} GiB?)"
    return "FAILED", f"no answer within {bound:g} s (hang, or killed)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound", type=float, default=60.0, help="seconds a case may take")
    parser.add_argument("-k", default="", help="run only the cases whose group or name contains this")
    parser.add_argument("--verbose", action="store_true", help="print every case, not only the FAILED ones")
    args = parser.parse_args()
    fixtures()
    selected = [c for c in CASES if args.k.lower() in f"{c.group} {c.name}".lower()]
    outcomes: list[tuple[Case, str, str]] = []
    for item in selected:
        verdict, detail = run_case(item, args.bound)
        outcomes.append((item, verdict, detail))
        if args.verbose:
            print(f"{verdict:<7}{item.group} / {item.name}: {detail}", flush=True)
    groups: dict[str, list[int]] = {}
    for item, verdict, _ in outcomes:
        counts = groups.setdefault(item.group, [0, 0])
        counts[verdict == "FAILED"] += 1
    print(f"\n{'group':<36}{'HELD':>6}{'FAILED':>8}")
    for group, (held, failed) in groups.items():
        print(f"{group:<36}{held:>6}{failed:>8}")
    held = sum(v == "HELD" for _, v, _ in outcomes)
    print(f"{'all':<36}{held:>6}{len(outcomes) - held:>8}   ({len(outcomes)} cases)")
    failed = [(item, detail) for item, verdict, detail in outcomes if verdict == "FAILED"]
    if failed:
        print("\nFAILED:")
        for item, detail in failed:
            print(f"- {item.group} / {item.name}: {detail}")
    shutil.rmtree(ROOT, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
