# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Benchmark: the streamed exact PCA of tangent fits against Interpreto's `PCAConcepts` (scikit-learn).

Both fit a rank-k PCA on the same synthetic anisotropic activations (n x d float32 rows with a large common mean,
as language-model activations have):

- ours: the `PCATangent` path, i.e. `OrthonormalConceptModel.partial_fit` over batches of 8192 rows (float64
  running moments shifted by the first batch's mean, `MomentAccumulator`) then `top_eigenvectors`;
- Interpreto: the concept model of `PCAConcepts` (`PCAWrapper.fit`, scikit-learn's `PCA`) on the whole matrix.

Each is scored by the largest principal angle between its k-dimensional subspace and a float64 reference (two-pass
float64 covariance, then `numpy.linalg.eigh`), its wall time, and the peak resident memory it adds on top of the
data (Linux VmHWM, reset before each phase; "n/a" where /proc/self/clear_refs is not writable). A last run streams
10x more rows than the in-memory matrix, generated batch by batch so that the full matrix never exists, and shows
that the memory of the streamed fit does not grow with the number of rows.

Run: `python benchmarks/pca_fit.py` (under two minutes on 2 CPU cores). `--write-docs` also writes the table into
the "## Fast PCA fit" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import scipy.linalg
import torch

K = 16
BATCH_ROWS = 8192
SECTION = "## Fast PCA fit"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "performance.md"


# --------------------------------------------------------------------------- machine and memory
def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    import sklearn

    return (
        f"{cpu}, {os.cpu_count()} logical cores{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"numpy {np.__version__}, scikit-learn {sklearn.__version__}"
    )


def _status_mib(field: str) -> float | None:
    try:
        match = re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    except OSError:
        return None
    return int(match.group(1)) / 1024 if match else None


class PeakMemory:
    """Peak RSS added during a `with` block, in MiB: VmHWM (reset on entry) minus VmRSS on entry."""

    def __enter__(self) -> PeakMemory:
        self.extra_mib: float | None = None
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # reset the high-water mark to the current RSS
            self._start = _status_mib("VmRSS")
        except OSError:
            self._start = None
        return self

    def __exit__(self, *exc) -> None:
        peak = _status_mib("VmHWM")
        if self._start is not None and peak is not None:
            self.extra_mib = max(peak - self._start, 0.0)


# --------------------------------------------------------------------------- synthetic activations
class Activations:
    """Deterministic anisotropic Gaussian rows, generated batch by batch (never all at once).

    Spectrum: k strong directions (standard deviations 10 down to 3), then a bulk from 1 down to 0.05, rotated
    by a random orthogonal matrix, plus a common mean of norm ~60 carried mostly by a few "rogue" coordinates,
    the way language-model activations sit in a narrow cone away from the origin.
    """

    def __init__(self, d: int, *, seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        self.d, self.seed = d, seed
        self.scales = torch.cat([torch.linspace(10.0, 3.0, K), torch.linspace(1.0, 0.05, d - K)])
        rotation, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        self.mixing = (self.scales[:, None].double() * rotation.T).float()  # rows = scaled directions
        mean = torch.randn(d, generator=generator)
        mean[:4] = torch.tensor([40.0, -30.0, 25.0, 20.0])
        self.mean = mean

    def batch(self, index: int, rows: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index + 1)
        return torch.randn(rows, self.d, generator=generator) @ self.mixing + self.mean

    def stream(self, n: int) -> Iterator[torch.Tensor]:
        for index, start in enumerate(range(0, n, BATCH_ROWS)):
            yield self.batch(index, min(BATCH_ROWS, n - start))

    def materialise(self, n: int) -> torch.Tensor:
        out = torch.empty(n, self.d)
        for index, start in enumerate(range(0, n, BATCH_ROWS)):
            out[start : start + BATCH_ROWS] = self.batch(index, min(BATCH_ROWS, n - start))
        return out


def reference_basis(batches: Callable[[], Iterator[torch.Tensor]], k: int = K) -> np.ndarray:
    """Top-k eigenvectors of the float64 two-pass covariance (exact mean first, then centred scatter)."""
    total, count = None, 0
    for batch in batches():
        rows = batch.double()
        total = rows.sum(0) if total is None else total + rows.sum(0)
        count += rows.shape[0]
    mean = total / count
    scatter = None
    for batch in batches():
        centred = batch.double() - mean
        scatter = centred.T @ centred if scatter is None else scatter + centred.T @ centred
    _, vectors = np.linalg.eigh((scatter / count).numpy())
    return vectors[:, ::-1][:, :k]


def streamed_reference_basis(batches: Iterator[torch.Tensor], mean: torch.Tensor, k: int = K) -> np.ndarray:
    """One-pass float64 reference for a stream: moments about the generator's known mean, then `eigh`."""
    shift = mean.double()
    first = second = None
    count = 0
    for batch in batches:
        centred = batch.double() - shift
        first = centred.sum(0) if first is None else first + centred.sum(0)
        second = centred.T @ centred if second is None else second + centred.T @ centred
        count += centred.shape[0]
    offset = first / count
    covariance = second / count - torch.outer(offset, offset)
    _, vectors = np.linalg.eigh(covariance.numpy())
    return vectors[:, ::-1][:, :k]


class TimedIterator:
    """Wraps an iterator and adds up the time spent producing its items (here: generating rows)."""

    def __init__(self, iterator: Iterator[torch.Tensor]):
        self.iterator, self.seconds = iterator, 0.0

    def __iter__(self) -> TimedIterator:
        return self

    def __next__(self) -> torch.Tensor:
        start = time.perf_counter()
        try:
            return next(self.iterator)
        finally:
            self.seconds += time.perf_counter() - start


def largest_angle(basis: np.ndarray, reference: np.ndarray) -> float:
    return float(scipy.linalg.subspace_angles(np.asarray(basis, dtype=np.float64), reference).max())


# --------------------------------------------------------------------------- the two fits
def fit_ours(batches: Iterator[torch.Tensor], d: int) -> tuple[np.ndarray, object]:
    """The PCATangent path: OrthonormalConceptModel.partial_fit per batch, then the eigendecomposition."""
    from interpreto_anisotropy.tangents.explainers import OrthonormalConceptModel

    model = OrthonormalConceptModel(K, d)
    for batch in batches:
        model.partial_fit(batch)
    subspace = model.get_subspace()
    return subspace.basis.numpy(), model.moments


def fit_interpreto(x: torch.Tensor) -> tuple[np.ndarray, str]:
    """Interpreto's PCAConcepts concept model (scikit-learn PCA) on the whole matrix; also the solver it chose."""
    from interpreto.concepts.methods.sklearn_wrappers import PCAWrapper

    model = PCAWrapper(K, x.shape[1])
    sklearn_pca = model.fit(x, return_sklearn_model=True)
    return model.get_dictionary().detach().double().numpy().T, str(getattr(sklearn_pca, "_fit_svd_solver", "?"))


def timed(function: Callable, *args) -> tuple[float, float | None, object]:
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = function(*args)
        seconds = time.perf_counter() - start
    return seconds, memory.extra_mib, result


def fmt_mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


# --------------------------------------------------------------------------- benchmark
def max_mib(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def run_in_memory(d: int, n: int, repeats: int) -> tuple[list[list[str]], str]:
    """Ours and Interpreto's PCAConcepts on the same materialised (n, d) matrix."""
    x = Activations(d, seed=d).materialise(n)

    def batches() -> Iterator[torch.Tensor]:
        return iter(x.split(BATCH_ROWS))  # views: no copy

    reference = reference_basis(batches)
    # Warm up both code paths on a small slice (thread pools, lazy imports), outside the timings.
    fit_ours(iter(x[:4096].split(BATCH_ROWS)), d)
    fit_interpreto(x[:4096])

    # Best of `repeats` interleaved runs: the machine may be shared, and both fits then see the same load.
    ours_s = sk_s = float("inf")
    ours_mib = sk_mib = None
    for _ in range(repeats):
        seconds, mib, (ours_basis, moments) = timed(fit_ours, batches(), d)
        ours_s, ours_mib = min(ours_s, seconds), max_mib(ours_mib, mib)
        seconds, mib, (sk_basis, solver) = timed(fit_interpreto, x)
        sk_s, sk_mib = min(sk_s, seconds), max_mib(sk_mib, mib)
    data_mib = x.numel() * x.element_size() / 2**20
    state_mib = sum(t.numel() * t.element_size() for t in (moments.s1, moments.s2, moments.shift)) / 2**20
    size = f"{n:,} x {d}"
    rows = [
        [
            size,
            f"ours (streamed, {BATCH_ROWS}-row batches)",
            f"{largest_angle(ours_basis, reference):.1e}",
            f"{ours_s:.2f}",
            fmt_mib(ours_mib),
            f"{ours_s / sk_s:.2f}",
        ],
        [
            size,
            "Interpreto PCAConcepts (sklearn)",
            f"{largest_angle(sk_basis, reference):.1e}",
            f"{sk_s:.2f}",
            fmt_mib(sk_mib),
            "1.00",
        ],
    ]
    note = (
        f"d={d}: data {data_mib:,.0f} MiB in memory; our accumulator state {state_mib:.2f} MiB "
        f"(float64 d x d + 2 d, whatever n); scikit-learn chose svd_solver={solver!r}."
    )
    return rows, note


def run_stream(d: int, n_stream: int, n_in_memory: int) -> tuple[list[str], str]:
    """Ours on n_stream rows generated batch by batch: the full matrix never exists."""
    data = Activations(d, seed=d + 1)
    generation = TimedIterator(data.stream(n_stream))
    stream_s, stream_mib, (stream_basis, _) = timed(fit_ours, generation, d)
    reference = streamed_reference_basis(data.stream(n_stream), data.mean)
    row = [
        f"{n_stream:,} x {d} (stream)",
        "ours, rows generated on the fly",
        f"{largest_angle(stream_basis, reference):.1e}",
        f"{stream_s - generation.seconds:.2f} (+{generation.seconds:.1f} generating)",
        fmt_mib(stream_mib),
        "-",
    ]
    note = (
        f"stream: {n_stream * d * 4 / 2**30:.1f} GiB of float32 rows ({n_stream // n_in_memory}x the in-memory "
        f"{n_in_memory:,} x {d} matrix) went through the fit in {BATCH_ROWS}-row batches; the full matrix never "
        "existed, and the peak memory (generation buffers included) stays that of a few batches."
    )
    return row, note


def run(
    dims: list[int], n: int, stream_factor: int, stream_dim: int, repeats: int
) -> tuple[list[list[str]], list[str]]:
    rows: list[list[str]] = []
    notes: list[str] = []
    for d in dims:
        new_rows, note = run_in_memory(d, n, repeats)
        rows += new_rows
        notes.append(note)
        print(f"  done: {n:,} x {d} in memory", flush=True)
    row, note = run_stream(stream_dim, stream_factor * n, n)
    rows.append(row)
    notes.append(note)
    return rows, notes


def table(rows: list[list[str]]) -> str:
    header = ["rows x d", "method", "max angle vs float64 (rad)", "wall (s)", "peak extra RSS (MiB)", "time / sklearn"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_docs(markdown: str, path: Path = DOCS) -> None:
    """Replace (or add) this benchmark's section of docs/performance.md, leaving other sections alone."""
    text = path.read_text() if path.exists() else "# Performance\n"
    section = f"{SECTION}\n\n{markdown.strip()}\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 768])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--stream-factor", type=int, default=10)
    parser.add_argument("--stream-dim", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="in-memory fits: best of this many runs")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {DOCS}")
    args = parser.parse_args()

    machine = machine_description()
    print(f"Machine: {machine}\nPCA rank k={K}, batches of {BATCH_ROWS} rows, best of {args.repeats}.", flush=True)
    start = time.perf_counter()
    rows, notes = run(args.dims, args.rows, args.stream_factor, args.stream_dim, args.repeats)
    elapsed = time.perf_counter() - start
    markdown = table(rows)
    print()
    print(markdown)
    print()
    for note in notes:
        print(f"- {note}")
    print(f"\nTotal benchmark time: {elapsed:.0f} s")
    if args.write_docs:
        write_docs(
            "\n".join(
                [
                    f"`python benchmarks/pca_fit.py` ({datetime.date.today().isoformat()}), rank k = {K}: the streamed, "
                    "exact PCA behind `PCATangent` against the concept model of Interpreto's `PCAConcepts` "
                    "(scikit-learn `PCA`), on the same synthetic anisotropic float32 activations (k strong directions, a "
                    "decaying bulk, and a large common mean as in language models). Angles are against a float64 "
                    "two-pass covariance; peak extra RSS is the resident memory a fit adds on top of the data.",
                    "",
                    f"Machine: {machine}.",
                    "",
                    markdown,
                    "",
                    *[f"- {note}" for note in notes],
                    "- Exactness: scikit-learn's `covariance_eigh` solver forms X^T X in float32 without centring the "
                    "data, so the large common mean of the activations costs it digits; ours subtracts the first "
                    "batch's mean before the float32 products and adds them into float64 sums, then takes the top-k "
                    "eigenpairs with LAPACK's subset solver.",
                    "- Speed: scikit-learn's X^T X is one BLAS syrk (half the flops of a general product); ours is a "
                    "general float32 product per batch (torch has no syrk) plus the centring, so at d = 768 it runs "
                    "at 1.2-1.8x scikit-learn's time across our runs, for angles of ~1e-8 rad to the float64 "
                    "reference against scikit-learn's 1e-4 to 1e-3.",
                    "- Memory: 'peak extra RSS' is new resident memory during the fit (Linux VmHWM reset before each "
                    "phase). Memory the process already holds (e.g. freed after the warm-up) is reused without being "
                    "counted, so small values are lower bounds; what our fit keeps is the accumulator state above.",
                    f"- Wall times of the in-memory fits are the best of {args.repeats} interleaved runs (the stream: one "
                    "run); the machine may be shared with other jobs, so they vary from run to run.",
                ]
            )
        )
        print(f"Wrote the '{SECTION}' section of {DOCS}")


if __name__ == "__main__":
    main()
