# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The exact p-values' random subspaces scored from the moments, chunk by chunk: time and peak memory against R'.

One process per R' (peak RSS from `resource`), d, k and tokens given; synthetic anisotropic float32 gradient rows;
the time is `RandomSubspaces.scores` alone (draws, QR, Sigma Q, energies, IsoScore*), one torch thread.
Usage: python benchmarks/exact_statistics.py [--dim 768 --rank 32 --tokens 4096 --randoms 20 320 2000 10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch


def case(dim: int, rank: int, tokens: int, count: int) -> dict:
    from interpreto_anisotropy.commons.accumulators import MomentAccumulator
    from interpreto_anisotropy.probing.anisotropy import IsoScoreSettings
    from interpreto_anisotropy.probing.statistics import RandomSubspaces

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    rows = (torch.randn(tokens, dim, generator=generator) * torch.arange(1, dim + 1) ** -0.5).float()
    isoscore = IsoScoreSettings.make()
    moments = MomentAccumulator(dim).update(rows)
    covariance = isoscore.covariance(moments)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    RandomSubspaces(dim, rank, count, seed=1).scores(moments, covariance, isoscore)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"count": count, "seconds": seconds, "peak_mib": peak / 1024, "added_mib": (peak - before) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--randoms", type=int, nargs="+", default=[20, 320, 2000, 10000])
    parser.add_argument("--case", type=int)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(case(args.dim, args.rank, args.tokens, args.case)))
        return
    print(
        f"| R' | scores (s) | s per 1000 subspaces | peak RSS (MiB) | added by the scores (MiB) |  (d={args.dim}, k={args.rank})"
    )
    print("|---|---|---|---|---|")
    for count in args.randoms:
        command = [
            sys.executable,
            __file__,
            "--dim",
            str(args.dim),
            "--rank",
            str(args.rank),
            "--tokens",
            str(args.tokens),
        ]
        out = json.loads(
            subprocess.run([*command, "--case", str(count)], capture_output=True, text=True, check=True).stdout
        )
        print(
            f"| {count} | {out['seconds']:.2f} | {1000 * out['seconds'] / count:.2f} | {out['peak_mib']:.0f} |"
            f" {out['added_mib']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
