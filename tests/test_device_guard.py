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
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from helpers.emulated_device import ELSEWHERE, EMU, DeviceMixError, EmulatedDevice
from helpers.live_kit import micro_batch, train_step
from interpreto import ModelWithSplitPoints
from torch.nn.attention import SDPBackend, sdpa_kernel

import interpreto_anisotropy as ia
from interpreto_anisotropy.probing import statistics as breakdown
from interpreto_anisotropy.probing.masking import special_tokens_mask
from interpreto_anisotropy.probing.objectives import MaskedLMObjective
from interpreto_anisotropy.probing.probe import GradientProbe
from interpreto_anisotropy.reading import batching

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


# --------------------------------------------------------------------- activations, a tangent's fit
def test_token_activations_and_a_tangent_fit_on_the_device_equal_the_cpu(gpt_neox_model, texts):
    with cpu_reference():
        cpu_mwsp = _mwsp(gpt_neox_model, "cpu")
        rows, ids = ia.token_activations(cpu_mwsp, texts[:6], batch_size=2)
        cpu_basis = ia.PCATangent(cpu_mwsp, nb_concepts=4).fit(rows).subspace.basis
    with EmulatedDevice():
        mwsp = _mwsp(gpt_neox_model, EMU)
        device_rows, device_ids = ia.token_activations(mwsp, texts[:6], batch_size=2)
        assert device_rows.device.type == EMU.type
        basis = ia.PCATangent(mwsp, nb_concepts=4).fit(device_rows).subspace.basis
    np.testing.assert_array_equal(_host(device_rows), _host(rows))
    np.testing.assert_array_equal(_host(device_ids), _host(ids))
    np.testing.assert_allclose(np.abs(_host(basis)), np.abs(_host(cpu_basis)), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- a sweep and its report
SWEEP = {"split_point": 1, "nb_concepts": 4, "n_controls": 3, "seed": 3, "reference": "each", "progress": False}
SWEEP_FIELDS = ("n_tokens", "energy_share", "control_energy_shares", "oracle_energy_share", "isoscore_star")


def test_a_sweep_and_its_report_on_the_device_equal_the_cpu_sweep(toy_checkpoints, sweep_texts, tmp_path):
    checkpoints = ia.checkpoints.local(toy_checkpoints.out_dir / "checkpoint-*")[:2]
    options = {"max_metric_tokens": 200, **sweep_texts, **SWEEP}
    with cpu_reference():
        cpu = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "cpu", device="cpu", **options).run()
    with EmulatedDevice():
        on_device = ia.CheckpointSweep(checkpoints, results_dir=tmp_path / "emu", device=str(EMU), **options).run()
        report = ia.write_report(on_device, tmp_path / "report")
    assert on_device.steps == cpu.steps and len(on_device) == 2
    for row, expected in zip(on_device.rows, cpu.rows, strict=True):
        for name in SWEEP_FIELDS:
            np.testing.assert_allclose(
                row[name], expected[name], rtol=1e-12, atol=0, err_msg=f"{name} at {row['step']}"
            )
    assert report.name == "index.html" and report.stat().st_size > 10_000


# --------------------------------------------------------------------- the live probe and its Trainer callback
LIVE_FIELDS = ("n_tokens", "n_sequences", "energy_share", "control_energy_shares", "oracle_energy_share")


def _training_copy(pair, device):
    model, tokenizer = pair
    return copy.deepcopy(model).train().requires_grad_(True).to(device), tokenizer


def _steps(tokenizer, texts, n_steps: int, n_micro: int, masked: bool) -> list[list[dict]]:
    return [
        [
            micro_batch(
                tokenizer, texts[3 * (s * n_micro + m) : 3 * (s * n_micro + m) + 3], start=3 * m, masked=masked
            )
            for m in range(n_micro)
        ]
        for s in range(n_steps)
    ]


def live_rows(pair, texts, device, *, n_steps: int, n_micro: int, objective: str, mode=None) -> list[dict]:
    """Train a copy of the model with SGD on `device` under a `TrainingProbe`; the rows (syncs counted in `mode`)."""
    model, tokenizer = _training_copy(pair, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, foreach=False)
    steps = _steps(tokenizer, texts, n_steps, n_micro, objective == "masked_lm")
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=3)
    rows = []
    probe = ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=tangent, objective=objective, n_controls=3)
    with warnings.catch_warnings(), probe:
        warnings.simplefilter("ignore", ia.errors.LiveProbeWarning)  # the model's mean loss, declared summed
        if mode is not None:
            mode.syncs.clear()
        for batches in steps:
            on_device = [{key: value.to(device) for key, value in batch.items()} for batch in batches]
            rows.extend(train_step(model, probe, on_device, optimizer))
    return rows


TRAINING = {"causal_lm": "gpt_neox_training_model", "masked_lm": "eurobert_model"}


@pytest.mark.parametrize("objective", sorted(TRAINING))
def test_the_live_probe_on_the_device_equals_the_cpu_and_syncs_a_fixed_number_of_times_per_window(
    request, texts, objective
):
    pair = request.getfixturevalue(TRAINING[objective])
    with cpu_reference():
        cpu = live_rows(pair, texts, "cpu", n_steps=2, n_micro=2, objective=objective)
    with EmulatedDevice() as mode:
        rows = live_rows(pair, texts, EMU, n_steps=2, n_micro=2, objective=objective, mode=mode)
        two_micro = mode.ours()
        live_rows(pair, texts, EMU, n_steps=2, n_micro=4, objective=objective, mode=mode)
        four_micro = mode.ours()
    assert four_micro == two_micro, f"synchronisations that grow with the micro-batches: {four_micro - two_micro}"
    assert [row["step"] for row in rows] == [0, 1]
    assert [(row["n_tokens"], row["n_sequences"]) for row in rows] == [
        (row["n_tokens"], row["n_sequences"]) for row in cpu
    ]
    # The first window's weights are the same; after an update they differ in float32 rounding (torch picks some
    # backward kernels by device type), so the first row is compared.
    for name in LIVE_FIELDS:
        np.testing.assert_allclose(rows[0][name], cpu[0][name], rtol=1e-12, atol=0, err_msg=name)


#: Host reads at each live window's close, for one split point: the window's flags and counters (2, live/point.py),
#: then the statistics `GradientProbe.run` reads once per run (build_results: IsoScore* checks, one read of the shares
#: and scalars, the interval, chance std, the per-sequence lists). Measured: 19; 53 before (28 to 56 in issue 38).
MAX_SYNCS_PER_WINDOW_CLOSE = 20


def test_a_live_window_close_reads_the_device_a_small_fixed_number_of_times(gpt_neox_training_model, texts):
    with EmulatedDevice() as mode:
        live_rows(gpt_neox_training_model, texts, EMU, n_steps=2, n_micro=2, objective="causal_lm", mode=mode)
        two_steps = mode.ours()
        live_rows(gpt_neox_training_model, texts, EMU, n_steps=4, n_micro=2, objective="causal_lm", mode=mode)
        four_steps = mode.ours()
    per_close = four_steps - two_steps
    assert all(count % 2 == 0 for count in per_close.values()), per_close
    n_per_close = sum(per_close.values()) // 2
    assert 0 < n_per_close <= MAX_SYNCS_PER_WINDOW_CLOSE, per_close
    live_sites = {site: count // 2 for site, count in per_close.items() if site.startswith("live/")}
    assert sum(live_sites.values()) <= 2, live_sites


def test_the_trainer_callback_on_the_device_writes_rows_and_a_report(gpt_neox_training_model, texts, tmp_path):
    """The callback's hooks as a Trainer calls them (a Trainer places its model on CPU, CUDA, MPS or XPU only)."""
    from transformers import TrainerControl, TrainerState

    with EmulatedDevice():
        model, tokenizer = _training_copy(gpt_neox_training_model, EMU)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, foreach=False)
        callback = ia.AnisotropyCallback(
            1, results_dir=tmp_path / "live", tangent=ia.Subspace.random(64, 4, seed=0), n_controls=3
        )
        state, control = TrainerState(max_steps=3), TrainerControl()
        callback.on_train_begin(None, state, control, model=model, processing_class=tokenizer)
        for batches in _steps(tokenizer, texts, 3, 1, False):
            for batch in batches:
                batch = {key: value.to(EMU) for key, value in batch.items()}
                model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state.global_step += 1
            callback.on_step_end(None, state, control)
        callback.on_train_end(None, state, control)
    table = ia.SweepResult.load(tmp_path / "live")
    assert table.steps == [0, 1, 2]
    assert all(0 < share < 1 for share in table.column("energy_share"))
    assert (tmp_path / "live" / "report" / "index.html").exists()


# --------------------------------------------------------------------- the guard fails on the bugs it guards against
def _old_frequency_buckets(counts, *, edges=breakdown.FREQUENCY_EDGES):
    """`frequency_bucket_of_ids` as it was at 9e18bb9: its boundaries made on the CPU."""
    counts = torch.as_tensor(counts).double().reshape(-1)
    order = torch.argsort(counts, descending=True, stable=True)
    before = (torch.cumsum(counts[order], 0) - counts[order]) / counts.sum()
    buckets = torch.empty_like(order)
    buckets[order] = torch.bucketize(before, torch.tensor(edges, dtype=torch.float64), right=True)
    return buckets


def test_the_guard_refuses_frequency_edges_made_on_the_cpu(gpt_neox_model, texts, monkeypatch):
    monkeypatch.setattr(breakdown, "frequency_bucket_of_ids", _old_frequency_buckets)
    with EmulatedDevice(), pytest.raises(DeviceMixError, match="bucketize"):
        probe_run(_mwsp(gpt_neox_model, EMU), texts[:4], "causal_lm")


def test_the_guard_refuses_a_device_mask_into_cpu_sequence_ids(gpt_neox_model, texts, monkeypatch):
    """At 9e18bb9 tokenised inputs stayed on the device: `sequence_ids[usable]` took a device mask."""
    new_usable = batching.TokenBatcher._usable

    def old_usable(self, batch, sequence_ids):  # the tokenised inputs' slices, still on the device
        return new_usable(self, {key: value.to(EMU) for key, value in batch.items()}, sequence_ids)

    monkeypatch.setattr(batching.TokenBatcher, "_usable", old_usable)
    tokenised = gpt_neox_model[1](texts[:4], padding=True, return_tensors="pt")
    with EmulatedDevice(), pytest.raises(DeviceMixError, match="emu.*CPU"):
        probe = GradientProbe(_mwsp(gpt_neox_model, EMU), batch_size=2, seed=0)
        probe.run(dict(tokenised), ia.Subspace.random(64, 4, seed=0), n_controls=3, progress=False)


def test_the_guard_counts_a_read_in_every_batch(gpt_neox_model, texts, monkeypatch):
    new_add = breakdown.EnergyByBucket.add

    def add_and_read(self, bucket, token_energy, token_total, probed):
        new_add(self, bucket, token_energy, token_total, probed)
        return int(probed.sum())  # a per-batch read put back

    monkeypatch.setattr(breakdown.EnergyByBucket, "add", add_and_read)
    with EmulatedDevice() as mode:
        mwsp = _mwsp(gpt_neox_model, EMU)
        probe_run(mwsp, texts[:4], "causal_lm", mode)
        few = Counter(mode.syncs)  # all of them: the patched line is in this file, not in our package
        probe_run(mwsp, texts[:8], "causal_lm", mode)
        many = Counter(mode.syncs)
    grown = many - few
    assert set(grown) == {ELSEWHERE} and grown[ELSEWHERE] > 0 and grown[ELSEWHERE] % 2 == 0  # the same in each batch


# --------------------------------------------------------------------- masked-LM masking on the device
def _masking_of(input_ids, tokenizer, masking):
    """Special-token mask, selection and corruption of `input_ids`, drawn from CPU generators seeded alike."""
    candidates = ~special_tokens_mask(input_ids, tokenizer.all_special_ids)
    selected = masking.select(candidates, torch.Generator().manual_seed(5), at_least_one=True)
    corrupted = masking.corrupt(
        input_ids,
        selected,
        torch.Generator().manual_seed(6),
        vocab_size=len(tokenizer),
        mask_token_id=tokenizer.mask_token_id,
    )
    return candidates, selected, corrupted


def test_masked_lm_masking_on_device_ids_draws_the_cpu_numbers(eurobert_model, texts):
    """The probe masks its batches on the host, before copying them; a caller (demo training, a data collator) may
    mask ids already on the device: the CPU generator's draws are the same, moved where the ids are."""
    _, tokenizer = eurobert_model
    input_ids = tokenizer(texts[:4], padding=True, return_tensors="pt")["input_ids"]
    masking = ia.objectives.MaskedLM(rate=0.3, mask=0.5, random=0.3, keep=0.2)
    on_cpu = _masking_of(input_ids, tokenizer, masking)
    with EmulatedDevice() as mode:
        on_device = _masking_of(input_ids.to(EMU), tokenizer, masking)
        assert all(part.device.type == EMU.type for part in on_device)
        prepared = MaskedLMObjective(masking, seed=2).prepare(
            {"input_ids": input_ids.to(EMU), "attention_mask": torch.ones_like(input_ids).to(EMU)},
            sequence_ids=torch.arange(4),
            tokenizer=tokenizer,
        )
    expected = MaskedLMObjective(masking, seed=2).prepare(
        {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)},
        sequence_ids=torch.arange(4),
        tokenizer=tokenizer,
    )
    for device_part, cpu_part in zip(on_device, on_cpu, strict=True):
        np.testing.assert_array_equal(_host(device_part), _host(cpu_part))
    for name in ("input_ids", "labels"):
        np.testing.assert_array_equal(_host(prepared[name]), _host(expected[name]), err_msg=name)
    assert on_cpu[2].ne(input_ids).any() and mode.syncs  # something was masked, and the masks were read
