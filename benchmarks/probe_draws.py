# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The probe's cost with the sweep's new draws: R' enough for Holm over 16 rows, read from the scatter G^T G.

Settings of the same `GradientProbe.run` on the same model, texts and two rank-k tangents (a sweep with
``reference="both"`` probes two at once; ``--tangents 1``: one, the default ``reference="early"``), timed in one
run, interleaved repeat by repeat, on one thread:

* old: the former defaults, R = 20 controls and R' = 20 random subspaces, every row projected on every basis;
* new: R = 20 and the default R' for a family of 16 rows (`results.verdict.default_n_random`: 320), a seed per
  tangent, the random block read from the scatter (its width R' k > d);
* (the random subspaces are no longer projected row by row at any R': `probing/statistics.py`).

Ratios are new / old, medians of the repeats. Usage:
    python benchmarks/probe_draws.py [--dims 64 256] [--rank 16] [--batches 4 --batch 8 --length 128]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

FAMILY = 16  # rows of a curve: the demo's checkpoints


def build(hidden: int, seed: int = 0, layers: int = 2):
    from interpreto import ModelWithSplitPoints
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from interpreto_anisotropy.demo import train_tokenizer

    torch.manual_seed(seed)
    config = GPTNeoXConfig(
        vocab_size=4096,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(4, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
    )
    model = GPTNeoXForCausalLM(config).eval()
    tokenizer = train_tokenizer(
        ["a tiny tokenizer for the benchmark, only its pad token is used"] * 4, arch="gpt_neox"
    )
    return ModelWithSplitPoints(model, split_point=layers // 2, tokenizer=tokenizer, batch_size=64), config.vocab_size


def settings(n_random_new: int, kinds: tuple[str, ...] = ("early", "each")):
    """{label: (run options, projected?)}."""
    seeds = dict(zip(kinds, (11, 12), strict=False))
    return {
        "old: R'=20, projected": ({"n_random": 20}, True),
        f"new: R'={n_random_new}, scatter": ({"n_random": n_random_new, "draw_seeds": seeds}, False),
    }


def measure(hidden: int, rank: int, args: argparse.Namespace, n_random_new: int) -> dict[str, float]:
    import interpreto_anisotropy as ia

    mwsp, vocab = build(hidden, layers=args.layers)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(vocab, (args.batch * args.batches, args.length), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    kinds = ("early", "each")[: args.tangents]
    tangents = {kind: ia.Subspace.random(hidden, rank, seed=seed) for seed, kind in enumerate(kinds)}
    probe = ia.GradientProbe(mwsp, batch_size=args.batch)
    times: dict[str, list[float]] = {label: [] for label in settings(n_random_new, kinds)}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for label, (options, _) in settings(n_random_new, kinds).items():
            start = time.perf_counter()
            probe.run(inputs, tangents, n_controls=20, progress=False, **options)
            elapsed = time.perf_counter() - start
            if repeat:
                times[label].append(elapsed)
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2, help="12: the Pythia-160m shape (split point layers.6)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tangents", type=int, choices=(1, 2), default=2, help='1: reference "early" (the default)')
    args = parser.parse_args()
    torch.set_num_threads(1)
    from interpreto_anisotropy.results.verdict import default_n_random

    n_random_new = default_n_random(FAMILY, n_controls=20)
    tokens = args.batches * args.batch * args.length
    print(
        f"# Probe cost, old vs new draws ({platform.processor() or platform.machine()}, 1 thread, {os.cpu_count()} cores)"
    )
    print(
        f"# torch {torch.__version__}; {args.layers} layers; {args.tangents} tangent(s) of rank {args.rank}; {tokens} tokens; {args.repeats} repeats"
    )
    print("| d | setting | probe.run (s) | / old |")
    print("|---|---|---|---|")
    for hidden in args.dims:
        medians = measure(hidden, args.rank, args, n_random_new)
        old = next(iter(medians.values()))
        for label, seconds in medians.items():
            print(f"| {hidden} | {label} | {seconds:.3f} | {seconds / old:.2f} |", flush=True)


if __name__ == "__main__":
    main()
