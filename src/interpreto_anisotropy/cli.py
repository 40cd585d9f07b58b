# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The `interpreto-anisotropy` command: `demo`, `sweep` and `report`.

interpreto-anisotropy demo                      # train a toy GPT-NeoX with checkpoints and a live probe, sweep it, report
interpreto-anisotropy sweep --model runs/demo/toy --split-point 1 --corpus stdlib --out runs/demo/cli-sweep
interpreto-anisotropy sweep --pythia 160m --steps 0,1000,8000,143000 --split-point 6 --texts t.txt --out out/
interpreto-anisotropy report runs/toy/sweep     # rebuild the report of a finished or partial sweep
interpreto-anisotropy report runs/demo/sweep --live runs/demo/live   # ... with a live run drawn next to it
"""

from __future__ import annotations

# Torch, Interpreto and matplotlib are imported inside the commands: `--help` and `--version` answer without them.
import argparse
import contextlib
import dataclasses
import functools
import sys
import time
import warnings
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from .commons.files import json_lines, parse_json, read_text
from .commons.options import FRACTION, POSITIVE_INT, SEED, Bound
from .errors import AnisotropyError, InvalidInputError
from .sweeps.config import SweepConfig, option_flag, type_members
from .version import __version__


class Corpus(str, Enum):
    """Built-in corpora for `sweep --corpus`, so that no texts file is needed."""

    #: Docstrings of the installed Python standard library (the demo's corpus): its "fit" and "probe" splits.
    STDLIB = "stdlib"


#: Texts the built-in corpus gives a sweep: as many and as short as the demo's, to keep a toy sweep near its cost.
CORPUS_FIT_TEXTS = 160
CORPUS_PROBE_TEXTS = 80
CORPUS_MAX_CHARS = 600

#: Windows of the demo's live probe over its training (a window every 10 steps of the default 300).
DEMO_LIVE_WINDOWS = 30
#: The width d of the demo's toy GPT-NeoX (its tangent rank must stay below d / 2).
DEMO_HIDDEN_SIZE = 64


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout and shows each option's default (unless its help already says it, or it has none)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if isinstance(action, argparse._StoreFalseAction):
            return f"turn off (on by default): {text}"
        unset = action.default is None or action.default is False or action.default is argparse.SUPPRESS
        if "default" in text or unset or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


__all__ = [
    "main",
    "build_parser",
    "read_texts",
    "parse_int_list",
    "parse_split_point",
    "parse_positive_int",
    "parse_seed",
    "parse_fraction",
    "sweep_config",
    "Corpus",
    "corpus_texts",
]


def read_texts(path: str | Path) -> list[str]:
    """Texts from a UTF-8 file: `.jsonl` (one {"text": ...} object a line), `.json` (a list of strings), else one text
    a line.

    Args:
        path: The texts file. Blank texts are dropped.

    Returns:
        The non-blank texts, in file order.

    Raises:
        InvalidInputError: A missing, unreadable, non-UTF-8 or empty file, or one not in its suffix's format (the
            message names the file, the line or item, and the format expected).

    Examples:
        >>> texts = read_texts("texts.jsonl")  # doctest: +SKIP
    """
    path, advice = Path(path), "Give a UTF-8 text file, one text a line, or a .jsonl / .json file."
    if not path.is_file():
        raise InvalidInputError(f"Texts file {path} {'is a folder' if path.is_dir() else 'does not exist'}: {advice}")
    content = read_text(path, error=InvalidInputError, advice=advice, encoding="utf-8-sig")
    texts = _json_texts(content, path) if path.suffix in _FORMATS else content.splitlines()
    if not (texts := [text for text in texts if text.strip()]):
        raise InvalidInputError(f"Texts file {path} is empty: give one text per line (or a .jsonl / .json file).")
    return texts


#: What a .jsonl / .json texts file must hold, as its errors say it.
_FORMATS = {
    ".jsonl": 'each line of a .jsonl texts file must be a JSON object such as {"text": "some text"}',
    ".json": 'a .json texts file must hold a JSON list of strings, such as ["first text", "second text"]',
}


def _json_texts(content: str, path: Path) -> list[str]:
    """The texts of a .jsonl file (a {"text": ...} object a line) or a .json one (a list of strings)."""
    form = _FORMATS[path.suffix]
    given = {"error": InvalidInputError, "advice": form[0].upper() + form[1:] + "."}
    if path.suffix == ".json":
        if not isinstance(texts := parse_json(content, path, **given), list):
            raise InvalidInputError(f"{path} holds {_json_kind(texts)}, not a list: {form}.")
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"Item {index} of {path} is {_json_kind(text)}, not a string: {form}.")
        return texts
    texts = []
    for number, record in json_lines(content, path, **given):  # blank lines hold no text
        text = record.get("text", ...) if isinstance(record, dict) else ...  # ...: no "text" (JSON has no Ellipsis)
        if not isinstance(text, str):
            what = 'no "text" field' if text is ... else f'a "text" that is {_json_kind(text)}'
            raise InvalidInputError(f"Line {number} of {path} has {what}: {form}.")
        texts.append(text)
    return texts


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words ("an object", "null", ...)."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def parse_int_list(value: str) -> list[int]:
    """Comma-separated non-negative integers ("0,1000,8000") as a list, for argparse `type=`.

    Args:
        value: The option's text.

    Returns:
        The integers.

    Raises:
        argparse.ArgumentTypeError: A part that is not an integer, or a negative one.

    Examples:
        >>> parse_int_list("0,1000, 8000")
        [0, 1000, 8000]
    """
    try:
        numbers = [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        numbers = [-1]
    if any(number < 0 for number in numbers):
        raise argparse.ArgumentTypeError(f"expected comma-separated non-negative integers, got {value!r}")
    return numbers


# argparse `type=` parsers (argparse names the option in their error); their ranges are `commons.options`' bounds.
def parse_positive_int(value: str) -> int:
    """An integer of at least 1 (a size, a rank, a cap): `parse_positive_int("8")` is 8."""
    return POSITIVE_INT.parse(value)


def parse_seed(value: str) -> int:
    """A seed, an integer in [0, 2**32): `parse_seed("0")` is 0."""
    return SEED.parse(value)


def parse_fraction(value: str) -> float:
    """A number in (0, 1]: `parse_fraction("0.3")` is 0.3."""
    return FRACTION.parse(value)


def parse_split_point(value: str) -> int | str:
    """A split point option: a layer index ("3") as an int, a module path as it is, for argparse `type=`.

    Args:
        value: The option's text.

    Returns:
        An int layer index or the module path.

    Examples:
        >>> parse_split_point("3"), parse_split_point("gpt_neox.layers.3")
        (3, 'gpt_neox.layers.3')
    """
    return int(value) if value.lstrip("-").isdigit() else value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command line (one sub-command per job).

    Returns:
        An `argparse.ArgumentParser` with the sub-commands `demo`, `sweep` and `report`.

    Examples:
        >>> build_parser().parse_args(["report", "runs/toy/sweep"]).command
        'report'
    """
    parser = argparse.ArgumentParser(
        prog="interpreto-anisotropy",
        description="Tangent subspaces of the activation manifold vs true training-loss gradients, over checkpoints.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `interpreto-anisotropy COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = functools.partial(commands.add_parser, formatter_class=_HelpFormatter)
    demo = add(
        "demo",
        help="train a toy GPT-NeoX with checkpoints and a live probe on stdlib docstrings, sweep it, write the report",
        description="Trains a tiny GPT-NeoX (a Pythia miniature) on docstrings of the Python standard library, "
        f"saving Pythia-like log-spaced checkpoints, with a live probe measuring the training gradients in "
        f"{DEMO_LIVE_WINDOWS} windows, then runs the paper's protocol on the checkpoints and writes an HTML report "
        "showing both. Offline; a few minutes on 2 CPU cores.",
    )
    demo.add_argument("--out", default="runs/demo", help="output folder")
    demo.add_argument("--steps", type=parse_positive_int, default=300, help="training steps")
    demo.add_argument("--device", default="cpu", help="cpu or cuda")
    rank = f"tangent rank k (d is {DEMO_HIDDEN_SIZE}: k < {DEMO_HIDDEN_SIZE // 2})"
    demo.add_argument("--nb-concepts", type=parse_positive_int, default=8, help=rank)
    demo.add_argument("--n-controls", type=parse_positive_int, default=20, help="matched-rank normal controls R")
    demo.add_argument(
        "--seed", type=parse_seed, default=0, help="seed of the training, the controls and the bootstrap"
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_sweep_command(add)
    report = add(
        "report",
        help="rebuild the HTML report of a finished or partial sweep",
        description="Reads DIR/config.json and DIR/rows.jsonl and writes DIR/report/index.html.",
    )
    report.add_argument("dir", help="the sweep's results folder")
    report.add_argument("--out", help="report folder (default: DIR/report)")
    drawn = "results folder of a live probe of the same training: its curve is drawn next to the sweep"
    report.add_argument("--live", help=drawn)
    return parser


def _add_sweep_command(add: Any) -> None:
    sweep = add(
        "sweep",
        help="run the protocol over a model's checkpoints (local folders or hub revisions)",
        description="Fits the reference tangent on the early checkpoints, then probes every checkpoint's training-"
        "loss gradients against it and matched-rank normal controls. Results go to --out as each checkpoint "
        "finishes; rerunning the same command resumes.",
        epilog="Checkpoints come from one of:\n"
        "  --model DIR             folders DIR/checkpoint-N (or step-N, stepN) written by save_pretrained\n"
        "  --model 'GLOB'          a glob of such folders\n"
        "  --model ID --revisions step1000,step2000   hub revisions (needs the hub or a filled HF cache)\n"
        "  --pythia 160m --steps 0,1000,143000        EleutherAI/pythia-160m revisions stepN\n"
        "  --smollm2 360M --steps 40000,80000         SmolLM2 intermediate checkpoints, revisions step-N\n"
        "\nTexts come from --texts FILE, or from --corpus stdlib (the default when --texts is not given: "
        f"{CORPUS_FIT_TEXTS} fit\nand {CORPUS_PROBE_TEXTS} probe docstrings of the Python standard library, as in "
        "the demo).\n"
        "\nSeveral GPUs or machines: launch the same command with torchrun, e.g.\n"
        "  torchrun --nproc_per_node=4 -m interpreto_anisotropy.cli sweep ... --parallel checkpoints\n",
    )
    source = sweep.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a folder of checkpoint folders, a glob of them, or a hub model id")
    source.add_argument("--pythia", metavar="SIZE", help="Pythia size, e.g. 160m (with --steps)")
    source.add_argument("--smollm2", metavar="SIZE", help="SmolLM2 size, e.g. 360M (with --steps)")
    sweep.add_argument("--revisions", help="comma-separated hub revisions, with --model ID")
    sweep.add_argument("--steps", type=parse_int_list, help="comma-separated steps, with --pythia / --smollm2")
    sweep.add_argument("--deduped", action="store_true", help="the deduped Pythia suite")
    texts = sweep.add_mutually_exclusive_group()
    texts.add_argument("--texts", help="texts file: one text a line, .jsonl or .json")
    texts.add_argument(
        "--corpus",
        choices=[corpus.value for corpus in Corpus],
        help="a built-in corpus instead of --texts: stdlib = docstrings of the Python standard library (the default "
        "when --texts is not given)",
    )
    sweep.add_argument("--probe-texts", help="held-out probe texts (default: every other text of --texts)")
    options = sweep.add_argument_group("options of the sweep (SweepConfig; docs/options.md)")
    for spec in dataclasses.fields(SweepConfig):
        options.add_argument(option_flag(spec), dest=spec.name, **_argparse_form(spec))
    sweep.add_argument("--no-report", action="store_true", help="do not write the HTML report at the end")


def _argparse_form(spec: dataclasses.Field) -> dict[str, Any]:
    """How argparse takes a `SweepConfig` field, from its type: a switch, `nargs="+"`, `choices=` or a `type=`."""
    unit = f" [{spec.metadata['unit']}]" if spec.metadata["unit"] else ""
    form: dict[str, Any] = {"help": (spec.metadata["doc"] + unit).replace("%", "%%")}
    members = [member for member in type_members(spec) if member is not type(None)]
    if bool in members:
        return {**form, "action": "store_false" if spec.default is True else "store_true"}
    form.update({"required": True} if spec.default is dataclasses.MISSING else {"default": spec.default})
    choices = [choice for member in members if get_origin(member) is Literal for choice in get_args(member)]
    if any(get_origin(member) is tuple for member in members):
        return {**form, "nargs": "+", "type": parse_split_point}
    if choices and not {int, float, str, dict} & set(members):
        return {**form, "choices": choices}
    if choices:
        form["metavar"] = "{" + ",".join([*choices, "INT"]) + "}"
    number = next((member for member in members if member in (int, float)), None)
    plain = number and Bound(number, "an integer" if number is int else "a number", lambda _: True)
    if (bound := spec.metadata["bound"] or plain) and choices:  # its error names the choices too
        bound = dataclasses.replace(bound, expected=f"{', '.join(map(repr, choices))} or {bound.expected}")
    takes_none = type(None) in type_members(spec) and spec.default is not None  # `none` turns it off
    parse = functools.partial(_parse_option, choices, takes_none, dict in members, bound)
    return {**form, "type": parse}


def _parse_option(choices: list[str], takes_none: bool, json: bool, bound: Bound | None, text: str) -> Any:
    """A flag's text as its field's value (a choice, `none`, JSON, a number or the text), else argparse's error."""
    if text in choices:
        return text
    if takes_none and text.lower() == "none":
        return None
    if json:
        with contextlib.suppress(InvalidInputError):  # the safe loader: nesting bounded, no NaN
            if isinstance(value := parse_json(text, "the option's value", error=InvalidInputError), dict):
                return value
        shown = repr(text) if len(text) <= 80 else f"{text[:80]!r}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"must be a JSON object such as '{{\"max_iter\": 200}}', got {shown}")
    return text if bound is None else bound.parse(text)


def _checkpoints(args: argparse.Namespace):
    """The checkpoints that --model (a folder, a glob, a hub id with --revisions), --pythia or --smollm2 name."""
    from .sweeps import checkpoints

    if args.pythia or args.smollm2:
        if not args.steps:
            raise InvalidInputError("--pythia and --smollm2 need --steps, e.g. --steps 0,1000,143000.")
        if args.pythia:
            return checkpoints.pythia(args.pythia, args.steps, deduped=args.deduped)
        return checkpoints.smollm2(args.smollm2, args.steps)
    if args.revisions:
        return checkpoints.hub(args.model, [item for item in args.revisions.split(",") if item.strip()])
    model = Path(args.model)
    if model.is_dir():
        globs = [str(model / glob) for glob in ("checkpoint-*", "step*") if any(model.glob(glob))]
        return checkpoints.local([*globs, str(model / "checkpoint-*")][0])
    if any(char in args.model for char in "*?["):
        return checkpoints.local(args.model)
    problem = "is a file" if model.exists() else "does not exist"
    folders = "(checkpoint-N, step-N)" if model.exists() else "(after `make demo`: runs/demo/toy)"
    raise InvalidInputError(
        f"--model {args.model} {problem}: give a folder of checkpoint folders {folders}, a glob of them, or a hub "
        "model id with --revisions."
    )


def corpus_texts(corpus: str | Corpus, *, progress: bool = False) -> tuple[list[str], list[str]]:
    """The (fit texts, probe texts) of a built-in corpus, as many and as short as the demo's.

    Args:
        corpus: A `Corpus` or its value ("stdlib").
        progress: Show a progress bar while the corpus is read the first time.

    Returns:
        `CORPUS_FIT_TEXTS` fit texts and `CORPUS_PROBE_TEXTS` probe texts, each at most `CORPUS_MAX_CHARS` long.

    Examples:
        >>> fit, probe = corpus_texts("stdlib")  # doctest: +SKIP
    """
    from .demo import load_corpus

    Corpus(corpus)  # one corpus so far: the enum checks the name
    fit, probe = (
        [text for text in load_corpus(split, progress=progress) if len(text) <= CORPUS_MAX_CHARS][:count]
        for split, count in (("fit", CORPUS_FIT_TEXTS), ("probe", CORPUS_PROBE_TEXTS))
    )
    return fit, probe


def _sweep_texts(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """(fit texts, probe texts or None) from --texts / --probe-texts, else from the built-in --corpus."""
    if args.texts:
        return read_texts(args.texts), read_texts(args.probe_texts) if args.probe_texts else None
    fit, probe = corpus_texts(args.corpus or Corpus.STDLIB.value, progress=args.progress)
    return fit, read_texts(args.probe_texts) if args.probe_texts else probe


def _estimate(n: int, folder: Any, fit: Sequence[str], probe: Sequence[str] | None, config: SweepConfig) -> str:
    """How many tokens each of the `n` checkpoints will read, by the first local checkpoint's tokenizer (`folder`)."""
    from .visualizations.model_card import count_tokens

    probed = probe if probe is not None else list(fit)[1::2]
    counts = [count_tokens(folder, texts) for texts in (fit, probed)] if folder is not None else [None]
    if None in counts:
        return f"{n} checkpoints, {len(fit)} fit texts, {len(probed)} probe texts (tokens counted when loaded)"
    fit_tokens, probe_tokens = counts
    fit_used = min(fit_tokens, config.max_fit_tokens or fit_tokens)
    probe_used = min(probe_tokens, config.max_tokens or probe_tokens)
    return (
        f"{n} checkpoints; per checkpoint about {probe_used:,} probed tokens (one forward and backward pass each; "
        f"--max-tokens caps them) and {fit_used:,} fit activations (of {fit_tokens:,}; --max-fit-tokens)"
    )


def sweep_config(args: argparse.Namespace) -> SweepConfig:
    """The `SweepConfig` of a parsed `sweep` command line: each field from its flag.

    Args:
        args: `build_parser().parse_args(["sweep", ...])`.

    Returns:
        The checked config.

    Raises:
        InvalidInputError: Options that contradict each other (each flag's own range argparse has checked).

    Examples:
        >>> args = build_parser().parse_args(["sweep", "--model", "m", "--split-point", "1", "--out", "o"])
        >>> sweep_config(args).split_point
        (1,)
    """
    return SweepConfig.make(**{spec.name: getattr(args, spec.name) for spec in dataclasses.fields(SweepConfig)})


def _run_sweep(args: argparse.Namespace) -> int:
    from .commons import distributed
    from .sweeps.runner import CheckpointSweep
    from .visualizations.model_card import layer_count
    from .visualizations.report import write_report

    distributed.init_from_environment()  # a no-op unless launched by torchrun with several processes

    config = sweep_config(args)
    checkpoints = _checkpoints(args)
    first = next(iter(checkpoints), None)
    folder = first.source if first is not None and not first.revision else None  # a local checkpoint's, to read
    layers = layer_count(folder) if folder is not None else None  # split points checked before any checkpoint loads
    for split_point in args.split_point if layers is not None else ():
        if isinstance(split_point, int) and not -layers <= split_point < layers:
            raise InvalidInputError(
                f"--split-point {split_point} but the model has {layers} layers (0-{layers - 1}): give a layer "
                f"index from 0 to {layers - 1} (or a module path)."
            )
    fit_texts, probe_texts = _sweep_texts(args)
    if distributed.is_main_process():
        print(f"sweep: {_estimate(len(list(checkpoints)), folder, fit_texts, probe_texts, config)}", flush=True)
    sweep = CheckpointSweep(checkpoints, config, texts=fit_texts, probe_texts=probe_texts)
    sweep.announce = lambda line: print(f"sweep: {line}", flush=True)  # the time estimates, progress bar or not
    table = sweep.run()
    if distributed.is_main_process():
        _tell(table, *() if args.no_report else [f"report: {write_report(table, config.results_dir / 'report')}"])
    return 0


def _tell(table: Any, *lines: str) -> None:
    """Print the table's summary table, `lines`, then its verdict (what a reader sees when the command returns)."""
    print(table.summary_table(), *lines, f"\n{table.summary()}", sep="\n")


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import train_toy
    from .results.table import SweepResult
    from .sweeps.runner import CheckpointSweep
    from .tangents.controls import check_control_room
    from .visualizations.report import write_report

    check_control_room(args.nb_concepts, DEMO_HIDDEN_SIZE, option="--nb-concepts")  # before training, not after
    start, out, progress = time.perf_counter(), Path(args.out), not args.no_progress
    toy = out / "toy"
    every = max(1, args.steps // DEMO_LIVE_WINDOWS)
    print(
        f"[1/3] training a toy GPT-NeoX for {args.steps} steps with log-spaced checkpoints -> {toy}, and a "
        f"live probe of its gradients every {every} step(s) -> {out / 'live'}"
    )
    shared = {"nb_concepts": args.nb_concepts, "n_controls": args.n_controls, "seed": args.seed}
    run_options = {"device": args.device, "overwrite": True, "progress": progress}
    live = {"split_points": 1, "results_dir": out / "live", "every": every, **shared}
    run = train_toy(toy, steps=args.steps, hidden_size=DEMO_HIDDEN_SIZE, seed=args.seed, live=live, **run_options)
    live_rows = SweepResult.load(run.live_results)
    print(
        f"      loss {run.losses[0]:.3f} -> {run.losses[-1]:.3f}, {len(run.checkpoints)} checkpoints, "
        f"{len(live_rows.rows)} live windows"
    )
    fit, probe = corpus_texts(Corpus.STDLIB, progress=progress)
    print(f"[2/3] sweeping: k={args.nb_concepts}, {args.n_controls} controls, reference tangent on early checkpoints")
    sweep = {"split_point": 1, "objective": "causal_lm", "reference": "both", "results_dir": out / "sweep", **shared}
    table = CheckpointSweep(str(toy / "checkpoint-*"), texts=fit, probe_texts=probe, **sweep, **run_options).run()
    print("[3/3] writing the report (the sweep, and the live curve next to it)")
    report = write_report(table, out / "report", live=live_rows if live_rows.rows else None)
    _tell(table, f"\nreport: {report}\nwall time: {time.perf_counter() - start:.0f} s")
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from .results.table import SweepResult
    from .visualizations.report import write_report

    table = SweepResult.load(args.dir)
    live = SweepResult.load(args.live) if args.live else None
    _tell(table, f"report: {write_report(table, args.out or Path(args.dir) / 'report', live=live)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `interpreto-anisotropy` command.

    Args:
        argv: The arguments after the program name; None reads `sys.argv`.

    Returns:
        The exit status: 0 on success, 2 for a user mistake (an `AnisotropyError`, reported in one line).

    Examples:
        >>> main(["report", "runs/toy/sweep"])  # rebuilds runs/toy/sweep/report/index.html  # doctest: +SKIP
        0
    """
    args = build_parser().parse_args(argv)
    handlers = {"demo": _run_demo, "sweep": _run_sweep, "report": _run_report}
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, category, *_, **__: print(  # one line: its category and message
            f"interpreto-anisotropy {args.command}: warning: {category.__name__}: {' '.join(str(message).split())}",
            file=sys.stderr,
        )
        try:
            return handlers[args.command](args)
        except AnisotropyError as error:
            print(f"interpreto-anisotropy {args.command}: error: {error}", file=sys.stderr)
            return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
