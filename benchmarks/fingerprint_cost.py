# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a resume's fingerprint check costs: fingerprinting a checkpoint folder / loading its weights.

Writes a checkpoint folder with one safetensors file of `--megabytes` MB of float32 weights (plus a config and a
tokenizer file), then times, in one run, `folder_fingerprint` (header, first and last MiB, 32 sampled blocks for a
file above 64 MiB) and `safetensors.torch.load_file` with its tensors copied into memory (the least that loading the weights does), each best of 3
after one warm-up (the page cache is warm for both: the ratio is of work, not of disk speed).

Usage:
    python benchmarks/fingerprint_cost.py [--megabytes 512]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from interpreto_anisotropy.results.records import folder_fingerprint


def best_of(function, repeats: int = 3) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=512)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        n = args.megabytes * 2**20 // 4
        save_file({f"layer{i}.weight": torch.randn(n // 8) for i in range(8)}, folder / "model.safetensors")
        (folder / "config.json").write_text('{"model_type": "gpt_neox"}')
        (folder / "tokenizer.json").write_text("{}" * 100_000)
        fingerprint = best_of(lambda: folder_fingerprint(folder))
        load = best_of(lambda: [tensor.clone() for tensor in load_file(folder / "model.safetensors").values()])
    print(f"weights: {args.megabytes} MB")
    print(f"fingerprint: {fingerprint * 1e3:.1f} ms")
    print(f"load_file:   {load * 1e3:.1f} ms")
    print(f"fingerprint / load = {fingerprint / load:.4f}")


if __name__ == "__main__":
    main()
