# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The memory formula of a probe batch (benchmarks/probe_memory.py, docs/how-to/large-models.md) recomputed two ways.

* The peak resident memory of `GradientProbe.steps.forward_backward` on tiny GPT-NeoX and OLMo-2 models, float32 and
  bfloat16, measured on the CPU, is the formula's within -5 % / +10 %.
* Per block above the split point, the bytes autograd saves (counted with `saved_tensors_hooks`) are the
  coefficients' c_d d + c_f f, and the parameter count is the model's.
* The docs page shows the coefficients and the table the formula gives.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("probe_memory", ROOT / "benchmarks" / "probe_memory.py")
probe_memory = sys.modules.setdefault("probe_memory", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(probe_memory)


@pytest.mark.slow
def test_the_formula_holds_the_peak_measured_on_the_cpu():
    rows = probe_memory.measure()
    assert len(rows) == 8  # 2 architectures x 2 dtypes x 2 shapes
    ratios = {(row["arch"], row["dtype"], row["tiny"]): row["measured"] / row["formula"] for row in rows}
    assert all(0.95 < ratio < 1.10 for ratio in ratios.values()), ratios


@pytest.mark.parametrize("arch", ["gpt_neox", "olmo2"])
def test_the_parameter_count_is_the_models(arch):
    shape = probe_memory.Shape(arch, **probe_memory.TINY["layers"])
    model = probe_memory.build(shape, "float32")
    assert shape.parameters() == sum(parameter.numel() for parameter in model.parameters())
    grouped = probe_memory.Shape(arch, **{**probe_memory.TINY["layers"], "kv_heads": 2})
    assert grouped.parameters() == sum(p.numel() for p in probe_memory.build(grouped, "float32").parameters())


def _saved_bytes(model, layers, split_layer: int, ids) -> int:
    """Bytes autograd saves (parameters aside) for dL/dh at block `split_layer`'s output, parameters frozen."""
    parameters = {parameter.untyped_storage().data_ptr() for parameter in model.parameters()}
    saved: dict[int, int] = {}

    def leaf(module, args, output):
        hidden = (output[0] if isinstance(output, tuple) else output).detach().requires_grad_(True)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    handle = layers[split_layer].register_forward_hook(leaf)
    try:
        model.requires_grad_(False)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        handle.remove()
    return sum(saved.values())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("arch", ["gpt_neox", "olmo2"])
def test_the_per_block_coefficients_are_the_bytes_autograd_saves(arch, dtype):
    shape = probe_memory.Shape(arch, **{**probe_memory.TINY["layers"], "layers": 4})
    model = probe_memory.build(shape, dtype)
    layers = model.gpt_neox.layers if arch == "gpt_neox" else model.model.layers
    ids = torch.randint(shape.vocab, (2, 64), generator=torch.Generator().manual_seed(0))
    per_block = (_saved_bytes(model, layers, 0, ids) - _saved_bytes(model, layers, 2, ids)) / 2 / ids.numel()
    c_d, c_f, _, _ = probe_memory.COEFFICIENTS[(arch, dtype)]
    counted = c_d * shape.hidden + c_f * shape.intermediate
    # What the coefficients leave out: a float32 log-sum-exp per head and the norms' statistics (a few floats).
    assert counted <= per_block <= counted + 4 * (shape.heads + 8), (per_block, counted)


def test_the_docs_page_shows_the_formulas_coefficients_and_table():
    page = (ROOT / "docs" / "how-to" / "large-models.md").read_text()
    labels = {"gpt_neox": "GPT-NeoX (Pythia)", "olmo2": "OLMo-2"}
    for (arch, dtype), coefficients in probe_memory.COEFFICIENTS.items():
        assert f"| {labels[arch]} | {dtype} | {' | '.join(map(str, coefficients))} |" in page
    assert probe_memory.table() in page
