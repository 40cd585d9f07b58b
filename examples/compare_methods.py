# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Compare tangent methods side by side on one checkpoint: PCA, SemiNMF, ICA, TopK SAE, SVD, NMF.

Fits one tangent per method on the same activations, probes the same training-loss gradients against all of them
in one pass (`probe.run(texts, {"pca": ..., "semi_nmf": ...})`, each with its own matched-rank normal controls),
and prints their energy shares, ratios, p-values and anisotropy captures, then the overlaps between their spans.

A local checkpoint folder or a Hub model (with --revision), on a GPU if you have one:

    python examples/compare_methods.py --model EleutherAI/pythia-160m --revision step1000 --split-point 6 \\
        --texts texts.txt --methods pca,semi_nmf,ica,topk_sae --device cuda

Offline, on the CPU, in well under a minute (a toy GPT-NeoX trained here):

    python examples/compare_methods.py --toy
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

METHODS = ("pca", "pca_sklearn", "semi_nmf", "nmf", "ica", "svd", "topk_sae")

# Fit budgets of the iterative methods (passed to the Interpreto explainer's fit).
FIT_KWARGS = {"semi_nmf": {"max_iter": 100}, "nmf": {"max_iter": 100}, "topk_sae": {"nb_epochs": 10}}
QUICK_FIT_KWARGS = {"semi_nmf": {"max_iter": 50}, "nmf": {"max_iter": 50}, "topk_sae": {"nb_epochs": 5}}


def _methods(value: str) -> list[str]:
    methods = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [method for method in methods if method not in METHODS]
    if unknown or not methods:
        raise argparse.ArgumentTypeError(f"unknown method(s) {unknown}; choose among {', '.join(METHODS)}")
    return methods


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
    source.add_argument("--toy", action="store_true", help="offline: train a toy GPT-NeoX and use its last checkpoint")
    source.add_argument("--model", help="a checkpoint folder or a Hugging Face Hub model id")
    parser.add_argument("--revision", help="Hub revision of --model (e.g. step1000)")
    parser.add_argument(
        "--methods",
        type=_methods,
        default=["pca", "semi_nmf", "ica", "topk_sae"],
        help="comma-separated methods (default: pca,semi_nmf,ica,topk_sae)",
    )
    parser.add_argument("--split-point", type=_split_point, default=None, help="layer index or module path")
    parser.add_argument("--objective", default="auto", choices=["auto", "causal_lm", "masked_lm"])
    parser.add_argument("--texts", help="texts file, one text a line (default: the toy corpus of stdlib docstrings)")
    parser.add_argument("--max-texts", type=int, default=200, help="fit texts taken from the toy corpus")
    parser.add_argument("--nb-concepts", type=int, help="tangent rank k (default: 16; 8 for --toy)")
    parser.add_argument("--top-k", type=int, default=4, help="active latents of the TopK SAE (default: 4)")
    parser.add_argument("--n-controls", type=int, default=20, help="matched-rank normal controls (default: 20)")
    parser.add_argument("--max-tokens", type=int, help="cap on probed tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--out", help="also write the results as JSON to this file")
    parser.add_argument("--toy-steps", type=int, default=60, help="training steps of the --toy model (default: 60)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Fit, probe and compare; returns the exit status (2 for a user mistake, with a one-line message)."""
    args = build_parser().parse_args(argv)
    # Heavy imports after parsing, so that --help answers at once.
    import torch
    from interpreto import ModelWithSplitPoints

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.cli import read_texts

    start = time.perf_counter()
    device = args.device or ("cpu" if args.toy or not torch.cuda.is_available() else "cuda")
    try:
        if args.toy:
            torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
            run = ia.demo.train_toy(
                "runs/examples/compare_methods/toy",
                steps=args.toy_steps,
                checkpoint_steps=[args.toy_steps],
                max_train_texts=600,
                overwrite=True,
                progress=False,
            )
            checkpoint = ia.checkpoints.Checkpoint(args.toy_steps, str(run.checkpoints[-1]))
            print(f"toy GPT-NeoX trained for {args.toy_steps} steps: loss {run.losses[0]:.2f} -> {run.losses[-1]:.2f}")
        else:
            checkpoint = ia.checkpoints.Checkpoint(
                ia.checkpoints.parse_step(args.revision or "") or 0, args.model, args.revision
            )
        model, tokenizer = ia.checkpoints.load_checkpoint(checkpoint, device=device)
        split_point = args.split_point if args.split_point is not None else (1 if args.toy else 6)
        mwsp = ModelWithSplitPoints(model, split_point=split_point, tokenizer=tokenizer, batch_size=args.batch_size)

        if args.texts:
            texts = read_texts(args.texts)
            fit_texts, probe_texts = texts[0::2], texts[1::2]
        else:
            n_fit = min(args.max_texts, 48) if args.toy else args.max_texts
            fit_texts = [text for text in ia.demo.load_corpus("fit", progress=False) if len(text) <= 400][:n_fit]
            probe_texts = [text for text in ia.demo.load_corpus("probe", progress=False) if len(text) <= 400]
            probe_texts = probe_texts[: max(8, n_fit * 2 // 3)]
        activations, _ = ia.token_activations(mwsp, fit_texts)  # each text read as alone; the probe's token rows
        d = activations.shape[1]
        k = args.nb_concepts or (8 if args.toy else 16)
        print(f"{checkpoint.source} at {mwsp.split_point}: {activations.shape[0]} fit tokens, d={d}, k={k}")

        budgets = QUICK_FIT_KWARGS if args.toy else FIT_KWARGS
        tangents = {}
        for method in args.methods:
            options = {"top_k": args.top_k} if method == "topk_sae" else {}
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence of iterative methods; rank drops are shown below
                tangent = ia.TangentExplainer(mwsp, nb_concepts=k, method=method, device=device, **options)
                tangents[method] = tangent.fit(activations, **budgets.get(method, {}))
            print(
                f"  fitted {method:<12} rank {tangents[method].subspace.rank} in {time.perf_counter() - began:.1f} s"
            )

        probe = ia.GradientProbe(mwsp, objective=args.objective, seed=args.seed)
        results = probe.run(
            probe_texts,
            {method: tangent.subspace for method, tangent in tangents.items()},
            n_controls=args.n_controls,
            seed=args.seed,
            max_tokens=args.max_tokens,
            progress=False,
        )
    except ia.AnisotropyError as error:
        print(f"compare_methods: error: {error}", file=sys.stderr)
        return 2

    any_result = next(iter(results.values()))
    print(
        f"\n{any_result.objective} gradients of {any_result.n_tokens} tokens; chance k/d = {any_result.chance:.3f}, "
        f"oracle {any_result.oracle_energy_share:.3f}"
    )
    header = f"{'method':<12} {'rank':>4} {'E_T':>7} {'E_N':>7} {'ratio':>7} {'p':>6} {'capture':>8} {'dIso*':>8}"
    print(header + "\n" + "-" * len(header))
    for method, result in results.items():
        print(
            f"{method:<12} {result.rank:>4} {result.energy_share:7.3f} {result.control_mean:7.3f} "
            f"{result.energy_ratio:7.2f} {result.p_value:6.3f} {result.anisotropy_capture:8.3f} "
            f"{result.delta_isoscore_star:+8.3f}"
        )

    names = list(tangents)
    print("\noverlap of the spans (1 = same subspace, about k/d for unrelated ones)")
    print(" " * 12 + "".join(f"{name:>12}" for name in names))
    for first in names:
        overlaps = "".join(f"{tangents[first].subspace.overlap(tangents[second].subspace):>12.2f}" for second in names)
        print(f"{first:<12}{overlaps}")

    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({method: result.to_dict() for method, result in results.items()}, indent=1))
        print(f"\nresults: {path}")
    print(f"wall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
