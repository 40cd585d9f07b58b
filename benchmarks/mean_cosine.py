# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Exact O(n d) mean cosine similarity versus the pairwise O(n^2 d) computation, on 100 000 x 768.

The pairwise mean over 100 000 points needs 10^10 cosines: the n x n matrix does not fit in memory and, computed
blockwise, takes far longer than this benchmark may. So the pairwise method is timed, blockwise, on a random
subset of `--subset` rows and its time is extrapolated by (n / subset)^2, which is exact for its cost model;
both methods are also run on the subset to show they agree. Run: `python benchmarks/mean_cosine.py`.
"""

from __future__ import annotations

import argparse
import time

import torch

from interpreto_anisotropy import metrics


def pairwise_mean_cosine(X: torch.Tensor, *, block: int = 2048) -> float:
    """The textbook computation: every cosine of every distinct pair, summed block by block in float64."""
    units = torch.nn.functional.normalize(X.double(), dim=1)
    n = units.shape[0]
    total = 0.0
    for start in range(0, n, block):
        total += float((units[start : start + block] @ units.T).sum())
    return (total - n) / (n * (n - 1))


def timed(function, *args, repeats: int = 1) -> tuple[float, float]:
    """Best wall time of `repeats` calls, and the value returned."""
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function(*args)
        best = min(best, time.perf_counter() - start)
    return best, value


def anisotropic_activations(n: int, d: int, seed: int) -> torch.Tensor:
    """A narrow cone, as token activations are: a common mean plus decaying per-direction spreads."""
    generator = torch.Generator().manual_seed(seed)
    spreads = torch.linspace(1.0, 0.05, d) ** 2
    mean = torch.randn(d, generator=generator)
    return torch.randn(n, d, generator=generator) * spreads + mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--subset", type=int, default=4_000, help="rows on which the pairwise method is timed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    X = anisotropic_activations(args.n, args.d, args.seed)
    subset = X[torch.randperm(args.n, generator=torch.Generator().manual_seed(args.seed))[: args.subset]]

    fast_time, fast_value = timed(metrics.mean_cosine_similarity, X, repeats=3)
    fast_subset_time, fast_subset_value = timed(metrics.mean_cosine_similarity, subset, repeats=3)
    pair_subset_time, pair_subset_value = timed(pairwise_mean_cosine, subset, repeats=2)
    pair_time = pair_subset_time * (args.n / args.subset) ** 2

    print(f"mean cosine similarity, float64, {torch.get_num_threads()} torch thread(s)")
    print(f"{'method':<34}{'n':>9}{'d':>6}{'seconds':>12}{'mean cosine':>16}")
    rows = [
        ("exact O(n d) (ours)", args.n, fast_time, f"{fast_value:.10f}"),
        ("exact O(n d) (ours)", args.subset, fast_subset_time, f"{fast_subset_value:.10f}"),
        ("pairwise blockwise O(n^2 d)", args.subset, pair_subset_time, f"{pair_subset_value:.10f}"),
        ("pairwise, extrapolated by n^2", args.n, pair_time, "(not run)"),
    ]
    for method, n, seconds, value in rows:
        print(f"{method:<34}{n:>9}{args.d:>6}{seconds:>12.4f}{value:>16}")
    print(f"agreement on the subset: |ours - pairwise| = {abs(fast_subset_value - pair_subset_value):.2e}")
    print(f"speed-up at n = {args.n}: {pair_time / fast_time:,.0f}x (pairwise extrapolated / ours measured)")
    print(f"speed-up at n = {args.subset} (both measured): {pair_subset_time / fast_subset_time:,.1f}x")


if __name__ == "__main__":
    main()
