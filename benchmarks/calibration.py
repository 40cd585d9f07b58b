# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Calibration of the probe's two p-values under the null: how often p <= alpha when the tangent means nothing.

Under the null, the tangent is a uniformly random k-subspace of R^d, independent of the gradients. An exact p-value
is then <= alpha with probability alpha (exactly 1/21 = 4.76 % for alpha = 0.05 with 20 reference subspaces). Each
replay draws such a tangent and scores it on a synthetic gradient cloud through the probe's own statistics code
(`SubspaceColumns.draw`, `sums_from_gradients`, `build_results`: everything but the forward and backward passes),
against R normal controls (`p_value`, the paper's) and R uniformly random subspaces of R^d (`p_value_exact`); and
the anisotropy share's two p-values, against the controls (`anisotropy_share_p_value`, the paper's) and against the
same random subspaces (`anisotropy_p_value_exact`). The last column is how often `p_value` exceeds `p_value_exact`
in the same replay (the normal-control p-value is no lower bound of the exact one).

The clouds are anisotropic like real gradients: n = 4 d rows, variances decaying as 1 / i in a random orientation,
plus a mean; replay r uses cloud r mod --clouds. The table gives the rate of p <= alpha with its binomial standard
error. Runs in about two minutes on one CPU thread with the defaults.

Usage:
    python benchmarks/calibration.py [--replays 2000] [--alpha 0.05] [--shapes 64:8,64:16,256:8,256:16]
        [--convention complement]
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

# Each replay makes many small products; BLAS threads only fight over the cores (a 256 x 256 eigh takes 40x longer
# with two OpenBLAS threads on a shared machine). Set before NumPy and SciPy load their BLAS.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import torch  # noqa: E402

from interpreto_anisotropy.errors import DegenerateStatisticsWarning  # noqa: E402
from interpreto_anisotropy.probing.anisotropy import IsoScoreSettings  # noqa: E402
from interpreto_anisotropy.probing.objectives import make_objective  # noqa: E402
from interpreto_anisotropy.probing.statistics import SubspaceColumns, build_results, sums_from_gradients  # noqa: E402
from interpreto_anisotropy.tangents.subspace import Subspace  # noqa: E402

SEQUENCE_LENGTH = 10  # rows per synthetic sequence (only the bootstrap, unused here, looks at sequences)


def gradient_cloud(seed: int, d: int) -> torch.Tensor:
    """n = 4 d anisotropic, off-centre gradient rows: variances 1 / i in a random orientation, plus a mean."""
    generator = torch.Generator().manual_seed(seed)
    scales = torch.arange(1, d + 1, dtype=torch.float64) ** -0.5
    rotation, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    mean = 0.3 * torch.randn(d, generator=generator, dtype=torch.float64)
    return (torch.randn(4 * d, d, generator=generator, dtype=torch.float64) * scales) @ rotation + mean


#: The p-values a replay records, in the table's order.
P_VALUES = ("p_value", "p_value_exact", "anisotropy_share_p_value", "anisotropy_p_value_exact")


def null_p_values(
    d: int, k: int, replays: int, n_clouds: int, n_reference: int, convention: str = "complement"
) -> dict[str, list[float]]:
    """{p-value field: its value for each of `replays` uniformly random tangents} (fields: `P_VALUES`)."""
    objective = make_objective("causal_lm")
    isoscore = IsoScoreSettings.make(convention=convention)
    clouds = [gradient_cloud(1000 * d + cloud, d) for cloud in range(n_clouds)]
    sequence_ids = torch.arange(4 * d) // SEQUENCE_LENGTH
    p_values: dict[str, list[float]] = {name: [] for name in P_VALUES}
    for replay in range(replays):
        tangent = Subspace.random(d, k, seed=replay)
        columns = SubspaceColumns.draw(
            {"tangent": tangent}, n_controls=n_reference, n_random=n_reference, seed=10_000 + replay
        )
        sums = sums_from_gradients(clouds[replay % n_clouds], sequence_ids, columns)
        result = build_results(sums, columns, replay, 1, 0.95, objective, None, isoscore)["tangent"]
        for name in P_VALUES:
            p_values[name].append(getattr(result, name))
    return p_values


def rate(p_values: list[float], alpha: float) -> str:
    """Share of p-values <= alpha, in %, with its binomial standard error."""
    share = sum(value <= alpha + 1e-12 for value in p_values) / len(p_values)
    error = math.sqrt(share * (1 - share) / len(p_values))
    return f"{100 * share:.1f} ± {100 * error:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replays", type=int, default=2000, help="random tangents per shape")
    parser.add_argument("--clouds", type=int, default=10, help="gradient clouds per shape")
    parser.add_argument("--reference", type=int, default=20, help="normal controls and random subspaces (R)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--shapes", default="64:8,64:16,256:8,256:16", help="d:k pairs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (small products run best on one)")
    parser.add_argument("--convention", default="complement", help="IsoScore convention: complement or ambient")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", DegenerateStatisticsWarning)
    attainable = math.floor(args.alpha * (args.reference + 1) + 1e-9) / (args.reference + 1)
    print(
        f"P(p <= {args.alpha}) under the null, {args.replays} random tangents per shape, R = {args.reference} "
        f"(an exact p-value gives {100 * attainable:.2f} %)\n"
    )
    print(
        "| d | k | k/d | `p_value` (normal controls), % | `p_value_exact`, % | `anisotropy_share_p_value` (normal "
        "controls), % | `anisotropy_p_value_exact`, % | `p_value` > `p_value_exact`, % |"
    )
    print("|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    for shape in args.shapes.split(","):
        d, k = (int(part) for part in shape.split(":"))
        p_values = null_p_values(d, k, args.replays, args.clouds, args.reference, args.convention)
        rates = " | ".join(rate(p_values[name], args.alpha) for name in P_VALUES)
        above = zip(p_values["p_value"], p_values["p_value_exact"], strict=True)
        share_above = 100 * sum(approximate > exact for approximate, exact in above) / args.replays
        print(f"| {d} | {k} | {k / d:.3f} | {rates} | {share_above:.0f} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s on {torch.get_num_threads()} thread(s)")


if __name__ == "__main__":
    main()
