# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The probe's batch loop never makes the host wait for the device.

On a GPU, every read of a device value (`.item()`, `bool(t)`, boolean indexing, `nonzero`) stalls the host until
the device has run everything queued. No GPU here: a `TorchDispatchMode` records every operation that would be
such a read, with the line of our code that asked for it; the number of these reads must not grow with the number
of batches. The probe runs on the chosen device (``--device``, conftest.py); with ``--device cuda`` the same is
checked with `torch.cuda.set_sync_debug_mode` too.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons.accumulators import MomentAccumulator
from interpreto_anisotropy.commons.tensors import LaggedRead
from interpreto_anisotropy.probing.probe import GradientProbe

PACKAGE = str(Path(ia.__file__).parent)
SCALAR_READS = {"_local_scalar_dense", "is_nonzero", "nonzero", "masked_select", "unique", "equal"}


class HostReads(TorchDispatchMode):
    """Counts device-to-host reads by the line of our package that caused them (library internals excluded)."""

    def __init__(self):
        super().__init__()
        self.sites: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        reads = name in SCALAR_READS or (
            name in ("index", "index_put", "index_put_")
            and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in _flat(args[1]))
        )
        if reads:
            site = _our_caller()
            if site is not None:
                self.sites[site] += 1
        return func(*args, **kwargs)


def _flat(indices):
    return indices if isinstance(indices, (list, tuple)) else [indices]


def _our_caller() -> str | None:
    """The innermost frame of our package, unless another library (transformers, tqdm) stands between."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(PACKAGE):
            return f"{Path(filename).name}:{frame.f_lineno}"
        if "torch" not in filename and "contextlib" not in filename and "_python_dispatch" not in filename:
            return None
        frame = frame.f_back
    return None


def _pre_tokenised(probe: GradientProbe, texts: list[str]):
    """Tokenise outside the recorded region (CPU work that never touches the device)."""
    n_batches, batches = probe.batcher.batches(texts)
    materialised = list(batches)
    probe.batcher.batches = lambda *args, **kwargs: (n_batches, iter(materialised))


def _reads_during_run(mwsp, texts, n_sequences: int, **kwargs) -> Counter[str]:
    probe = GradientProbe(mwsp, batch_size=2, **kwargs)
    tangent = ia.Subspace.random(64, 4, seed=0)
    _pre_tokenised(probe, texts[:n_sequences])
    with HostReads() as recorder:
        probe.run(texts[:n_sequences], tangent, n_controls=3, n_bootstrap=20, progress=False)
    return recorder.sites


@pytest.fixture(scope="module")
def device_mwsp(gpt_neox_model, chosen_device):
    """The toy GPT-NeoX on the chosen device, in `ModelWithSplitPoints` at split point 1."""
    import copy

    from interpreto import ModelWithSplitPoints

    model, tokenizer = gpt_neox_model
    return ModelWithSplitPoints(
        copy.deepcopy(model).to(chosen_device), split_point=1, tokenizer=tokenizer, batch_size=2
    )


@pytest.mark.parametrize("options", [{}, {"on_nonfinite": "skip"}], ids=["raise", "skip"])
@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_probe_run_reads_the_device_a_fixed_number_of_times(device_mwsp, texts, options):
    few = _reads_during_run(device_mwsp, texts, 4, **options)  # 2 batches
    many = _reads_during_run(device_mwsp, texts, 16, **options)  # 8 batches
    assert many == few, f"reads that grow with the number of batches: {many - few}"
    assert sum(few.values()) < 40  # the final reductions only


def test_the_recorder_sees_reads_that_grow_with_the_batches(gpt_neox_mwsp, texts):
    """Positive control: `gradients()` returns variable-size matrices, so it indexes with masks in every batch."""

    def reads(n_sequences: int) -> int:
        probe = GradientProbe(gpt_neox_mwsp, batch_size=2)
        _pre_tokenised(probe, texts[:n_sequences])
        with HostReads() as recorder:
            probe.gradients(texts[:n_sequences])
        return sum(recorder.sites.values())

    assert reads(16) >= reads(4) + 6 * 5  # 6 more batches, 5 masked selections each


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_token_cap_reads_one_count_per_batch_and_stops(gpt_neox_mwsp, texts):
    """With max_tokens the running count is read once per batch, late on a GPU; the cap is exact."""
    probe = GradientProbe(gpt_neox_mwsp, batch_size=2)
    capped = probe.run(texts[:16], ia.Subspace.random(64, 4, seed=0), n_controls=3, max_tokens=50, progress=False)
    assert capped.n_tokens == 50
    raw = probe.gradients(texts[:16], max_tokens=50)
    assert raw.gradients.shape[0] == 50
    full = probe.gradients(texts[:16])
    torch.testing.assert_close(raw.gradients, full.gradients[:50])


def test_masked_moments_equal_the_moments_of_the_kept_rows():
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(300, 6, generator=generator, dtype=torch.float64) * 3 + 5
    mask = torch.rand(300, generator=generator) < 0.4
    rows_with_nan = rows.clone()
    rows_with_nan[~mask] = float("nan")
    masked = MomentAccumulator(6)
    for start in range(0, 300, 70):
        masked.update(rows_with_nan[start : start + 70], mask=mask[start : start + 70])
    kept = rows[mask].double().numpy()
    assert masked.count == kept.shape[0]
    np.testing.assert_allclose(masked.mean.numpy(), kept.mean(0), rtol=1e-12)
    np.testing.assert_allclose(masked.covariance().numpy(), np.cov(kept.T, bias=True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(masked.second_moment().numpy(), kept.T @ kept / kept.shape[0], rtol=1e-10)


def test_an_all_masked_first_batch_still_gives_exact_moments():
    rows = torch.randn(40, 3, dtype=torch.float64)
    accumulator = MomentAccumulator(3)
    accumulator.update(rows[:10], mask=torch.zeros(10, dtype=torch.bool)).update(rows[10:])
    np.testing.assert_allclose(accumulator.covariance().numpy(), np.cov(rows[10:].numpy().T, bias=True), rtol=1e-10)


def test_lagged_read_on_the_cpu_has_no_lag():
    reader = LaggedRead()
    assert int(reader.push(torch.tensor(7))) == 7
    assert int(reader.push(torch.tensor(9))) == 9


def test_on_a_gpu_the_synchronisations_of_our_code_do_not_grow_with_the_batches(device_mwsp, texts, chosen_device):
    """`torch.cuda.set_sync_debug_mode("warn")` warns at each synchronising call; count those from our files."""
    import warnings

    if chosen_device.type != "cuda":
        pytest.skip("needs --device cuda (benchmarks/gpu/run_checks.sh passes it)")
    mwsp = device_mwsp

    def ours(n_sequences: int) -> Counter[str]:
        probe = GradientProbe(mwsp, batch_size=2)
        _pre_tokenised(probe, texts[:n_sequences])
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                probe.run(texts[:n_sequences], ia.Subspace.random(64, 4, seed=0), n_controls=3, progress=False)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        return Counter(f"{Path(w.filename).name}:{w.lineno}" for w in caught if w.filename.startswith(PACKAGE))

    few, many = ours(4), ours(16)
    assert many == few, f"synchronisations that grow with the number of batches: {many - few}"
