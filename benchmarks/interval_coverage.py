# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Coverage of the energy share's confidence interval on a known data-generating process: before and after.

The energy share of a subspace over a probe is sum_i e_i / sum_i t_i over its sequences (e_i: sequence i's energy in
the subspace, t_i: its squared gradient norm). Synthetic sequences stand in for a model's: each is L tokens of
d = 16 gradient coordinates, AR(1) along the sequence (rho = 0.7) with stationary variances lambda_j, times a scale
s = exp(sigma Z); the subspace is the first k = 4 coordinates. Three processes:

- homogeneous: lambda_j = 1 / j, L uniform in 8..64, sigma = 0.5;
- two types: half of the sequences as above, half with the spectrum reversed (the subspace holds their weakest
  directions) and L uniform in 4..32;
- heavy-tailed two types: the same, the second type with sigma = 0.8 (its squared scales have a log-normal tail
  of log-sd 1.6: a few sequences weigh as much as all the others), a stress case.

A pool of 100 000 sequences is drawn once per process; each replication draws n of them with replacement, so the
true share is exactly the pool's sum(e) / sum(t) (printed next to the closed form of the process, which it
estimates). Each interval is called on the n sequences' (e_i, t_i), as `build_results` calls it, with the probe's
defaults: 1000 resamples, confidence 0.95. Coverage is the fraction of replications whose interval holds the true
share, with its binomial standard error; a second table gives each interval's mean width over the percentile
bootstrap's (the price of the coverage).

"before": the percentile bootstrap the probe used until now (quantiles of the resampled shares). "after":
`share_intervals`, the bootstrap-t studentized by the jackknife, each side the larger of the equal-tailed and the
symmetric one's. `--candidates` adds the others measured to choose it, from the same resamples: the delta method
(ratio estimator, cluster-robust) and the jackknife with t_{n-1} quantiles, the equal-tailed and symmetric
bootstrap-t alone, and scipy's BCa. Runs in about two minutes on one CPU thread with the defaults (about three and a
half with --candidates).

Usage:
    python benchmarks/interval_coverage.py [--replications 1000] [--sizes 5,10,15,20,50,200] [--candidates]
        [--processes homogeneous,two types,heavy-tailed two types] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402
import scipy.signal  # noqa: E402
import scipy.stats  # noqa: E402
import torch  # noqa: E402

from interpreto_anisotropy.errors import DegenerateStatisticsWarning  # noqa: E402
from interpreto_anisotropy.probing import intervals  # noqa: E402

DIM, RANK, RHO = 16, 4, 0.7
POOL = 100_000
N_RESAMPLES, CONFIDENCE = 1000, 0.95


def sequences(
    n: int, spectrum: np.ndarray, lengths: tuple[int, int], sigma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(e, t) of n synthetic sequences, (n,) each: AR(1) tokens of variances `spectrum`, times a log-normal scale."""
    length = rng.integers(lengths[0], lengths[1] + 1, n)
    scale2 = np.exp(2 * sigma * rng.standard_normal(n))
    energy, total = np.empty(n), np.empty(n)
    for start in range(0, n, 5000):
        stop = min(n, start + 5000)
        noise = rng.standard_normal((stop - start, lengths[1], DIM)) * np.sqrt(spectrum)
        noise[:, 0] /= math.sqrt(1 - RHO**2)  # the first token drawn from the stationary law
        tokens = scipy.signal.lfilter([math.sqrt(1 - RHO**2)], [1, -RHO], noise, axis=1)
        squares = tokens**2 * (np.arange(lengths[1]) < length[start:stop, None])[:, :, None]
        energy[start:stop] = squares[:, :, :RANK].sum((1, 2)) * scale2[start:stop]
        total[start:stop] = squares.sum((1, 2)) * scale2[start:stop]
    return energy, total


SPECTRUM = 1.0 / np.arange(1, DIM + 1)
#: {process: [(spectrum, (shortest, longest length), sigma) of each sequence type, drawn in equal numbers]}
PROCESSES = {
    "homogeneous": [(SPECTRUM, (8, 64), 0.5)],
    "two types": [(SPECTRUM, (8, 64), 0.5), (SPECTRUM[::-1].copy(), (4, 32), 0.5)],
    "heavy-tailed two types": [(SPECTRUM, (8, 64), 0.5), (SPECTRUM[::-1].copy(), (4, 32), 0.8)],
}
assert tuple(PROCESSES) == intervals.MEASURED_PROCESSES  # the warning quotes these processes' coverage


def process(name: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """A pool of (e, t) of `POOL` sequences and the process's closed-form share."""
    types = PROCESSES[name]
    pools = [sequences(POOL // len(types), *kind, rng) for kind in types]
    # E[e] / E[t] with E[s^2] = exp(2 sigma^2), E[L] = mean of the lengths: the same for every token coordinate.
    weight = [math.exp(2 * sigma**2) * (low + high) / 2 for _, (low, high), sigma in types]
    closed = sum(w * s[:RANK].sum() for w, (s, _, _) in zip(weight, types, strict=True)) / sum(
        w * s.sum() for w, (s, _, _) in zip(weight, types, strict=True)
    )
    return np.concatenate([p[0] for p in pools]), np.concatenate([p[1] for p in pools]), float(closed)


def bootstrap_intervals(energy: np.ndarray, total: np.ndarray, seed: int) -> dict[str, tuple[float, float]]:
    """The "before" and "after" intervals, and the bootstrap candidates, of one replication from the same resamples."""
    e = torch.from_numpy(energy[:, None])
    t = torch.from_numpy(total)
    counts = torch.cat(intervals._resample_counts(len(total), N_RESAMPLES, torch.Generator().manual_seed(seed)))
    resampled = ((counts @ e) / (counts @ t)[:, None])[:, 0].numpy()
    tail = (1 - CONFIDENCE) / 2
    found = {"before": tuple(np.quantile(resampled, [tail, 1 - tail]))}
    share, error = (value[0] for value in intervals._share_and_error(torch.ones(1, len(total)).double(), e, t))
    studentized = intervals._studentized(counts, e, t, share).numpy()
    share, error = share.numpy(), error.numpy()
    below, above = intervals._multipliers(studentized, CONFIDENCE)
    found["after"] = tuple(float(x[0]) for x in intervals._clipped(share, error, below, above))
    low, high = intervals._order_statistic(studentized, tail), intervals._order_statistic(studentized, 1 - tail)
    symmetric = intervals._order_statistic(np.abs(studentized), CONFIDENCE)
    found["equal-tailed bootstrap-t"] = tuple(float(x[0]) for x in intervals._clipped(share, error, high, -low))
    found["symmetric bootstrap-t"] = tuple(float(x[0]) for x in intervals._clipped(share, error, symmetric, symmetric))
    return found


def analytic_intervals(energy: np.ndarray, total: np.ndarray) -> dict[str, tuple[float, float]]:
    """Delta-method (ratio estimator) and jackknife intervals with t_{n-1} quantiles, and scipy's BCa."""
    n = len(total)
    share = energy.sum() / total.sum()
    delta = math.sqrt(np.sum((energy - share * total) ** 2) / (n * (n - 1))) / total.mean()
    left_out = (energy.sum() - energy) / (total.sum() - total)
    jackknife = math.sqrt((n - 1) / n * np.sum((left_out - left_out.mean()) ** 2))
    quantile = scipy.stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)
    bca = scipy.stats.bootstrap(
        (energy, total),
        lambda e, t, axis=-1: e.sum(axis) / t.sum(axis),
        paired=True,
        vectorized=True,
        n_resamples=N_RESAMPLES,
        confidence_level=CONFIDENCE,
        method="BCa",
        random_state=np.random.default_rng(n),
    ).confidence_interval
    return {
        "delta method, t": (share - quantile * delta, share + quantile * delta),
        "jackknife, t": (share - quantile * jackknife, share + quantile * jackknife),
        "BCa (scipy)": (float(bca.low), float(bca.high)),
    }


def coverage(hits: list[bool]) -> str:
    """Fraction of hits with its binomial standard error."""
    share = sum(hits) / len(hits)
    return f"{share:.3f} ± {math.sqrt(share * (1 - share) / len(hits)):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replications", type=int, default=1000, help="replications per cell")
    parser.add_argument("--sizes", default="5,10,15,20,50,200", help="numbers of sequences")
    parser.add_argument("--candidates", action="store_true", help="also measure the other intervals considered")
    parser.add_argument(
        "--processes", default=",".join(PROCESSES), help="comma-separated, among " + ", ".join(PROCESSES)
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", DegenerateStatisticsWarning)
    sizes = [int(size) for size in args.sizes.split(",")]
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"Coverage of nominal {CONFIDENCE} intervals, {args.replications} replications per cell\n")
    for name in args.processes.split(","):
        energy, total, closed = process(name, rng)
        truth = energy.sum() / total.sum()
        print(f"{name}: true share {truth:.4f} (the pool's; closed form {closed:.4f})\n")
        table: dict[str, dict[int, list[bool]]] = {}
        widths: dict[str, dict[int, list[float]]] = {}
        for n in sizes:
            for replication in range(args.replications):
                drawn = rng.integers(0, POOL, n)
                found = bootstrap_intervals(energy[drawn], total[drawn], seed=replication)
                if replication == 0:  # the benchmark's "after" is the package's interval
                    low, high = intervals.share_intervals(
                        torch.from_numpy(energy[drawn, None]),
                        torch.from_numpy(total[drawn]),
                        n_resamples=N_RESAMPLES,
                        confidence=CONFIDENCE,
                        generator=torch.Generator().manual_seed(replication),
                    )
                    assert np.allclose((low[0], high[0]), found["after"], rtol=0, atol=1e-12)
                if args.candidates:
                    found |= analytic_intervals(energy[drawn], total[drawn])
                for method, (low, high) in found.items():
                    table.setdefault(method, {}).setdefault(n, []).append(bool(low <= truth <= high))
                    widths.setdefault(method, {}).setdefault(n, []).append(high - low)
        print("| interval | " + " | ".join(f"{n} sequences" for n in sizes) + " |")
        print("|---" * (len(sizes) + 1) + "|")
        for method, cells in table.items():
            print(f"| {method} | " + " | ".join(coverage(cells[n]) for n in sizes) + " |")
        print("\nMean width over the percentile bootstrap's (before):\n")
        print("| interval | " + " | ".join(f"{n} sequences" for n in sizes) + " |")
        print("|---" * (len(sizes) + 1) + "|")
        for method, cells in widths.items():
            ratios = (np.mean(cells[n]) / np.mean(widths["before"][n]) for n in sizes)
            print(f"| {method} | " + " | ".join(f"{ratio:.2f}" for ratio in ratios) + " |")
        print(flush=True)
    print(f"{time.perf_counter() - started:.0f} s on {torch.get_num_threads()} thread(s)")


if __name__ == "__main__":
    main()
