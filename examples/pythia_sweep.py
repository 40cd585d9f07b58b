# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Sweep real Pythia checkpoints (EleutherAI/pythia-SIZE, revisions stepN), or a toy run offline with --toy.

Fits the reference tangent on activations pooled over the early checkpoints (the first 30 % of the steps you
give), then probes each checkpoint's causal-LM gradients at the split point against it and 20 matched-rank normal
controls, and writes rows.jsonl, config.json and an HTML report to --out. Rerunning the same command resumes.

Real checkpoints need the Hugging Face Hub (or a cache that already holds them) and, for sizes above 160m, a GPU:

    python examples/pythia_sweep.py --size 160m --steps 0,1000,8000,143000 --split-point 6 \\
        --texts texts.txt --out runs/pythia-160m --device cuda

Offline, on the CPU, in well under a minute (a toy GPT-NeoX trained here, with Pythia-like checkpoints):

    python examples/pythia_sweep.py --toy
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _int_list(value: str) -> list[int]:
    try:
        return [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None


def _split_point(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() else value


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--toy", action="store_true", help="offline: train a toy GPT-NeoX and sweep its checkpoints")
    parser.add_argument("--size", default="160m", help="Pythia size: 14m, 70m, 160m, 410m, 1b, ... (default: 160m)")
    parser.add_argument(
        "--steps",
        type=_int_list,
        default=[0, 1000, 8000, 143000],
        help="comma-separated published Pythia steps (default: 0,1000,8000,143000)",
    )
    parser.add_argument("--deduped", action="store_true", help="the models trained on the deduplicated Pile")
    parser.add_argument(
        "--split-point",
        type=_split_point,
        nargs="+",
        help="layer index or module path, several allowed (default: 6 for Pythia, 1 for --toy)",
    )
    parser.add_argument("--texts", help="texts file, one text a line (default: the toy corpus of stdlib docstrings)")
    parser.add_argument("--max-texts", type=int, default=400, help="fit + probe texts taken from the toy corpus")
    parser.add_argument("--nb-concepts", type=int, help="tangent rank k (default: 16; 8 for --toy)")
    parser.add_argument("--method", default="pca", help="tangent method: pca, semi_nmf, ica, topk_sae, ...")
    parser.add_argument("--n-controls", type=int, default=20, help="matched-rank normal controls (default: 20)")
    parser.add_argument("--max-tokens", type=int, help="cap on probed tokens per checkpoint")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--out", help="results folder (default: runs/examples/pythia-SIZE, or .../pythia-toy)")
    parser.add_argument("--toy-steps", type=int, default=80, help="training steps of the --toy model (default: 80)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; returns the exit status (2 for a user mistake, with a one-line message)."""
    args = build_parser().parse_args(argv)
    # Heavy imports after parsing, so that --help answers at once.
    import torch

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.cli import read_texts

    start = time.perf_counter()
    progress = not args.no_progress
    try:
        if args.toy:
            torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
            out = Path(args.out or "runs/examples/pythia-toy")
            print(f"training a toy GPT-NeoX for {args.toy_steps} steps -> {out / 'toy'}")
            run = ia.demo.train_toy(
                out / "toy",
                steps=args.toy_steps,
                checkpoint_steps=sorted({0, 4, args.toy_steps // 4, args.toy_steps}),
                max_train_texts=800,
                overwrite=True,
                progress=progress,
            )
            checkpoints = ia.checkpoints.local(out / "toy" / "checkpoint-*")
            split_points = args.split_point or [1]
            nb_concepts = args.nb_concepts or 8
            device = args.device or "cpu"
            max_texts = min(args.max_texts, 40)
            print(f"loss {run.losses[0]:.2f} -> {run.losses[-1]:.2f}")
        else:
            checkpoints = ia.checkpoints.pythia(args.size, args.steps, deduped=args.deduped)
            out = Path(args.out or f"runs/examples/pythia-{args.size}")
            split_points = args.split_point or [6]
            nb_concepts = args.nb_concepts or 16
            device = args.device
            max_texts = args.max_texts
        if args.texts:
            texts, probe_texts = read_texts(args.texts), None
        else:
            texts = [text for text in ia.demo.load_corpus("fit", progress=progress) if len(text) <= 400][:max_texts]
            probe_texts = [text for text in ia.demo.load_corpus("probe", progress=progress) if len(text) <= 400]
            probe_texts = probe_texts[: max(8, max_texts * 3 // 5)]
        source = out / "toy" if args.toy else checkpoints[0].source
        print(f"sweeping {len(checkpoints)} checkpoints of {source} at split point(s) {split_points}")
        sweep = ia.CheckpointSweep(
            checkpoints,
            split_point=split_points,
            texts=texts,
            probe_texts=probe_texts,
            objective="causal_lm",
            method=args.method,
            nb_concepts=nb_concepts,
            reference="early",
            n_controls=args.n_controls,
            max_tokens=args.max_tokens,
            results_dir=out / "sweep",
            device=device,
            batch_size=args.batch_size,
            overwrite=args.toy,
            progress=progress,
        )
        table = sweep.run()
        print(table.summary_table())
        report = ia.write_report(table, out / "report", title=f"Pythia sweep: {source}")
    except ia.AnisotropyError as error:
        print(f"pythia_sweep: error: {error}", file=sys.stderr)
        return 2
    print(f"\nreport: {report}\nwall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
