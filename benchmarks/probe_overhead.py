# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Probe overhead: GradientProbe time / plain training forward+backward time, on the same model and batch.

Ratios are measured in one run, on one machine. The plain step is what training does: a forward with labels,
`loss.backward()` accumulating parameter gradients, then zeroing them. The probe computes dL/dh at the split point
for every token, projects it on a tangent and 20 controls, accumulates the gradient moments and, once at the end,
IsoScore*, the oracle and a bootstrap. Also measured: Interpreto's `concept_output_gradient` (the nearest existing
API) on the same tokens, and the probe's peak memory for 10x more tokens (separate processes).

Usage:
    python benchmarks/probe_overhead.py [--device cuda] [--shape pythia-160m] [--batch 8 --length 512]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import torch

SHAPES = {
    # name: (hidden, layers, heads, intermediate, vocab)
    "cpu-tiny": (64, 2, 4, 256, 1024),  # the CPU rehearsal of benchmarks/gpu/run_checks.sh
    "cpu-small": (256, 4, 4, 1024, 16384),
    "pythia-160m": (768, 12, 12, 3072, 50304),
    "pythia-410m": (1024, 24, 16, 4096, 50304),
}


def build(shape: str, device: str, seed: int = 0):
    from interpreto import ModelWithSplitPoints
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from interpreto_anisotropy.demo import train_tokenizer

    hidden, layers, heads, intermediate, vocab = SHAPES[shape]
    torch.manual_seed(seed)
    config = GPTNeoXConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=2048,
    )
    model = GPTNeoXForCausalLM(config).to(device).eval()
    tokenizer = train_tokenizer(
        ["a tiny tokenizer for the benchmark, only its pad token is used"] * 4, arch="gpt_neox"
    )
    mwsp = ModelWithSplitPoints(model, split_point=layers // 2, tokenizer=tokenizer, batch_size=1024)
    return model, mwsp, vocab


def random_batch(vocab: int, batch: int, length: int, device: str, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(vocab, (batch, length), generator=generator)
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device)}


def timed(fn, *, repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def training_step(model, batch):
    def step():
        output = model(**batch, labels=batch["input_ids"])
        output.loss.backward()
        model.zero_grad(set_to_none=True)

    return step


def memory_child(shape: str, device: str, n_batches: int, batch: int, length: int) -> None:
    """Run the probe over n_batches batches and print the peak resident memory (or CUDA peak) in MiB."""
    import interpreto_anisotropy as ia

    model, mwsp, vocab = build(shape, device)
    tangent = ia.Subspace.random(model.config.hidden_size, 16, seed=0)
    inputs = random_batch(vocab, batch * n_batches, length, "cpu", seed=1)
    probe = ia.GradientProbe(mwsp, batch_size=batch)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    probe.run(inputs, tangent, n_controls=20, progress=False)
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mib": peak}))


def peak_memory(shape: str, device: str, n_batches: int, batch: int, length: int) -> float:
    command = [sys.executable, __file__, "--memory-child", str(n_batches), "--shape", shape, "--device", device]
    command += ["--batch", str(batch), "--length", str(length)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])["peak_mib"]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--device, --shape, --batch and --length, whose defaults depend on the device (see `model_settings`)."""
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", default=None, choices=sorted(SHAPES))
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--length", type=int, default=None)


def model_settings(args: argparse.Namespace) -> tuple[str, int, int]:
    """(shape, batch, length): Pythia-160m at 8 x 512 on CUDA, the small shape at 16 x 128 on the CPU."""
    if args.device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    cuda = args.device == "cuda"
    shape = args.shape or ("pythia-160m" if cuda else "cpu-small")
    return shape, args.batch or (8 if cuda else 16), args.length or (512 if cuda else 128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--batches", type=int, default=4, help="batches per probe run (amortises the final stats)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-interpreto", action="store_true")
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape, batch, length = model_settings(args)
    if args.memory_child is not None:
        memory_child(shape, args.device, args.memory_child, batch, length)
        return

    from interpreto import ModelWithSplitPoints

    import interpreto_anisotropy as ia

    model, mwsp, vocab = build(shape, args.device)
    d = model.config.hidden_size
    tangent = ia.Subspace.random(d, 16, seed=0)
    one_batch = random_batch(vocab, batch, length, args.device, seed=1)
    many = random_batch(vocab, batch * args.batches, length, args.device, seed=2)
    probe = ia.GradientProbe(mwsp, batch_size=batch)

    train = timed(training_step(model, one_batch), repeats=args.repeats, device=args.device)
    core = timed(
        lambda: probe.steps.forward_backward(one_batch, torch.arange(batch)), repeats=args.repeats, device=args.device
    )
    run_one = timed(
        lambda: probe.run(one_batch, tangent, n_controls=20, progress=False), repeats=args.repeats, device=args.device
    )
    run_many = timed(
        lambda: probe.run(many, tangent, n_controls=20, progress=False),
        repeats=max(2, args.repeats // 2),
        device=args.device,
    )
    print(f"training step {train:.4f} s, probe core {core:.4f} s", flush=True)
    rows = [
        ("plain training forward+backward (1 batch)", train, 1.0),
        ("probe forward+backward only (1 batch)", core, core / train),
        ("probe.run, 20 controls, 1 batch (incl. final stats)", run_one, run_one / train),
        (
            f"probe.run, 20 controls, per batch over {args.batches} batches",
            run_many / args.batches,
            run_many / args.batches / train,
        ),
    ]
    if not args.skip_interpreto:
        texts_tokens = one_batch["input_ids"][:2].cpu()
        pca = ia.PCATangent(mwsp, nb_concepts=16).fit(torch.randn(4096, d))
        start = time.perf_counter()
        pca.concept_output_gradient(
            texts_tokens, batch_size=2, activation_granularity=ModelWithSplitPoints.activation_granularities.ALL_TOKENS
        )
        interpreto_time = (time.perf_counter() - start) * batch / 2
        rows.append(
            ("Interpreto concept_output_gradient (scaled to the batch)", interpreto_time, interpreto_time / train)
        )

    small = peak_memory(shape, args.device, args.batches, batch, length)
    large = peak_memory(shape, args.device, 10 * args.batches, batch, length)

    print(
        f"# Probe overhead ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__})"
    )
    if args.device == "cuda":
        print(f"# GPU: {torch.cuda.get_device_name()}")
    print(
        f"# model: random GPT-NeoX '{shape}' d={d}, batch {batch} x {length} tokens, split point {mwsp.split_point}, k=16"
    )
    print(f"| {'measurement':<58} | {'seconds':>9} | {'ratio to training step':>22} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 24}|")
    for label, seconds, ratio in rows:
        print(f"| {label:<58} | {seconds:>9.4f} | {ratio:>22.2f} |")
    unit = "CUDA max allocated" if args.device == "cuda" else "peak RSS"
    print(
        f"| peak memory ({unit}), {args.batches} -> {10 * args.batches} batches (10x tokens) "
        f"| {small:.0f} -> {large:.0f} MiB | {large / small:>22.3f} |"
    )


if __name__ == "__main__":
    main()
