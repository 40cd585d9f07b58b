# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`SweepConfig` is the one declaration of a sweep's options: every field is a flag of the command line and a row of
the docs' options page, its choices are the library's enums, bad values are our errors naming the field, and the
command line's help answers without torch."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import interpreto_anisotropy as ia
from interpreto_anisotropy.cli import build_parser, sweep_config
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.anisotropy import IsoScoreConvention, IsoScoreTarget
from interpreto_anisotropy.sweeps import config as config_module
from interpreto_anisotropy.sweeps.config import (
    EarlyCentering,
    Parallelism,
    ReferenceKind,
    SweepConfig,
    option_flag,
    options_markdown,
    type_members,
)

ROOT = Path(__file__).resolve().parents[1]
FIELDS = dataclasses.fields(SweepConfig)
REQUIRED = {"split_point": 1, "results_dir": "out"}


# ------------------------------------------------------------------------------------------------ the command line
def _other_value(spec: dataclasses.Field) -> tuple[list[str], object]:
    """(the words that set the field on the command line, the value the config must then hold), a value that is not
    the field's default, chosen from its type."""
    members = type_members(spec)
    flag = option_flag(spec)
    bound = spec.metadata["bound"]
    if bool in members:
        return [flag], not spec.default
    if any(typing.get_origin(member) is tuple for member in members):
        return [flag, "2", "gpt_neox.layers.1"], (2, "gpt_neox.layers.1")
    if int in members or float in members:
        kind = int if int in members else float
        candidates = [3, 7, 1, 0] if kind is int else [0.5, 0.25, 2.5]
        value = next(c for c in candidates if c != spec.default and (bound is None or bound.holds(kind(c))))
        return [flag, str(value)], kind(value)
    choices = [c for member in members if typing.get_origin(member) is typing.Literal for c in typing.get_args(member)]
    if choices:
        value = next(choice for choice in reversed(choices) if choice != spec.default)
        return [flag, value], value
    if spec.name == "max_memory":  # a GPU index comes as a string from JSON, and is taken as the index
        return [flag, '{"0": "1GiB"}'], {0: "1GiB"}
    if spec.name == "device":  # checked to be a torch device
        return [flag, "cpu"], "cpu"
    if dict in members:
        return [flag, '{"max_iter": 50}'], {"max_iter": 50}
    if Path in members:
        return [flag, "elsewhere"], Path("elsewhere")
    return [flag, "somewhere"], "somewhere"


def test_every_field_is_reachable_from_the_command_line():
    words, expected = ["sweep", "--model", "m"], {}
    for spec in FIELDS:
        flag_words, value = _other_value(spec)
        words += flag_words
        expected[spec.name] = value
    config = sweep_config(build_parser().parse_args(words))
    for spec in FIELDS:
        assert getattr(config, spec.name) == expected[spec.name], spec.name
        if not dataclasses.MISSING == spec.default:
            assert getattr(config, spec.name) != spec.default, f"{spec.name} was not set off its default"
    assert set(expected) == {spec.name for spec in FIELDS} and len(FIELDS) >= 36


def test_the_defaults_of_the_command_line_are_the_configs():
    args = build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o"])
    assert sweep_config(args) == SweepConfig(split_point=1, results_dir="o")


@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["--call", "middle"], r"--call.*'first'.*'last'.*'middle'"),
        (["--method-kwargs", "[1]"], r"--method-kwargs.*JSON"),
        (["--isoscore-zeta", "1.5"], r"--isoscore-zeta.*\[0, 1\].*'1\.5'"),
        (["--max-cache-gb", "inf"], r"--max-cache-gb.*'inf'"),
        (["--total-steps", "nan"], r"--total-steps.*'nan'"),
    ],
)
def test_a_bad_flag_is_refused_by_the_parser_naming_it(words, named, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o", *words])
    assert re.search(named, capsys.readouterr().err)


def test_none_and_calls_by_index_on_the_command_line():
    base = ["sweep", "--model", "m", "--split-point", "1", "--out", "o"]
    config = sweep_config(build_parser().parse_args([*base, "--max-fit-tokens", "none", "--call", "-1"]))
    assert config.max_fit_tokens is None and config.call == -1


# ------------------------------------------------------------------------------------------------ the docs
def test_every_field_is_in_the_docs_options_table():
    page = (ROOT / "docs" / "options.md").read_text()
    assert page == options_markdown(), (
        "docs/options.md is out of date: python -m interpreto_anisotropy.sweeps.config > docs/options.md"
    )
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert [row.split("|")[1].strip() for row in rows] == [f"`{spec.name}`" for spec in FIELDS]
    assert all(f"`{option_flag(spec)}`" in row for spec, row in zip(FIELDS, rows, strict=True))
    assert "options.md" in (ROOT / "mkdocs.yml").read_text()


def test_every_field_has_help_and_the_class_docstring_lists_them():
    for spec in FIELDS:
        assert len(spec.metadata["doc"]) > 10, spec.name
        assert f"\n        {spec.name}: {spec.metadata['doc']}" in SweepConfig.__doc__


# ------------------------------------------------------------------------------------------------ the choices
def test_the_choices_are_the_library_s_own():
    from interpreto_anisotropy.commons.hub import DEFAULT_HUB_TIMEOUT
    from interpreto_anisotropy.metrics.isotropy import DEFAULT_ZETA
    from interpreto_anisotropy.probing.objectives import AUTO
    from interpreto_anisotropy.reading.batching import _AUTOCAST_NAMES
    from interpreto_anisotropy.tangents.explainers import tangent_method_names

    def values(enum) -> tuple[str, ...]:
        return tuple(member.value for member in enum)

    literal = typing.get_args
    assert list(literal(config_module.Method)) == tangent_method_names()
    assert literal(config_module.Reference) == values(ReferenceKind)
    assert literal(config_module.Centering) == values(EarlyCentering)
    assert literal(config_module.IsoScoreConvention) == values(IsoScoreConvention)
    assert literal(config_module.IsoScoreTarget) == values(IsoScoreTarget)
    assert literal(config_module.Parallel) == values(Parallelism)
    assert literal(config_module.Objective) == (
        AUTO,
        ia.objectives.ObjectiveName.CAUSAL_LM.value,
        ia.objectives.ObjectiveName.MASKED_LM.value,
    )
    assert set(literal(config_module.Autocast)) == set(_AUTOCAST_NAMES)
    assert config_module.DEFAULT_ZETA == DEFAULT_ZETA and config_module.DEFAULT_HUB_TIMEOUT == DEFAULT_HUB_TIMEOUT


def test_enum_members_are_taken_as_their_values():
    config = SweepConfig(**REQUIRED, reference=ReferenceKind.EACH, parallel=Parallelism.CHECKPOINTS)
    assert type(config.reference) is str and config.reference == "each" and config.parallel == "checkpoints"


# ------------------------------------------------------------------------------------------------ bad values
def _bad_values() -> list[tuple[str, object]]:
    cases = []
    for spec in FIELDS:
        members = type_members(spec)
        if spec.metadata["bound"] is not None:
            cases += [(spec.name, value) for value in (math.nan, math.inf, -math.inf, True, -1, "3")]
            if int in members:
                cases.append((spec.name, 1.5))
        elif bool in members:
            cases += [(spec.name, value) for value in ("yes", 1, None)]
        elif any(typing.get_origin(member) is typing.Literal for member in members):
            cases.append((spec.name, "nonsense"))
    return cases


@pytest.mark.parametrize(("name", "value"), _bad_values())
def test_a_bad_value_is_our_error_naming_the_option(name, value):
    options = {**REQUIRED, name: value}
    with pytest.raises(InvalidInputError, match=rf"\b{name}\b.*{re.escape(repr(value))}"):
        SweepConfig(**options)


def test_every_checked_kind_of_field_has_bad_values():
    checked = {name for name, _ in _bad_values()}
    unchecked = {"split_point", "method_kwargs", "results_dir", "device", "tokenizer_source"}
    unchecked |= {"max_memory", "offload_folder"}  # their bad values: tests/test_dispatch.py
    assert checked | unchecked == {spec.name for spec in FIELDS}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"split_point": []}, r"split_point.*\[\]"),
        ({"split_point": [1, True]}, "split_point"),
        ({"results_dir": ""}, "results_dir"),
        ({"method_kwargs": [1]}, "method_kwargs"),
        ({"objective": "sequence_classification"}, "objective.*'sequence_classification'"),
        ({"autocast_dtype": "float64"}, "autocast_dtype.*'float64'"),
        ({"call": 1.0}, r"call.*1\.0"),
        ({"hub_timeout": 0}, r"hub_timeout.*\b0\b"),
        ({"isoscore_c0": [[1.0]]}, r"isoscore_c0.*'scaled_identity'.*\[\[1\.0\]\]"),
        ({"early_centering": "per_checkpoint", "method": "nmf"}, "early_centering='per_checkpoint'.*method='nmf'"),
    ],
)
def test_bad_options_are_refused_once_naming_them(options, message):
    with pytest.raises(InvalidInputError, match=message):
        SweepConfig(**{**REQUIRED, **options})


def test_an_unknown_or_missing_option_is_our_error():
    with pytest.raises(InvalidInputError, match="'nb_concept'.*nb_concepts"):
        SweepConfig.make(**REQUIRED, nb_concept=4)
    with pytest.raises(InvalidInputError, match="results_dir="):
        SweepConfig.make(split_point=1)
    with pytest.raises(InvalidInputError, match="config.*SweepConfig"):
        SweepConfig.make({"split_point": 1})


def test_a_given_reference_is_checked_against_the_split_points():
    subspace = ia.Subspace.random(16, 2, seed=0)
    assert SweepConfig(**REQUIRED, reference=subspace).reference is subspace
    with pytest.raises(InvalidInputError, match=r"reference.*\bdict\b"):
        SweepConfig(split_point=[1, 2], results_dir="o", reference=subspace)
    with pytest.raises(InvalidInputError, match=r"missing \[2\]"):
        SweepConfig(split_point=[1, 2], results_dir="o", reference={1: subspace})


# ------------------------------------------------------------------------------------------------ the sweep takes it
def test_a_config_and_keyword_options_make_the_same_sweep(toy_checkpoints, fit_texts, tmp_path):
    glob = str(toy_checkpoints.out_dir / "checkpoint-*")
    options = {"split_point": 1, "nb_concepts": 4, "results_dir": tmp_path, "progress": False}
    by_keywords = ia.CheckpointSweep(glob, texts=fit_texts[:8], **options)
    config = ia.SweepConfig(**options)
    by_config = ia.CheckpointSweep(glob, config, texts=fit_texts[:8])
    assert by_config.config() == by_keywords.config() and by_config.plan.options is config
    changed = ia.CheckpointSweep(glob, config, texts=fit_texts[:8], seed=3, call="last")
    assert changed.plan.options.seed == 3 and config.seed == 0  # the given config is left as it is
    assert changed.config()["call"] == "last" and "call" not in by_config.config()  # absent at its default
    assert "tokenizer_source" not in by_config.config()


# ------------------------------------------------------------------------------------------------ --help without torch
HEAVY = ("torch", "interpreto", "matplotlib", "transformers")


@pytest.mark.parametrize("words", [["--help"], ["sweep", "--help"], ["--version"]])
def test_help_and_version_answer_without_importing_torch(words):
    script = (
        "import sys\n"
        "from interpreto_anisotropy.cli import main\n"
        "try:\n"
        f"    main({words!r})\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    if words == ["--version"]:
        assert done.stdout.startswith(f"interpreto-anisotropy {ia.__version__}")


def test_the_config_module_imports_no_torch():
    script = (
        "import sys\n"
        "import interpreto_anisotropy.sweeps.config as config\n"
        "config.SweepConfig(split_point=1, results_dir='o')\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------------ --tokenizer
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")
def test_checkpoints_saved_without_their_tokenizer_sweep_with_tokenizer_source(toy_checkpoints, fit_texts, tmp_path):
    """The weights alone, with the tokenizer from another folder: the rows of the checkpoints as saved."""
    bare = tmp_path / "bare"
    originals = sorted(toy_checkpoints.out_dir.glob("checkpoint-*"))[:2]
    for folder in originals:
        (bare / folder.name).mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copy(folder / name, bare / folder.name / name)
    options = {"split_point": 1, "nb_concepts": 2, "n_controls": 2, "max_fit_tokens": 300, "progress": False}
    texts = fit_texts[:8]
    with pytest.raises(ia.errors.CheckpointError, match="tokenizer_source="):
        ia.CheckpointSweep(str(bare / "checkpoint-*"), texts=texts, results_dir=tmp_path / "fails", **options).run()
    with_source = ia.CheckpointSweep(
        str(bare / "checkpoint-*"), texts=texts, results_dir=tmp_path / "s", tokenizer_source=originals[0], **options
    ).run()
    plain = ia.CheckpointSweep(
        [ia.checkpoints.Checkpoint(int(f.name.split("-")[1]), str(f)) for f in originals],
        texts=texts,
        results_dir=tmp_path / "plain",
        **options,
    ).run()
    numbers = ("energy_share", "p_value", "loss", "n_tokens", "isoscore_star")
    assert [[row[key] for key in numbers] for row in with_source.rows] == [
        [row[key] for key in numbers] for row in plain.rows
    ]
    assert json.loads((tmp_path / "s" / "config.json").read_text())["tokenizer_source"] == str(originals[0])
