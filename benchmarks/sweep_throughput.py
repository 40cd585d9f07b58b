# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tokens per second of one checkpoint's sweep step against plain training forward+backward, same model, same tokens.

A checkpoint's step (with `reference="each"`, the most expensive) reads the fit texts' activations at the split
point and fits a rank-16 streamed PCA tangent, then probes the probe texts' gradients against the tangent and 20
matched-rank controls. Its throughput is the probed tokens per second of the whole step; the floor is one training
forward+backward per probed token (a plain step: forward with labels, `loss.backward()` into the parameters).
With the early reference, the per-checkpoint step is the probe alone (the reference is fitted once).

All figures come from one run on one machine; the model is a random-init GPT-NeoX shaped like a Pythia model.

Usage:
    python benchmarks/sweep_throughput.py [--device cuda] [--shape pythia-160m] [--batch 8 --length 512]
        [--batches 8] [--fit-fraction 1.0] [--autocast bf16]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch
from probe_overhead import add_model_arguments, build, model_settings, random_batch


def synchronised(device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def seconds(fn, device: str, repeats: int) -> float:
    """Best of `repeats` timed calls after one warm-up (the minimum: the least disturbed run)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = synchronised(device)
        fn()
        best = min(best, synchronised(device) - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--batches", type=int, default=8, help="probe batches per checkpoint")
    parser.add_argument("--fit-fraction", type=float, default=1.0, help="fit tokens / probe tokens")
    parser.add_argument("--autocast", choices=["bf16", "fp16"], default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--whole-sweep",
        action="store_true",
        help="also time CheckpointSweep on two saved checkpoints (loading, tokenising and activation metrics included)",
    )
    args = parser.parse_args()
    shape, batch, length = model_settings(args)

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.reading.activations import iter_token_activations

    model, mwsp, vocab = build(shape, args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, None: None}[args.autocast]
    n_fit = max(1, round(args.batches * args.fit_fraction))
    probe_inputs = random_batch(vocab, batch * args.batches, length, "cpu", seed=1)  # as a tokenizer gives them
    fit_inputs = random_batch(vocab, batch * n_fit, length, "cpu", seed=2)
    train_batches = [random_batch(vocab, batch, length, args.device, seed=3 + i) for i in range(args.batches)]
    probe_tokens = batch * (length - 1) * args.batches  # causal LM: the last token of a sequence has no gradient
    autocast = torch.autocast(args.device, dtype=dtype or torch.bfloat16, enabled=dtype is not None)

    def train() -> None:
        for one in train_batches:
            with autocast:
                loss = model(**one, labels=one["input_ids"]).loss
            loss.backward()
            model.zero_grad(set_to_none=True)

    state: dict = {}

    def fit() -> None:
        tangent = ia.PCATangent(mwsp, nb_concepts=16, device=args.device)
        with autocast:
            tangent.partial_fit(rows for rows, _ in iter_token_activations(mwsp, fit_inputs, batch_size=batch))
        state["tangent"] = tangent.subspace  # computes the eigenvectors

    probe = ia.GradientProbe(mwsp, batch_size=batch, autocast_dtype=dtype)

    def run_probe() -> None:
        state["result"] = probe.run(probe_inputs, state["tangent"], n_controls=20, progress=False)

    train_time = seconds(train, args.device, args.repeats)
    fit_time = seconds(fit, args.device, args.repeats)
    probe_time = seconds(run_probe, args.device, args.repeats)
    assert state["result"].n_tokens == probe_tokens, state["result"].n_tokens

    train_rate = batch * length * args.batches / train_time
    rows = [
        ("plain training forward+backward", train_time, train_rate),
        (f"tangent fit (forward to the split point, {n_fit} batches)", fit_time, None),
        ("probe, 20 controls (early reference: the whole step)", probe_time, probe_tokens / probe_time),
        (
            "fit + probe (reference 'each': the whole step)",
            fit_time + probe_time,
            probe_tokens / (fit_time + probe_time),
        ),
    ]
    if args.whole_sweep:
        rows.extend(whole_sweep(model, mwsp.tokenizer, args, batch, length, probe_tokens, n_fit, train_rate))
    processor = platform.processor() or platform.machine()
    print(f"# Sweep step throughput ({processor}, {os.cpu_count()} cores, torch {torch.__version__})")
    if args.device == "cuda":
        print(f"# GPU: {torch.cuda.get_device_name()}")
    print(
        f"# model: random GPT-NeoX '{shape}' d={model.config.hidden_size}, {args.batches} batches of {batch} x "
        f"{length} tokens probed, fit on {args.fit_fraction:g}x as many, split point {mwsp.split_point}, "
        f"autocast {args.autocast or 'off'}"
    )
    print(f"| {'measurement':<58} | {'seconds':>8} | {'tokens/s':>10} | {'x training':>10} |")
    print(f"|{'-' * 60}|{'-' * 10}|{'-' * 12}|{'-' * 12}|")
    for label, time_taken, rate in rows:
        rate_text = f"{rate:>10.0f}" if rate else f"{'':>10}"
        ratio = f"{rate / train_rate:>10.2f}" if rate else f"{'':>10}"
        print(f"| {label:<58} | {time_taken:>8.3f} | {rate_text} | {ratio} |")


def whole_sweep(model, tokenizer, args, batch: int, length: int, probe_tokens: int, n_fit: int, train_rate: float):
    """Run `CheckpointSweep(reference="each")` on two saved copies of the model; rows for the second checkpoint.

    Texts are stdlib docstrings cut to `length` characters (about as many tokens with the byte-level toy
    tokenizer), so batches hold about `batch` x `length` tokens; the step's time is the sweep's own `wall_seconds`
    (one split point: activation read + fit + probe + activation metrics), loading the checkpoint excluded.
    """
    import tempfile

    import interpreto_anisotropy as ia

    corpus = [
        text[:length] for text in ia.demo.load_corpus("probe") + ia.demo.load_corpus("fit") if len(text) >= length
    ]
    n_texts = batch * args.batches
    with tempfile.TemporaryDirectory() as folder:
        for step in (0, 1):
            model.save_pretrained(f"{folder}/checkpoint-{step}")
            tokenizer.save_pretrained(f"{folder}/checkpoint-{step}")
        sweep = ia.CheckpointSweep(
            f"{folder}/checkpoint-*",
            split_point=model.config.num_hidden_layers // 2,
            texts=corpus[n_texts : n_texts + batch * n_fit],
            probe_texts=corpus[:n_texts],
            reference="each",
            n_controls=20,
            max_fit_tokens=None,
            results_dir=f"{folder}/results",
            device=args.device,
            batch_size=batch,
            progress=False,
        )
        start = time.perf_counter()
        result = sweep.run()
        total = time.perf_counter() - start
    row = result.rows[-1]
    rate = row["n_tokens"] / row["wall_seconds"]
    return [
        (f"CheckpointSweep, 1 checkpoint step ({row['n_tokens']} tokens probed)", row["wall_seconds"], rate),
        ("CheckpointSweep, 2 checkpoints, loading included", total, 2 * row["n_tokens"] / total),
    ]


if __name__ == "__main__":
    main()
