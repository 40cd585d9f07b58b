# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`GradientProbe.run` against the number of tangents probed at once: time and peak memory, 50 against 200.

One process per count (peak RSS from `resource`), on a random 2-layer GPT-NeoX of width d, one torch thread:
`count` random rank-k tangents, R = 20 normal controls each, R' random subspaces (default 320, a curve of 16 rows'
Holm), the bootstrap; the default seed, so the tangents share their R' random subspaces. Reported: seconds of
`probe.run` (after a warm-up run with 2 tangents), seconds per tangent, the peak RSS, and what the run added to the
RSS held before it. Usage: python benchmarks/many_tangents.py [--dim 768 --rank 32 --counts 50 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch


def case(args: argparse.Namespace, count: int) -> dict:
    from probe_draws import build

    import interpreto_anisotropy as ia

    torch.set_num_threads(1)
    mwsp, vocab = build(args.dim)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(vocab, (args.batch * args.batches, args.length), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    probe = ia.GradientProbe(mwsp, batch_size=args.batch)
    options = {"n_controls": 20, "n_random": args.n_random, "progress": False}
    probe.run(inputs, {f"t{i}": ia.Subspace.random(args.dim, args.rank, seed=i) for i in range(2)}, **options)
    tangents = {f"t{i}": ia.Subspace.random(args.dim, args.rank, seed=i) for i in range(count)}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    results = probe.run(inputs, tangents, **options)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert len(results) == count
    return {"count": count, "seconds": seconds, "peak_mib": peak / 1024, "added_mib": (peak - before) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--counts", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--n-random", type=int, default=320)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--case", type=int)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(case(args, args.case)))
        return
    tokens = args.batches * args.batch * args.length
    print(f"(d={args.dim}, k={args.rank}, R'={args.n_random}, R=20, {tokens} tokens, one thread)")
    print("| tangents | probe.run (s) | s per tangent | peak RSS (MiB) | added by the run (MiB) |")
    print("|---|---|---|---|---|")
    for count in args.counts:
        flags = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in ("dim", "rank", "n_random")]
        flags += [f"--{name}={getattr(args, name)}" for name in ("batches", "batch", "length")]
        output = subprocess.run([sys.executable, __file__, *flags, f"--case={count}"], capture_output=True, text=True)
        if output.returncode:
            sys.exit(output.stderr[-3000:])
        row = json.loads(output.stdout.strip().splitlines()[-1])
        print(
            f"| {count} | {row['seconds']:.2f} | {row['seconds'] / count:.3f} | {row['peak_mib']:.0f} | "
            f"{row['added_mib']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
