# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Sweep an encoder's checkpoints with its masked-LM training loss (EuroBERT), or a toy encoder offline with --toy.

Encoders are trained with masked language modelling, so the probed gradient is that of the masked-LM loss: 15 %
of the real, non-special tokens of each probe text are selected (BERT's 80/10/10 scheme, a seeded mask that is the
same for the same text and seed), the loss is summed over them, and every real token gets a gradient row.

Hub checkpoints: EuroBERT's intermediate checkpoints have no helper in `ia.checkpoints`, since their revision
names could not be confirmed; give each as STEP=REVISION (check the names on the model's page):

    python examples/eurobert_mlm.py --model EuroBERT/EuroBERT-210m --revision 0=REV0 --revision 10000=REV1 \\
        --revision 20000=main --split-point 6 --texts texts.txt --out runs/eurobert --device cuda

Local checkpoint folders (checkpoint-N, stepN, step-N) of any encoder with a masked-LM head:

    python examples/eurobert_mlm.py --checkpoints 'runs/my-encoder/checkpoint-*' --split-point 6 --texts texts.txt

Offline, on the CPU, in well under a minute (a toy EuroBERT trained here with masked LM):

    python examples/eurobert_mlm.py --toy
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _revision(value: str) -> tuple[int, str]:
    step, separator, revision = value.partition("=")
    if not separator or not step.strip().isdigit() or not revision.strip():
        raise argparse.ArgumentTypeError(f"expected STEP=REVISION, e.g. 10000=step10000, got {value!r}")
    return int(step), revision.strip()


def _split_point(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() else value


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--toy", action="store_true", help="offline: train a toy EuroBERT and sweep its checkpoints")
    source.add_argument("--model", help="a Hugging Face Hub model id, with --revision STEP=REVISION (repeated)")
    source.add_argument("--checkpoints", help="a glob of local checkpoint folders")
    parser.add_argument("--revision", type=_revision, action="append", default=[], help="STEP=REVISION, repeated")
    parser.add_argument("--split-point", type=_split_point, nargs="+", help="layer index or module path (default: 1)")
    parser.add_argument("--texts", help="texts file, one text a line (default: the toy corpus of stdlib docstrings)")
    parser.add_argument("--max-texts", type=int, default=400, help="fit texts taken from the toy corpus")
    parser.add_argument("--nb-concepts", type=int, help="tangent rank k (default: 16; 8 for --toy)")
    parser.add_argument("--method", default="pca", help="tangent method: pca, semi_nmf, ica, topk_sae, ...")
    parser.add_argument("--n-controls", type=int, default=20, help="matched-rank normal controls (default: 20)")
    parser.add_argument("--max-tokens", type=int, help="cap on probed tokens per checkpoint")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mask, the controls and the bootstrap")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--out", default="runs/examples/eurobert", help="results folder")
    parser.add_argument("--toy-steps", type=int, default=60, help="training steps of the --toy model (default: 60)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; returns the exit status (2 for a user mistake, with a one-line message)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model and not args.revision:
        parser.error("--model needs at least one --revision STEP=REVISION")
    # Heavy imports after parsing, so that --help answers at once.
    import torch

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.cli import read_texts

    start = time.perf_counter()
    progress = not args.no_progress
    out = Path(args.out)
    max_texts = args.max_texts
    try:
        if args.toy:
            torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
            print(f"training a toy EuroBERT (masked LM) for {args.toy_steps} steps -> {out / 'toy'}")
            run = ia.demo.train_toy(
                out / "toy",
                arch="eurobert",
                steps=args.toy_steps,
                checkpoint_steps=sorted({0, 4, args.toy_steps // 4, args.toy_steps}),
                max_train_texts=800,
                overwrite=True,
                progress=progress,
            )
            print(f"masked-LM loss {run.losses[0]:.2f} -> {run.losses[-1]:.2f}")
            checkpoints = ia.checkpoints.local(out / "toy" / "checkpoint-*")
            max_texts = min(max_texts, 40)
        elif args.model:
            checkpoints = ia.checkpoints.hub(args.model, dict(args.revision))
        else:
            checkpoints = ia.checkpoints.local(args.checkpoints)
        if args.texts:
            texts, probe_texts = read_texts(args.texts), None
        else:
            texts = [text for text in ia.demo.load_corpus("fit", progress=progress) if len(text) <= 400][:max_texts]
            probe_texts = [text for text in ia.demo.load_corpus("probe", progress=progress) if len(text) <= 400]
            probe_texts = probe_texts[: max(8, max_texts * 3 // 5)]
        sweep = ia.CheckpointSweep(
            checkpoints,
            split_point=args.split_point or [1],
            texts=texts,
            probe_texts=probe_texts,
            objective="masked_lm",
            method=args.method,
            nb_concepts=args.nb_concepts or (8 if args.toy else 16),
            reference="both",
            n_controls=args.n_controls,
            seed=args.seed,
            max_tokens=args.max_tokens,
            results_dir=out / "sweep",
            device=args.device or ("cpu" if args.toy else None),
            batch_size=args.batch_size,
            overwrite=args.toy,
            progress=progress,
        )
        table = sweep.run()
        print(table.summary_table())
        report = ia.write_report(table, out / "report", title="Masked-LM sweep")
    except ia.AnisotropyError as error:
        print(f"eurobert_mlm: error: {error}", file=sys.stderr)
        return 2
    print(f"\nreport: {report}\nwall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
