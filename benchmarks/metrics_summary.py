# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`metrics.summary` before and after it shared its spectra, alternated in one run, at d = 64, 256, 768.

Before (a reference copy below): `partition_isotropy` projected the points on 2 d directions (the eigenvectors
and their negatives), `isoscore` and `isoscore_star` each formed the covariance, the uncentred I(W) and
`effective_rank` each formed X^T X, and `effective_rank` took an SVD of the n x d rows. After: one (n, d)
projection per I(W), one covariance, one X^T X, and the effective rank from `eigvalsh` of that d x d Gram.

Prints each size's median times over alternated repeats, the ratio before / after, and the largest difference
of each value. Run: `python benchmarks/metrics_summary.py [--n 4000] [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from interpreto_anisotropy import metrics
from interpreto_anisotropy.commons.tensors import scaled_by_power_of_two


# ------------------------------------------------------------------ reference copy of the code before
def partition_isotropy_before(points: torch.Tensor, *, center: bool = True) -> float:
    if center:
        points = points - points.mean(dim=0, keepdim=True)
    scaled = scaled_by_power_of_two(points)
    _, eigenvectors = torch.linalg.eigh(scaled.T @ scaled)
    directions = torch.cat([eigenvectors, -eigenvectors], dim=1)
    log_partition = torch.logsumexp(points @ directions, dim=0)
    return float(torch.exp(log_partition.min() - log_partition.max()))


def effective_rank_before(points: torch.Tensor) -> float:
    singular_values = torch.linalg.svdvals(points)
    total = singular_values.sum()
    if not bool(total > 0):
        return 0.0
    p = singular_values[singular_values > 0] / total
    return float(torch.exp(-(p * torch.log(p)).sum()))


def summary_before(X: torch.Tensor, *, zeta: float = metrics.DEFAULT_ZETA, top: int = 3) -> dict[str, float]:
    points = X.double()
    n, d = points.shape
    return {
        "n": float(n),
        "d": float(d),
        "mean_cosine": metrics.mean_cosine_similarity(points),
        "mean_cosine_centered": metrics.mean_cosine_similarity(points, center=True),
        "isoscore": metrics.isoscore(points),
        "isoscore_star": metrics.isoscore_star(points, zeta=zeta),
        "partition_isotropy": partition_isotropy_before(points, center=True),
        "partition_isotropy_uncentered": partition_isotropy_before(points, center=False),
        "effective_rank": effective_rank_before(points),
        "rogue_top_share": metrics.rogue_dimensions(points, top=top).top_share,
        "n_outlier_dimensions": float(len(metrics.outlier_dimensions(points).indices)),
    }


# ------------------------------------------------------------------ benchmark
def activations(n: int, d: int, seed: int) -> torch.Tensor:
    """A narrow cone, as token activations are: a common mean plus decaying per-direction spreads (float32)."""
    generator = torch.Generator().manual_seed(seed)
    spreads = torch.linspace(1.0, 0.05, d) ** 2
    return torch.randn(n, d, generator=generator) * spreads + torch.randn(d, generator=generator)


def timed(function, X: torch.Tensor) -> tuple[float, dict[str, float]]:
    start = time.perf_counter()
    value = function(X)
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 256, 768])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(
        f"metrics.summary, n = {args.n}, float64, {torch.get_num_threads()} torch thread(s), median of {args.repeats}"
    )
    print(f"{'d':>5}{'before s':>11}{'after s':>10}{'before/after':>14}  largest |difference| (relative) of a value")
    for d in args.dims:
        X = activations(args.n, d, args.seed + d)
        before_times, after_times = [], []
        for _ in range(args.repeats):  # alternated, so that drifts of the machine hit both alike
            seconds, before = timed(summary_before, X)
            before_times.append(seconds)
            seconds, after = timed(metrics.summary, X)
            after_times.append(seconds)
        moved = {
            key: abs(after[key] - before[key]) / max(abs(before[key]), 1e-300)
            for key in before
            if after[key] != before[key]
        }
        worst = ", ".join(f"{key} {value:.1e}" for key, value in sorted(moved.items())) or "none: identical"
        b, a = statistics.median(before_times), statistics.median(after_times)
        print(f"{d:>5}{b:>11.3f}{a:>10.3f}{b / a:>13.2f}x  {worst}")


if __name__ == "__main__":
    main()
