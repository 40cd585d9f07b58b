# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Live probe overhead: a training step with a `TrainingProbe` attached / the same step without it.

Two identical models train side by side on the same batches, their steps interleaved pair by pair (the order
alternating) so that a busy machine slows both alike; the ratio is the median of the pairs' ratios. The time spent
inside the probe (its hook's work during the backward, and `step()`, where windows close) is also timed directly,
as a share of the plain step: on a shared machine it is the steadier figure. A step is what training does:
forward with labels, backward, AdamW step, zeroing the gradients. The probe scores a given tangent (k=16) against 20
controls at one middle split point, writes rows to a results directory, and closes a window every step or every 10
steps (each close runs the probe's statistics: eigenvalues, IsoScore*, the bootstrap). Also measured: the early
phase (activation moments for the tangent fit, windows kept for retrospective scoring), and the resident memory
over many steps of a small model.

Usage:
    python benchmarks/live_overhead.py [--steps 24] [--memory-steps 1000] [--threads 1]
    python benchmarks/live_overhead.py --device cuda --hidden 768 --layers 12 --vocab 50304 --batch 8 --length 512
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import tempfile
import time

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


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor, probe=None) -> float:
    _synchronize(ids.device)
    start = time.perf_counter()
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
    torch.autograd.backward(loss)  # not loss.backward(): nnsight patches Tensor.backward (see demo.train)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if probe is not None:
        probe.step()
    _synchronize(ids.device)
    return time.perf_counter() - start


class _Timed:
    """Seconds spent inside the probe: its hook's work in the backward, and `step()` (window closes)."""

    def __init__(self, probe: ia.TrainingProbe):
        self.seconds = 0.0
        for name in ("_on_read", "step"):
            setattr(probe, name, self._wrap(getattr(probe, name)))

    def _wrap(self, method):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def overhead(args: argparse.Namespace, *, every: int, tangent: str) -> dict:
    """Probed step / plain step on the same batch, pair by pair (order alternated), and the probe's own time."""
    hidden, layers = args.hidden, args.layers
    plain = build(hidden, layers, args.vocab).to(args.device)
    probed = copy.deepcopy(plain)
    data = [ids.to(args.device) for ids in batches(args.vocab, args.batch, args.length, 8)]
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-4) for model in (plain, probed)]
    options = {"tangent": ia.Subspace.random(hidden, 16, seed=0)} if tangent == "given" else {"early_steps": 10**6}
    ratios, plain_times, inside = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        probe = ia.TrainingProbe(
            probed, layers // 2, every=every, n_controls=20, results_dir=folder, max_pending_bytes=2**40, **options
        )
        timer = _Timed(probe)
        with probe:
            for index in range(args.steps + 2):
                ids = data[index % len(data)]
                before = timer.seconds
                if index % 2:
                    probed_time = step(probed, optimizers[1], ids, probe)
                    plain_time = step(plain, optimizers[0], ids)
                else:
                    plain_time = step(plain, optimizers[0], ids)
                    probed_time = step(probed, optimizers[1], ids, probe)
                if index >= 2:  # warm-up
                    ratios.append(probed_time / plain_time)
                    plain_times.append(plain_time)
                    inside.append(timer.seconds - before)
        windows = len(probe.rows) + sum(len(point.pending) for point in probe.points.values())
    plain_median = statistics.median(plain_times)
    return {
        "every": every,
        "tangent": tangent,
        "plain_step_s": round(plain_median, 3),
        "ratio_median_of_pairs": round(statistics.median(ratios), 4),
        "ratio_quartiles": [round(value, 3) for value in statistics.quantiles(ratios, n=4)],
        "probe_s_per_step": round(sum(inside) / len(inside), 4),
        "probe_share_of_plain_step": round(sum(inside) / len(inside) / plain_median, 4),
        "windows": windows,
    }


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
    import resource

    return {"resident_mib_at_step": marks, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--memory-steps", type=int, default=1000)
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
        "runs": [
            overhead(args, every=1, tangent="given"),
            overhead(args, every=10, tangent="given"),
            overhead(args, every=1, tangent="early"),
        ],
        "memory": memory(args),
    }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
