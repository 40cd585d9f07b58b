# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Live probe overhead: a training step with a `TrainingProbe` attached / the same step without it.

Two identical models train side by side on the same batches, their steps interleaved pair by pair (the order
alternating) so that a busy machine slows both alike; the probe watches one copy for the first half of the pairs
and the other for the second half, and the ratio is the geometric mean of the two halves' median pair ratios (which
cancels a speed difference between the copies themselves, see `overhead_once`). The time spent
inside the probe (its hook's work during the backward, and `step()`, where windows close) is also timed directly,
as a share of the plain step: on a shared machine it is the steadier figure. A step is what training does:
forward with labels, backward, AdamW step, zeroing the gradients. The probe scores a given tangent (k=16) against 20
controls at one middle split point, writes rows to a results directory, and closes a window every step or every 10
steps (each close runs the probe's statistics: eigenvalues, IsoScore*, the bootstrap); an A/A run with no probe on
either model shows the noise of the pair ratio. The ratios are of wall and of CPU time (one torch thread: the CPU
time is the work done, which other jobs inflate less). Each configuration is run `--repeats` times on fresh
models; the table gives the median over the repeats of each run's ratio and of its time inside the probe. Also measured: the early phase (activation moments for the tangent fit,
windows kept for retrospective scoring, with the defaults of a 143,000-step run), the resident memory over many
steps of a small model, the cost of writing a window's rows to rows.jsonl as the file grows to 1,000 windows, and
(`--only pending`) what the windows awaiting the early tangent hold at width `--hidden` with the default
`max_pending_bytes`, against the process's peak resident memory.

Usage:
    python benchmarks/live_overhead.py [--steps 24] [--repeats 3] [--threads 1] [--only overhead|memory|rows]
    python benchmarks/live_overhead.py --device cuda --hidden 768 --layers 12 --vocab 50304 --batch 8 --length 512
    python benchmarks/live_overhead.py --only pending --hidden 768 --layers 1 --vocab 64 --batch 2 --length 8 --pending-steps 240
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import platform
import resource
import statistics
import tempfile
import time
import warnings

import torch

import interpreto_anisotropy as ia


def build(hidden: int, layers: int, vocab: int, seed: int = 0) -> torch.nn.Module:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    config = GPTNeoXConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=4 * hidden,
        max_position_embeddings=2048,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    return GPTNeoXForCausalLM(config).train()


def batches(vocab: int, batch: int, length: int, count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(vocab, (batch, length), generator=generator) for _ in range(count)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _now() -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): with one torch thread the CPU time is the work done, which other
    jobs on a shared machine inflate far less than the wall time."""
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _now()
    return wall - start[0], cpu - start[1]


def step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor, probe=None
) -> tuple[float, float]:
    """One training step; returns its (wall, CPU) seconds."""
    _synchronize(ids.device)
    start = _now()
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
    torch.autograd.backward(loss)  # not loss.backward(): nnsight patches Tensor.backward (see demo.train)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if probe is not None:
        probe.step()
    _synchronize(ids.device)
    return _since(start)


class _Timed:
    """(wall, CPU) seconds spent inside the probe: its hook's work in the backward, and `step()` (window closes)."""

    def __init__(self, probe: ia.TrainingProbe):
        self.seconds = [0.0, 0.0]
        for name in ("_on_read", "step"):
            setattr(probe, name, self._wrap(getattr(probe, name)))

    def _wrap(self, method):
        def timed(*args, **kwargs):
            start = _now()
            try:
                return method(*args, **kwargs)
            finally:
                for index, value in enumerate(_since(start)):
                    self.seconds[index] += value

        return timed


def overhead(args: argparse.Namespace, *, every: int, tangent: str) -> dict:
    """`overhead_once` repeated `args.repeats` times: the medians over the runs of its figures."""
    runs = [overhead_once(args, every=every, tangent=tangent) for _ in range(args.repeats)]

    def median(key: str, digits: int = 4) -> float:
        return round(statistics.median(run[key] for run in runs), digits)

    return {
        "every": every,
        "tangent": tangent,
        "plain_step_s": median("plain_step_s", 3),
        "ratio_wall": median("ratio_wall"),
        "ratio_wall_of_each_run": [round(run["ratio_wall"], 4) for run in runs],
        "ratio_wall_of_each_half": [[round(half, 4) for half in run["halves_wall"]] for run in runs],
        "ratio_wall_of_totals": median("totals_wall"),
        "ratio_cpu": median("ratio_cpu"),
        "ratio_cpu_of_each_run": [round(run["ratio_cpu"], 4) for run in runs],
        "probe_ms_per_step": median("probe_ms_per_step", 2),
        "probe_share_of_plain_step_wall": median("share_wall"),
        "probe_share_of_plain_step_cpu": median("share_cpu"),
        "windows": runs[0]["windows"],
    }


def overhead_once(args: argparse.Namespace, *, every: int, tangent: str) -> dict:
    """Probed step / plain step on the same batch, pair by pair (order alternated), and the probe's own time.

    The probe watches one copy of the model for the first half of the pairs and the other copy for the second half.
    Two copies of one model need not run equally fast (where their weights lie in memory can make one a few percent
    slower for a whole run, as the A/A run shows): that factor multiplies one half's ratio and divides the other's,
    so the geometric mean of the two halves' ratios cancels it. A half's ratio is the median of its pairs' ratios
    (robust to a burst of load), or the ratio of its summed times ("totals", which counts a window's close however
    rare). Wall and CPU time; the time inside the probe is a mean per step, as a share of the plain step's median.
    """
    hidden, layers = args.hidden, args.layers
    models = [build(hidden, layers, args.vocab).to(args.device)]
    models.append(copy.deepcopy(models[0]))
    data = [ids.to(args.device) for ids in batches(args.vocab, args.batch, args.length, 8)]
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-4) for model in models]
    # "early": Pythia's 143,000 steps, so that the whole run lies in the early phase (42,900 steps), defaults otherwise
    options = {"tangent": ia.Subspace.random(hidden, 16, seed=0)} if tangent == "given" else {"total_steps": 143_000}
    halves, inside, windows = [], [], 0
    with tempfile.TemporaryDirectory() as folder:
        for watched in (0, 1):
            probe = None
            if tangent != "none":
                probe = ia.TrainingProbe(
                    models[watched], layers // 2, every=every, n_controls=20, results_dir=f"{folder}/{watched}",
                    **options,
                )  # fmt: skip
            pairs, seconds = _pairs(models, optimizers, data, watched, probe, args.steps // 2)
            halves.append(pairs)
            inside.append(seconds)
            if probe is not None:
                windows += len(probe.rows) + sum(e.windows for p in probe.points.values() for e in p.pending)
    figures = {"windows": windows}
    for clock, name in enumerate(("wall", "cpu")):
        medians = [statistics.median(pair[0][clock] / pair[1][clock] for pair in pairs) for pairs in halves]
        totals = [sum(pair[0][clock] for pair in pairs) / sum(pair[1][clock] for pair in pairs) for pairs in halves]
        plain_median = statistics.median(pair[1][clock] for pairs in halves for pair in pairs)
        inside_mean = sum(seconds[clock] for seconds in inside) / sum(len(pairs) for pairs in halves)
        figures[f"ratio_{name}"] = math.sqrt(medians[0] * medians[1])
        figures[f"halves_{name}"] = medians
        figures[f"totals_{name}"] = math.sqrt(totals[0] * totals[1])
        figures[f"share_{name}"] = inside_mean / plain_median
        if name == "wall":
            figures["plain_step_s"], figures["probe_ms_per_step"] = plain_median, 1000 * inside_mean
    return figures


def _pairs(models, optimizers, data, watched: int, probe, n_pairs: int) -> tuple[list, list[float]]:
    """`n_pairs` pairs of steps (after 2 of warm-up), models[watched] with the probe attached, the other without.

    Returns:
        ([((probed wall, CPU), (plain wall, CPU)), ...], (wall, CPU) seconds inside the probe over those pairs).
    """
    timer = _Timed(probe) if probe is not None else None
    pairs = []
    with probe if probe is not None else contextlib.nullcontext():
        for index in range(n_pairs + 2):
            ids = data[index % len(data)]
            if index == 2 and timer is not None:
                timer.seconds = [0.0, 0.0]  # the warm-up's excluded
            order = (watched, 1 - watched) if index % 2 else (1 - watched, watched)
            times = {
                which: step(models[which], optimizers[which], ids, probe if which == watched else None)
                for which in order
            }
            if index >= 2:
                pairs.append((times[watched], times[1 - watched]))
    return pairs, (timer.seconds if timer is not None else [0.0, 0.0])


def resident_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * 4096 / 2**20


def memory(args: argparse.Namespace) -> dict:
    """Resident memory of a small model trained with a window every step (given tangent, rows kept in memory too)."""
    model = build(64, 2, 512)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = batches(512, 4, 32, 8)
    marks = {}
    with tempfile.TemporaryDirectory() as folder:
        with ia.TrainingProbe(model, 1, tangent=ia.Subspace.random(64, 8, seed=0), results_dir=folder) as probe:
            for index in range(1, args.memory_steps + 1):
                step(model, optimizer, data[index % len(data)], probe)
                if index in (10, args.memory_steps // 10, args.memory_steps // 2, args.memory_steps):
                    marks[index] = round(resident_mib(), 1)
    return {"resident_mib_at_step": marks, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def pending(args: argparse.Namespace) -> dict:
    """The early phase of a 143,000-step run (Pythia's; the tangent fitted after 42,900 steps) with the defaults
    (every=1, max_pending_bytes 1 GiB) on a model of width `--hidden` (`--layers 1` for the figures), `--pending-steps` steps: the most the
    windows awaiting the tangent held in moments and gradient rows (from their tensors), their count, and the
    resident memory before training and at its peak (ru_maxrss)."""
    model = build(args.hidden, args.layers, args.vocab).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    data = [ids.to(args.device) for ids in batches(args.vocab, args.batch, args.length, 8)]
    before, held, counts = resident_mib(), [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ia.errors.LiveProbeWarning)  # no room for rows beside the moments
        with ia.TrainingProbe(model, 0, total_steps=143_000) as probe:
            point = next(iter(probe.points.values()))
            for index in range(args.pending_steps):
                step(model, optimizer, data[index % len(data)], probe)
                held.append(sum(entry.sums.moments.s2.nbytes + entry.bytes for entry in point.pending))
                counts.append(len(point.pending))
    return {
        "d": args.hidden,
        "steps": args.pending_steps,
        "max_pending_bytes": probe.settings.max_pending_bytes,
        "capacity_windows": point.capacity,
        "most_windows_held": max(counts),
        "windows_merged_into_each": point.span,
        "most_bytes_held": max(held),
        "resident_mib_before_training": round(before, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def rows_write(args: argparse.Namespace) -> dict:
    """Seconds to write one window's row to rows.jsonl (`flush_seconds=0`: every window written) as the file grows.

    The rows are those of a real window (d=64 toy run), with their step changed; the median over each block of
    windows is given, so a cost that grows with the file shows as a rising series.
    """
    from interpreto_anisotropy.results.store import LiveStore

    model = build(64, 2, 512)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = batches(512, 4, 32, 1)[0]
    with ia.TrainingProbe(model, 1, tangent=ia.Subspace.random(64, 8, seed=0)) as probe:
        step(model, optimizer, ids, probe)
    template = probe.rows[0]
    seconds = []
    with tempfile.TemporaryDirectory() as folder:
        store = LiveStore(folder, dict(probe.config), overwrite=True, flush_seconds=0)
        for index in range(args.windows):
            row = {**template, "step": index, "checkpoint": f"live-{index}"}
            start = time.perf_counter()
            store.add([row])
            seconds.append(time.perf_counter() - start)
        store.close()
    block = max(1, args.windows // 10)
    marks = {
        f"windows {start + 1}-{start + block}": round(1000 * statistics.median(seconds[start : start + block]), 3)
        for start in range(0, args.windows, block)
    }
    return {"row_bytes": len(json.dumps(template)) + 1, "median_ms_per_window_write": marks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each configuration (medians reported)")
    parser.add_argument("--memory-steps", type=int, default=1000)
    parser.add_argument("--windows", type=int, default=1000, help="windows written in the rows.jsonl measurement")
    parser.add_argument("--only", choices=["overhead", "memory", "rows", "pending"], help="run one measurement only")
    parser.add_argument("--pending-steps", type=int, default=240, help="early-phase steps of the pending measurement")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads",
        "torch": torch.__version__,
        "shape": f"GPT-NeoX d={args.hidden}, {args.layers} layers, vocab {args.vocab}, batch {args.batch}x{args.length}",
    }
    if args.only in (None, "overhead"):
        results["runs"] = [
            overhead(args, every=1, tangent="none"),  # A/A: both models plain, the noise of the pair ratio
            overhead(args, every=1, tangent="given"),
            overhead(args, every=10, tangent="given"),
            overhead(args, every=1, tangent="early"),
        ]
    if args.only in (None, "memory"):
        results["memory"] = memory(args)
    if args.only in (None, "rows"):
        results["rows_write"] = rows_write(args)
    if args.only == "pending":  # a model of its own width, 1 GiB of moments: not part of the default run
        results["pending"] = pending(args)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
