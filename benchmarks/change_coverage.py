# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Coverage of the change-from-the-first-checkpoint interval, and the rejection rate of its test of no change.

`results.change` compares a row with its curve's first row over the same probe sequences: the change of the
energy share (sum e / sum t) and of the energy ratio (sum e / sum n, n a sequence's mean energy in the normal
controls), a paired bootstrap-t interval and a p-value of "no change" (`probing.intervals.paired_change`). This
measures both on known processes of paired sequences.

Each synthetic sequence is L tokens of d = 16 gradient coordinates, AR(1) along the sequence (rho = 0.7), times a
scale exp(sigma Z) shared by its two checkpoints; at the later checkpoint its tokens are 0.6 times the earlier ones
plus fresh noise (the same texts read by a slightly different model: paired). The tangent is the first k = 4
coordinates, the controls 5 fixed random k-subspaces of the other 12. Variances: 1 / j at the first checkpoint;
at the later one

- no change: the same (the pool is symmetrised, each pair also entered swapped, so the true change is exactly 0);
- training adds: the tangent's 4 variances times 3;
- heavy-tailed, training adds: the same with sigma = 0.8 instead of 0.5 (a few sequences weigh as much as all).

A pool of 20 000 pairs is drawn once per process; each replication draws n of them with replacement, so the true
change is the pool's. The interval and the p-value come from `paired_change` with the sweep's settings (1000
resamples, 95 %). Coverage: the fraction of replications whose interval holds the true change (binomial standard
error in brackets); rejection: the fraction with p <= 0.05 (under "no change", the test's size).

Usage:
    python benchmarks/change_coverage.py [--replications 1000] [--sizes 10,20,50] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os
import time

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402
import scipy.signal  # noqa: E402
import torch  # noqa: E402

from interpreto_anisotropy.probing.intervals import paired_change  # noqa: E402
from interpreto_anisotropy.results.change import CHANGE_RESAMPLES  # noqa: E402

DIM, RANK, RHO, PAIRING, N_CONTROLS, LENGTHS = 16, 4, 0.7, 0.6, 5, (8, 32)
POOL, CONFIDENCE, LEVEL = 20_000, 0.95, 0.05
SPECTRUM = 1.0 / np.arange(1, DIM + 1)
#: {process: (tangent variance factor at the later checkpoint, sigma of the log scale, symmetrised)}
PROCESSES = {
    "no change": (1.0, 0.5, True),
    "training adds": (3.0, 0.5, False),
    "heavy-tailed, training adds": (3.0, 0.8, False),
}


def _tokens(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, longest, d) unit-variance AR(1) noise along the sequence."""
    noise = rng.standard_normal((n, LENGTHS[1], DIM))
    noise[:, 0] /= math.sqrt(1 - RHO**2)
    return scipy.signal.lfilter([math.sqrt(1 - RHO**2)], [1, -RHO], noise, axis=1)


def pool(factor: float, sigma: float, symmetric: bool, rng: np.random.Generator) -> np.ndarray:
    """(POOL, 2, 3): (tangent energy, total, mean control energy) of each pair at each checkpoint."""
    controls = [np.linalg.qr(rng.standard_normal((DIM - RANK, RANK)))[0] for _ in range(N_CONTROLS)]
    later = SPECTRUM.copy()
    later[:RANK] *= factor
    out = np.empty((POOL, 2, 3))
    for start in range(0, POOL, 2000):
        n = min(2000, POOL - start)
        mask = (np.arange(LENGTHS[1]) < rng.integers(LENGTHS[0], LENGTHS[1] + 1, n)[:, None])[:, :, None]
        scale2 = np.exp(2 * sigma * rng.standard_normal(n))[:, None, None]
        first = _tokens(n, rng)
        second = PAIRING * first + math.sqrt(1 - PAIRING**2) * _tokens(n, rng)
        for c, (noise, spectrum) in enumerate(((first, SPECTRUM), (second, later))):
            rows = noise * np.sqrt(spectrum) * mask * np.sqrt(scale2)
            out[start : start + n, c, 0] = (rows[:, :, :RANK] ** 2).sum((1, 2))
            out[start : start + n, c, 1] = (rows**2).sum((1, 2))
            out[start : start + n, c, 2] = np.mean(
                [((rows[:, :, RANK:] @ basis) ** 2).sum((1, 2)) for basis in controls], axis=0
            )
    return np.concatenate([out, out[:, ::-1]]) if symmetric else out


def changes(pairs: np.ndarray) -> np.ndarray:
    """(energy share change, energy ratio change) of a set of pairs (n, 2, 3)."""
    sums = pairs.sum(0)
    return np.array(
        [sums[1, 0] / sums[1, 1] - sums[0, 0] / sums[0, 1], sums[1, 0] / sums[1, 2] - sums[0, 0] / sums[0, 2]]
    )


def measure(pairs: np.ndarray, n: int, replications: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(coverage, rejection rate) of (share, ratio) over `replications` draws of n pairs."""
    truth = changes(pairs)
    covered, rejected = np.zeros(2), np.zeros(2)
    for replication in range(replications):
        drawn = pairs[rng.integers(len(pairs), size=n)]
        found = paired_change(
            (drawn[:, 0, [0, 0]], drawn[:, 1, [0, 0]]),
            (drawn[:, 0, [1, 2]], drawn[:, 1, [1, 2]]),
            n_resamples=CHANGE_RESAMPLES,
            confidence=CONFIDENCE,
            generator=torch.Generator().manual_seed(replication),
        )
        covered += (found.low <= truth) & (truth <= found.high)
        rejected += found.p_value <= LEVEL
    return covered / replications, rejected / replications


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--sizes", default="10,20,50")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    start = time.perf_counter()
    print(
        f"{args.replications} replications, {CHANGE_RESAMPLES} resamples, nominal {CONFIDENCE:.0%} (seed {args.seed})"
    )
    print(
        f"{'process':<28} {'n':>3}  {'coverage share':>16} {'coverage ratio':>16}  {'reject share':>12} {'reject ratio':>12}"
    )
    for name, (factor, sigma, symmetric) in PROCESSES.items():
        rng = np.random.default_rng(args.seed)
        pairs = pool(factor, sigma, symmetric, rng)
        truth = changes(pairs)
        for n in sizes:
            coverage, rejection = measure(pairs, n, args.replications, rng)
            se = np.sqrt(coverage * (1 - coverage) / args.replications)
            print(
                f"{name:<28} {n:>3}  {coverage[0]:>7.3f} ({se[0]:.3f}) {coverage[1]:>8.3f} ({se[1]:.3f})  "
                f"{rejection[0]:>12.3f} {rejection[1]:>12.3f}"
            )
        print(f"{'':<28} true change: share {truth[0]:+.4f}, ratio {truth[1]:+.4f}")
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
