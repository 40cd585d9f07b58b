# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The package on the chosen device (``--device cuda``, ``INTERPRETO_ANISOTROPY_TEST_DEVICE``; default the CPU)
against float64 references computed on the CPU.

* The conformance matrix (`test_conformance.py`'s 24 families): the float32 model on the device and the float32
  model under bfloat16 autocast give the reference's per-token gradients, activations, PCA tangent and energy share
  within the tolerances below (bfloat16 keeps 8 bits of mantissa: its own, looser ones).
* `GradientProbe.run`, a short `CheckpointSweep` with its report, the live probe in a training loop and its
  `transformers.Trainer` callback, run on the device, equal the same computations in float64 on the CPU.

benchmarks/gpu/run_checks.sh runs this file with ``--device cuda``; on the CPU it checks the float32 and bfloat16
paths against float64 (which the float64 conformance matrix does not).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.linalg
import torch
from architectures import FAMILIES, build
from helpers.live_kit import micro_batch, post_hoc, train_step
from helpers.tolerances import assert_difference_close
from interpreto import ModelWithSplitPoints
from test_conformance import BATCH, RANK, Case, _row_errors, matrix_texts, tokenizers  # noqa: F401  (the reference's fixtures)
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

import interpreto_anisotropy as ia

#: float32 on the device against the float64 reference: per-token gradient and activation rows (largest
#: row-relative error), the PCA tangent (largest principal angle) and the energy share (relative).
#: (On the 2-core CPU, over the 24 families: at most 1.1e-6, 2.3e-7, 2.7e-5 degrees and 2.6e-8.)
FLOAT32 = {"gradient": 1e-4, "activation": 1e-4, "angle_degrees": 0.1, "energy": 1e-4}
#: bfloat16 autocast (float32 weights, bfloat16 matrix products): gradient rows (median and largest row-relative
#: error), activation rows (largest), tangent angle and energy share.
#: (On the CPU: at most 0.011, 0.18 (OPT, one row), 0.015, 0.97 degrees and 0.0045.)
BFLOAT16 = {"gradient_median": 0.03, "gradient": 0.5, "activation": 0.05, "angle_degrees": 5.0, "energy": 0.02}
#: ProbeResult, sweep and live-row figures of a float32 run on the device against float64 on the CPU (relative).
RESULT_RTOL = 1e-4


class DeviceCase:
    """A family's float32 model on the device, with the float64 reference of `test_conformance.Case`."""

    def __init__(self, reference: Case, device: torch.device):
        self.reference = reference
        model = build(reference.family, reference.tokenizer).float().to(device)
        for mine, theirs in zip(model.parameters(), reference.model.parameters(), strict=True):
            assert torch.equal(mine.detach().cpu(), theirs.detach().float())  # the reference's weights
        self.mwsp = ModelWithSplitPoints(
            model, split_point=reference.family.split_point, tokenizer=reference.tokenizer, batch_size=BATCH
        )

    def errors(self, autocast_dtype: str | None) -> dict[str, float]:
        """Row errors of gradients and activations, tangent angle and energy-share error against the reference."""
        case, call = self.reference, self.reference.family.call
        probe = ia.GradientProbe(
            self.mwsp,
            objective=case.family.objective,
            batch_size=BATCH,
            seed=3,
            call=call,
            autocast_dtype=autocast_dtype,
        )
        raw = probe.gradients(case.texts, labels=case.labels)
        assert list(zip(raw.sequence_ids.tolist(), raw.positions.tolist(), strict=True)) == case.probe_rows()
        gradient = _row_errors(raw.gradients.double().cpu(), case.reference_gradients())
        rows, _ = ia.token_activations(
            self.mwsp, case.texts, batch_size=BATCH, call=call, autocast_dtype=autocast_dtype
        )
        activation = _row_errors(rows.double().cpu(), case.reference_activations())
        tangent = ia.PCATangent(self.mwsp, nb_concepts=RANK).fit(rows.float())  # on the device, as read
        centred = case.reference_activations().numpy()
        centred = centred - centred.mean(0)
        reference_basis = np.linalg.svd(centred, full_matrices=False)[2][:RANK].T
        basis = tangent.subspace.basis.double().cpu().numpy()
        angle = float(np.degrees(scipy.linalg.subspace_angles(basis, reference_basis).max()))
        result = probe.run(case.texts, tangent, labels=case.labels, n_controls=2, n_bootstrap=10, progress=False)
        gradients = case.reference_gradients()
        projected = gradients @ tangent.subspace.basis.double().cpu()
        expected_share = float(projected.square().sum() / gradients.square().sum())
        return {
            "gradient": float(gradient.max()),
            "gradient_median": float(gradient.median()),
            "activation": float(activation.max()),
            "angle_degrees": angle,
            "energy": abs(result.energy_share - expected_share) / expected_share,
        }


_DEVICE_CASES: dict[str, DeviceCase] = {}


@pytest.fixture(params=sorted(FAMILIES), ids=str)
def device_case(request, case_factory, chosen_device) -> DeviceCase:
    name = request.param
    if name not in _DEVICE_CASES:
        _DEVICE_CASES[name] = DeviceCase(case_factory(name), chosen_device)
    return _DEVICE_CASES[name]


@pytest.fixture(scope="module")
def case_factory(request):
    """The float64 CPU reference of a family, shared with test_conformance.py when both run."""
    import test_conformance

    by_flavour, texts = request.getfixturevalue("tokenizers"), request.getfixturevalue("matrix_texts")

    def make(name: str) -> Case:
        if name not in test_conformance._CASES:
            family = FAMILIES[name]
            test_conformance._CASES[name] = Case(family, by_flavour[family.tokenizer], texts)
        return test_conformance._CASES[name]

    return make


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_float32_on_the_device_matches_the_float64_reference(device_case):
    errors = device_case.errors(None)
    failed = {name: value for name, value in errors.items() if name in FLOAT32 and value >= FLOAT32[name]}
    assert not failed, f"{device_case.reference.family.name}: {errors} (tolerances {FLOAT32})"


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_bfloat16_autocast_on_the_device_matches_the_float64_reference(device_case):
    errors = device_case.errors("bf16")
    failed = {name: value for name, value in errors.items() if value >= BFLOAT16[name]}
    assert not failed, f"{device_case.reference.family.name}: {errors} (tolerances {BFLOAT16})"


# --------------------------------------------------------------------- the probe, a sweep and its report
#: The ProbeResult figures compared between the device (float32) and the CPU (float64).
PROBE_FIELDS = (
    "energy_share",
    "control_energy_shares",
    "random_energy_shares",
    "oracle_energy_share",
    "isoscore_star",
    "isoscore_star_without_tangent",
    "analytic_null",
    "loss",
)


def _probe_run(model, tokenizer, texts, tangent):
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=4)
    return ia.GradientProbe(mwsp, batch_size=4, seed=0).run(texts, tangent, n_controls=8, seed=0, progress=False)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_probe_run_on_the_device_equals_float64_on_the_cpu(gpt_neox_model, texts, chosen_device):
    model, tokenizer = gpt_neox_model
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=0)
    on_device = _probe_run(copy.deepcopy(model).to(chosen_device), tokenizer, texts[:16], tangent)
    reference = _probe_run(copy.deepcopy(model).double(), tokenizer, texts[:16], tangent)
    assert (on_device.n_tokens, on_device.n_sequences) == (reference.n_tokens, reference.n_sequences)
    for name in PROBE_FIELDS:
        np.testing.assert_allclose(getattr(on_device, name), getattr(reference, name), rtol=RESULT_RTOL, err_msg=name)
    # IsoScore* without the tangent minus IsoScore*: known to its terms' RESULT_RTOL (tests/helpers/tolerances.py)
    terms = (reference.isoscore_star, reference.isoscore_star_without_tangent)
    assert_difference_close(on_device.delta_isoscore_star, reference.delta_isoscore_star, *terms, rtol=RESULT_RTOL)


SWEEP = {"split_point": 1, "nb_concepts": 4, "n_controls": 5, "seed": 3, "reference": "each", "progress": False}
SWEEP_FIELDS = ("energy_share", "control_energy_shares", "oracle_energy_share", "isoscore_star", "activation_isoscore")


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_sweep_and_its_report_on_the_device_equal_the_cpu_sweep(
    toy_checkpoints, sweep_texts, tmp_path, chosen_device
):
    checkpoints = ia.checkpoints.local(toy_checkpoints.out_dir / "checkpoint-*")[::2]
    tables = {}
    for name, device in (("device", str(chosen_device)), ("cpu", "cpu")):
        sweep = ia.CheckpointSweep(
            checkpoints, results_dir=tmp_path / name, device=device, max_metric_tokens=300, **sweep_texts, **SWEEP
        )
        tables[name] = sweep.run()
    on_device, cpu = tables["device"], tables["cpu"]
    assert on_device.steps == cpu.steps and len(on_device) == len(checkpoints) == 3
    for row, expected in zip(on_device.rows, cpu.rows, strict=True):
        assert row["n_tokens"] == expected["n_tokens"]
        for name in SWEEP_FIELDS:  # float32 on both: the fit's rounding differs
            np.testing.assert_allclose(row[name], expected[name], rtol=1e-3, err_msg=f"step {row['step']}: {name}")
    report = ia.write_report(on_device, tmp_path / "report")
    assert report.name == "index.html" and report.stat().st_size > 10_000
    csv_rows = (tmp_path / "report" / "rows.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + len(on_device)


# --------------------------------------------------------------------- the live probe and its Trainer callback
def _live_rows(model, tokenizer, steps, tangent, device):
    """Train `model` (SGD, summed loss) one step per entry of `steps` on `device` with a live probe; its rows and
    float64 CPU snapshots of the weights before each step."""
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    snapshots, rows = [], []
    template = copy.deepcopy(model).cpu()
    with ia.TrainingProbe(model, 1, tokenizer=tokenizer, tangent=tangent, reduction="sum") as probe:
        for batches in steps:
            snapshot = copy.deepcopy(template)
            snapshot.load_state_dict({key: value.cpu() for key, value in model.state_dict().items()})
            snapshots.append(snapshot.double())
            on_device = [{key: value.to(device) for key, value in batch.items()} for batch in batches]
            rows.extend(train_step(model, probe, on_device, optimizer, summed=True))
    return rows, snapshots


def test_the_live_probe_on_the_device_equals_the_post_hoc_probe_in_float64(
    gpt_neox_training_model, texts, chosen_device
):
    model, tokenizer = (
        copy.deepcopy(gpt_neox_training_model[0]).train().requires_grad_(True),
        gpt_neox_training_model[1],
    )
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=3)
    steps = [
        [micro_batch(tokenizer, texts[12 * s + 6 * m : 12 * s + 6 * m + 6], start=6 * m) for m in range(2)]
        for s in range(2)
    ]
    rows, snapshots = _live_rows(model, tokenizer, steps, tangent, chosen_device)
    assert [row["step"] for row in rows] == [0, 1]
    for row, snapshot, batches in zip(rows, snapshots, steps, strict=True):
        reference = post_hoc(snapshot, tokenizer, batches, tangent, objective="causal_lm", draw_seed=row["draw_seed"])
        assert row["n_tokens"] == reference.n_tokens and row["n_sequences"] == reference.n_sequences == 12
        for name in ("energy_share", "control_energy_shares", "random_energy_shares", "oracle_energy_share"):
            np.testing.assert_allclose(
                row[name], getattr(reference, name), rtol=RESULT_RTOL, err_msg=f"step {row['step']}: {name}"
            )


def test_the_trainer_callback_on_the_device_logs_writes_and_reports(
    gpt_neox_training_model, texts, tmp_path, chosen_device
):
    model, tokenizer = (
        copy.deepcopy(gpt_neox_training_model[0]).train().requires_grad_(True),
        gpt_neox_training_model[1],
    )
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=chosen_device.type == "cpu",
        disable_tqdm=True,
        seed=0,
    )
    data = [tokenizer(text, truncation=True, max_length=32) for text in texts[:12]]
    callback = ia.AnisotropyCallback(
        1, results_dir=tmp_path / "live", tangent=ia.Subspace.random(64, 4, seed=0), n_controls=5
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[callback])
    trainer.train()
    assert next(trainer.model.parameters()).device.type == chosen_device.type
    table = ia.SweepResult.load(tmp_path / "live")
    assert table.steps == [0, 1, 2]
    logged = [
        entry["anisotropy/1/energy_share"]
        for entry in trainer.state.log_history
        if "anisotropy/1/energy_share" in entry
    ]
    assert logged == pytest.approx(table.column("energy_share"), rel=1e-12)
    assert all(0 < share < 1 for share in logged)
    assert (tmp_path / "live" / "report" / "index.html").exists()
