# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Memory of one probe batch: the formula of docs/how-to/large-models.md, and its check against a measured peak.

`GradientProbe` freezes the parameters and swaps the split point's output for a leaf, so one batch holds the weights,
what autograd saves in the layers above the split point (no weight gradient, nothing below the split point), the
leaf, and at the output head the logits with three more (batch, length, vocabulary) tensors of the loss's backward
(the float32 log-softmax, its gradient and the logits' gradient). In bytes, for b sequences of l tokens:

    weights + b l [ n_above (c_d d + c_f f) + c_h d + c_V V ] + probe state (8 d^2)

with d the width, f the MLP width, V the vocabulary, n_above the blocks above the split point and (c_d, c_f, c_h, c_V)
the bytes per token of `COEFFICIENTS`, counted from the transformers implementations (sdpa attention; see there).

    python benchmarks/probe_memory.py             # the table of docs/how-to/large-models.md
    python benchmarks/probe_memory.py --measure   # the formula against the CPU peak of tiny models (JSON)

The measurement runs `GradientProbe.steps.forward_backward` on a tiny model in a process whose large allocations
are mapped one by one (``MALLOC_MMAP_THRESHOLD_``), so that the peak resident memory (Linux ``VmHWM``, reset before
the batch) follows the tensors alive at each moment; tests/test_probe_memory.py holds it to the formula.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass

#: Bytes per token: (c_d, c_f) per block above the split point, c_h (the leaf and the final norm's saved input) and
#: c_V (the head), by architecture and dtype of the weights and activations. With frozen weights a linear layer
#: saves nothing (its input gradient needs the weight only); sdpa saves q, k, v and its output (4 d values), plus
#: a float32 log-sum-exp per head. GPT-NeoX (Pythia): one LayerNorm input for both parallel branches (d) and the
#: GELU's input (f): 5 d + f values. OLMo-2: its four RMSNorms (q, k, after attention, after the MLP) each save a
#: float32 copy of their input (4 bytes per value in either dtype), the SwiGLU saves the gate, its SiLU and the up
#: projection (3 f). Head: float32 logits (16 = 4 tensors x 4 bytes) or bfloat16 logits (2) with the float32
#: log-softmax, its gradient and the logits' gradient in float32 (14).
COEFFICIENTS = {
    ("gpt_neox", "float32"): (20, 4, 4, 16),
    ("gpt_neox", "bfloat16"): (10, 2, 2, 14),
    ("olmo2", "float32"): (32, 12, 4, 16),
    ("olmo2", "bfloat16"): (24, 6, 6, 14),
}
WEIGHT_BYTES = {"float32": 4, "bfloat16": 2}


@dataclass(frozen=True)
class Shape:
    """A model's published shape: architecture, width d, MLP width f, blocks, heads, key-value heads, vocabulary."""

    arch: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int

    def parameters(self) -> int:
        """Parameter count: embeddings, head, and per block attention, MLP and norms (biases for GPT-NeoX)."""
        d, f, kv = self.hidden, self.intermediate, self.hidden * self.kv_heads // self.heads
        if self.arch == "gpt_neox":  # fused qkv with biases, dense, 2 MLP matrices with biases, 2 LayerNorms
            block = (3 * d * d + 3 * d) + (d * d + d) + (2 * d * f + f + d) + 4 * d
            return 2 * self.vocab * d + self.layers * block + 2 * d
        block = (2 * d * d + 2 * d * kv) + 3 * d * f + (2 * d + d + kv)  # q, o, k, v; SwiGLU; 4 norms (k over kv)
        return 2 * self.vocab * d + self.layers * block + d


#: Published configs (docs/how-to/large-models.md names where each was read).
SHAPES = {
    "Pythia-160m": Shape("gpt_neox", 768, 3072, 12, 12, 12, 50304),
    "Pythia-1.4b": Shape("gpt_neox", 2048, 8192, 24, 16, 16, 50304),
    "Pythia-6.9b": Shape("gpt_neox", 4096, 16384, 32, 32, 32, 50432),
    "Pythia-12b": Shape("gpt_neox", 5120, 20480, 36, 40, 40, 50688),
    "OLMo-2 7B": Shape("olmo2", 4096, 11008, 32, 32, 32, 100352),
    "OLMo-2 13B": Shape("olmo2", 5120, 13824, 40, 40, 40, 100352),
    "OLMo-2 32B": Shape("olmo2", 5120, 27648, 64, 40, 8, 100352),
}


def probe_batch_bytes(shape: Shape, dtype: str, batch: int, length: int, split_layer: int) -> dict[str, int]:
    """The formula's parts, in bytes, for a probe batch at block `split_layer`'s output (0-indexed).

    Returns:
        {"weights", "activations" (the blocks above, the leaf and the head), "state" (8 d^2), "total"}.
    """
    c_d, c_f, c_h, c_v = COEFFICIENTS[(shape.arch, dtype)]
    d, tokens = shape.hidden, batch * length
    above = shape.layers - split_layer - 1
    activations = tokens * (above * (c_d * d + c_f * shape.intermediate) + c_h * d + c_v * shape.vocab)
    parts = {"weights": shape.parameters() * WEIGHT_BYTES[dtype], "activations": activations, "state": 8 * d * d}
    return {**parts, "total": sum(parts.values())}


def build(shape: Shape, dtype: str, seed: int = 0):
    """A random model of `shape` from its config (no Hub), in `dtype`, eval mode."""
    import torch
    import transformers as hf

    torch.manual_seed(seed)
    common = {
        "vocab_size": shape.vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": False,
    }
    if shape.arch == "gpt_neox":
        model = hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(**common))
    else:
        model = hf.Olmo2ForCausalLM(hf.Olmo2Config(**common, num_key_value_heads=shape.kv_heads, pad_token_id=0))
    return model.to(getattr(torch, dtype)).eval()


#: Tiny shapes of the check: one where the blocks above the split point dominate, one where the head does.
TINY = {
    "layers": {"hidden": 128, "intermediate": 512, "layers": 8, "heads": 4, "kv_heads": 4, "vocab": 512},
    "head": {"hidden": 64, "intermediate": 256, "layers": 2, "heads": 4, "kv_heads": 4, "vocab": 8192},
}


def _resident_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


def measure_one(shape: Shape, dtype: str, batch: int, length: int, split_layer: int) -> dict[str, int]:
    """Peak resident bytes above the weights during one probe batch (`GradientProbe.steps.forward_backward`)."""
    import torch
    from interpreto import ModelWithSplitPoints

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.demo import train_tokenizer

    model = build(shape, dtype)
    tokenizer = train_tokenizer(["a tokenizer whose pad token alone is used"] * 4, arch="gpt_neox")
    mwsp = ModelWithSplitPoints(model, split_point=split_layer, tokenizer=tokenizer, batch_size=batch)
    probe = ia.GradientProbe(mwsp, batch_size=batch)
    ids = torch.randint(shape.vocab, (batch, length), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    probe.steps.forward_backward(inputs, torch.arange(batch))  # warm-up: caches, masks, rotary tables
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current resident set
    before = _resident_kib("VmRSS")
    result = probe.steps.forward_backward(inputs, torch.arange(batch))
    peak = _resident_kib("VmHWM")
    del result
    return {"measured": 1024 * (peak - before)}


def measure() -> list[dict]:
    """The tiny shapes of both architectures in both dtypes, in a child process with per-allocation mappings.

    Returns:
        One dict per case: arch, tiny (which shape), dtype, measured and formula (bytes above the weights).
    """
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--child"]
    lines = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def child() -> None:
    import torch

    torch.set_num_threads(1)
    for dtype, arch in [(dtype, arch) for dtype in WEIGHT_BYTES for arch in ("gpt_neox", "olmo2")]:
        for name, sizes in TINY.items():
            shape, batch, length, split_layer = Shape(arch, **sizes), 4, 128, 0
            formula = probe_batch_bytes(shape, dtype, batch, length, split_layer)
            measured = measure_one(shape, dtype, batch, length, split_layer)["measured"]
            row = {"arch": arch, "tiny": name, "dtype": dtype, "measured": measured}
            print(json.dumps({**row, "formula": formula["activations"] + formula["state"]}), flush=True)


def table(batch: int = 8, length: int = 512) -> str:
    """The Markdown table of docs/how-to/large-models.md: GiB per probe batch, split point in the middle."""
    gib = 2**30
    lines = [
        "| model | d | f | blocks | vocabulary | parameters | split block | float32: weights + activations = total "
        "| bfloat16: weights + activations = total |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, shape in SHAPES.items():
        split_layer = shape.layers // 2 - 1
        cells = []
        for dtype in ("float32", "bfloat16"):
            parts = probe_batch_bytes(shape, dtype, batch, length, split_layer)
            cells.append(
                f"{parts['weights'] / gib:.1f} + {(parts['activations'] + parts['state']) / gib:.1f} = "
                f"**{parts['total'] / gib:.1f}**"
            )
        lines.append(
            f"| {name} | {shape.hidden} | {shape.intermediate} | {shape.layers} | {shape.vocab} | "
            f"{shape.parameters() / 1e9:.2f} B | {split_layer} | {cells[0]} | {cells[1]} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="check the formula against tiny models' CPU peak")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
    elif args.measure:
        for row in measure():
            print(json.dumps({**row, "measured / formula": round(row["measured"] / row["formula"], 3)}))
    else:
        print(f"# GiB for one probe batch of {args.batch} x {args.length} tokens (benchmarks/probe_memory.py)")
        print(table(args.batch, args.length))


if __name__ == "__main__":
    main()
