# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Every public entry point on an emulated accelerator (helpers/emulated_device.py): no tensor made on the CPU meets
the model's tensors, the host waits for the device a number of times that does not grow with the batches, and the
figures equal the CPU run's.

The emulated device runs each operation on CPU values with CPU kernels, so a run on it computes the very same
floating-point operations as the CPU run, whose attention is held to the math kernel that PyTorch picks for a
device without a fused one (`cpu_reference`): its figures must be equal, not merely close. CUDA fails where it fails
(a CPU tensor in a device operation, a device mask into a CPU tensor), and it counts each read back to the host and
each blocking host-to-device copy by the line of our package that asked for it.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from helpers.emulated_device import EMU, EmulatedDevice
from helpers.live_kit import micro_batch, train_step
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.probing.probe import GradientProbe

pytestmark = pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")

PROBE_FIELDS = (
    "n_tokens",
    "n_sequences",
    "energy_share",
    "control_energy_shares",
    "random_energy_shares",
    "oracle_energy_share",
    "isoscore_star",
    "isoscore_star_without_tangent",
    "delta_isoscore_star",
    "analytic_null",
    "loss",
    "ci_low",
    "ci_high",
    "p_value",
)
OBJECTIVES = {"causal_lm": "gpt_neox_model", "masked_lm": "eurobert_model"}


def cpu_reference():
    """The CPU run's attention kernel is the one the emulated device gets (on the CPU, SDPA picks a fused one)."""
    return sdpa_kernel(SDPBackend.MATH)


def _host(value):
    """A result field as a NumPy value (tensors read back to the host)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value, dtype=object if isinstance(value, (list, tuple)) and not value else None)


def assert_same_figures(on_device, on_cpu, fields) -> None:
    """Equal up to float64 rounding: the float64 reductions after the model (eigh, sums of a copied moment) may
    differ in their last bit with the memory layout of a wrapper's values (seen: 2e-16 relative, one ulp)."""
    for name in fields:
        device, cpu = _host(getattr(on_device, name)), _host(getattr(on_cpu, name))
        if device.dtype.kind in "fc":
            np.testing.assert_allclose(device, cpu, rtol=1e-12, atol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(device, cpu, err_msg=name)


def _mwsp(pair, device):
    model, tokenizer = pair
    return ModelWithSplitPoints(
        copy.deepcopy(model).eval().to(device), split_point=1, tokenizer=tokenizer, batch_size=2
    )


def _pre_tokenised(probe: GradientProbe, texts: list[str]) -> None:
    """Tokenise before the counted region (CPU work that never touches the device)."""
    n_batches, batches = probe.batcher.batches(texts)
    materialised = list(batches)
    probe.batcher.batches = lambda *args, **kwargs: (n_batches, iter(materialised))


def probe_run(mwsp, texts, objective: str, mode: EmulatedDevice | None = None):
    """`GradientProbe.run` of `texts` in batches of 2; with `mode`, its host synchronisations are counted."""
    probe = GradientProbe(mwsp, objective=objective, batch_size=2, seed=0)
    tangent = ia.Subspace.random(64, 4, seed=0)
    _pre_tokenised(probe, texts)
    if mode is not None:
        mode.syncs.clear()
    return probe.run(texts, tangent, n_controls=3, n_bootstrap=20, seed=0, progress=False)


# --------------------------------------------------------------------- GradientProbe
@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_probe_run_on_the_device_equals_the_cpu_and_syncs_a_fixed_number_of_times(request, texts, objective):
    pair = request.getfixturevalue(OBJECTIVES[objective])
    with cpu_reference():
        cpu = probe_run(_mwsp(pair, "cpu"), texts[:8], objective)
    with EmulatedDevice() as mode:
        with mode.paused():
            mwsp = _mwsp(pair, EMU)
        few = probe_run(mwsp, texts[:4], objective, mode)  # 2 batches
        few_syncs = mode.ours()
        many = probe_run(mwsp, texts[:8], objective, mode)  # 4 batches
        many_syncs = mode.ours()
    assert many_syncs == few_syncs, f"synchronisations that grow with the number of batches: {many_syncs - few_syncs}"
    assert few.n_sequences == 4
    assert_same_figures(many, cpu, PROBE_FIELDS)


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_probe_gradients_on_the_device_equal_the_cpu(request, texts, objective):
    pair = request.getfixturevalue(OBJECTIVES[objective])
    with cpu_reference():
        cpu = GradientProbe(_mwsp(pair, "cpu"), objective=objective, batch_size=2, seed=0).gradients(texts[:6])
    with EmulatedDevice() as mode:
        with mode.paused():
            mwsp = _mwsp(pair, EMU)
        raw = GradientProbe(mwsp, objective=objective, batch_size=2, seed=0).gradients(texts[:6])
        assert raw.gradients.device.type == EMU.type
    for name in ("gradients", "activations", "sequence_ids", "positions", "token_ids"):
        if hasattr(cpu, name):
            np.testing.assert_array_equal(_host(getattr(raw, name)), _host(getattr(cpu, name)), err_msg=name)
