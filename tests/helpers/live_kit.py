# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Shared kit of the live-probe tests: float64 copies of the toy models, right-padded training batches, a training
step that feeds the live probe, and the post-hoc `GradientProbe` run of the same batches on a weight snapshot."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.probing.objectives import MaskedLMObjective

from .tolerances import assert_difference_close, difference_atol, rounding_rtol

N_CONTROLS = 20
#: The fields that must agree between a live window and the post-hoc probe of the same batches and weights.
COMPARED = (
    "energy_share",
    "control_energy_shares",
    "random_energy_shares",
    "oracle_energy_share",
    "isoscore_star",
    "isoscore_star_without_tangent",
    "isoscore_star_without_controls",
    "delta_isoscore_star_random",
    "analytic_null",
    "ci_low",
    "ci_high",
)


def float64_copy(pair):
    """A float64 training copy of a (model, tokenizer) fixture pair, its parameters trainable again (the session's
    model may have been wrapped by Interpreto's ModelWithSplitPoints in another test, which freezes them)."""
    model, tokenizer = pair
    return copy.deepcopy(model).double().train().requires_grad_(True), tokenizer


def micro_batch(tokenizer, texts: list[str], *, start: int, masked: bool = False, max_length: int = 48) -> dict:
    """A right-padded training micro-batch with labels (-100 at padding; the seeded probe mask for a masked LM).

    `start` is the index of its first sequence among the probe's inputs (the masked LM's mask is seeded by it).
    """
    encoded = tokenizer(
        texts, padding=True, padding_side="right", truncation=True, max_length=max_length, return_tensors="pt"
    )
    batch = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if masked:
        ids = torch.arange(start, start + len(texts))
        prepared = MaskedLMObjective(seed=0).prepare(batch, sequence_ids=ids, tokenizer=tokenizer)
        return {
            "input_ids": prepared["input_ids"],
            "attention_mask": batch["attention_mask"],
            "labels": prepared["labels"],
            "original_input_ids": batch["input_ids"],
        }
    return {**batch, "labels": batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)}


def summed_causal_loss(output, batch: dict) -> torch.Tensor:
    """The summed next-token cross-entropy of a batch (a loop's own loss with reduction "sum")."""
    logits = output.logits[:, :-1].flatten(0, 1)
    return torch.nn.functional.cross_entropy(logits, batch["labels"][:, 1:].flatten(), reduction="sum")


def train_step(
    model, probe, batches: list[dict], optimizer, *, loss_scale: float = 1.0, scaler=None, summed: bool = False
) -> list[dict]:
    """One optimizer step over micro-batches (gradient accumulation), then `probe.step()`; returns its rows.

    The loss is the model's (a mean over the micro-batch's terms), or with `summed` the summed cross-entropy.
    """
    for batch in batches:
        output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        loss = (summed_causal_loss(output, batch) if summed else output.loss) * loss_scale
        torch.autograd.backward(scaler.scale(loss) if scaler is not None else loss)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return probe.step()


def probe_inputs(batches: list[dict]) -> dict:
    """The micro-batches as the post-hoc probe's pre-tokenised inputs (original tokens, right-padded)."""
    width = max(batch["input_ids"].shape[1] for batch in batches)
    ids, masks = [], []
    for batch in batches:
        original = batch.get("original_input_ids", batch["input_ids"])
        pad = width - original.shape[1]
        ids.append(torch.nn.functional.pad(original, (0, pad)))
        masks.append(torch.nn.functional.pad(batch["attention_mask"], (0, pad)))
    return {"input_ids": torch.cat(ids), "attention_mask": torch.cat(masks)}


def post_hoc(
    snapshot,
    tokenizer,
    batches: list[dict],
    tangent,
    *,
    objective: str,
    draw_seed: int,
    split_point: int | str = 1,
    call: str | int | None = None,
    n_random: int | None = None,
) -> ia.ProbeResult:
    """`GradientProbe.run` of the same batches on a weight snapshot (the weights of the window's step), with the
    controls and random subspaces of the window's row (its ``draw_seed``; R' = `n_random`, default `N_CONTROLS`), at
    `split_point` and its `call`."""
    mwsp = ModelWithSplitPoints(
        snapshot.eval(), split_point=split_point, tokenizer=tokenizer, batch_size=batches[0]["input_ids"].shape[0]
    )
    probe = ia.GradientProbe(mwsp, objective=objective, seed=0, call=call)
    with warnings.catch_warnings():  # a window of fewer than 10 sequences: the live rows' intervals are as unreliable
        warnings.simplefilter("ignore", ia.errors.DegenerateStatisticsWarning)
        return probe.run(
            probe_inputs(batches),
            tangent,
            n_controls=N_CONTROLS,
            n_random=n_random,
            seed=0,
            draw_seeds={"tangent": draw_seed},
            progress=False,
        )


def _field_rtol(name: str, result: ia.ProbeResult, tolerance: float) -> float:
    if name == "control_energy_shares":
        # The controls' shares rest on float32 products (probing/probe.py), so the two paths' shares of a control
        # can be about 1e-6 apart relatively (ALBERT's shared layer under transformers 4.57: 1.2e-6): the
        # conformance matrix's ENERGY_RTOL for them.
        return max(tolerance, 1e-5)
    if name == "random_energy_shares":
        # The random subspaces' energies are tr(Q^T S2 Q) of the float32 moment sums S2 (probing/statistics.py):
        # a signed sum over the d^2 entries of S2, each rounded in float32 and grouped differently by the live window
        # and the post-hoc batches, so they are known to rounding_rtol(float32, n=d^2) = eps32 * d relatively
        # (tests/helpers/tolerances.py): 3.8e-6 at d = 32, where 1.4e-7 was measured (benchmarks/margins/report.md).
        return max(tolerance, rounding_rtol(torch.float32, n=result.dim**2))
    if name in ("ci_low", "ci_high") and result.n_sequences < 10:
        # The bootstrap-t over a handful of sequences studentizes resamples of one or two distinct sequences, whose
        # distance and jackknife error are both differences of nearly equal shares: a relative input difference of
        # 1e-8 moves its bounds by up to ~1e-5 at 4 sequences (2e-8 at 12, 1e-8 at 20: tests/test_intervals.py).
        return 1e-3
    return tolerance


def assert_same_window(row: dict, result: ia.ProbeResult, *, tolerance: float = 1e-6) -> None:
    """The live row agrees with the post-hoc result on every compared field, to `tolerance` relatively (ΔIsoScore*
    of the random subspaces: on the scale of its IsoScore* terms, tests/helpers/tolerances.py)."""
    assert row["n_tokens"] == result.n_tokens and row["n_sequences"] == result.n_sequences
    for name in COMPARED:
        live, reference = row[name], getattr(result, name)
        if name == "delta_isoscore_star_random":  # IsoScore* without each random subspace minus IsoScore*
            terms = (result.isoscore_star, result.isoscore_star + np.asarray(reference))
            assert_difference_close(live, reference, *terms, rtol=tolerance, err_msg=name)
        else:
            np.testing.assert_allclose(live, reference, rtol=_field_rtol(name, result, tolerance), err_msg=name)
    near_tie = np.min(np.abs(result.control_energy_shares - result.energy_share)) < tolerance * result.energy_share
    assert row["p_value"] == result.p_value or near_tie
    near_tie = np.min(np.abs(result.random_energy_shares - result.energy_share)) < tolerance * result.energy_share
    assert row["p_value_exact"] == result.p_value_exact or near_tie
    deltas, delta = result.delta_isoscore_star_random, result.delta_isoscore_star
    isoscore = result.isoscore_star
    tie = difference_atol(isoscore, isoscore + deltas, rtol=tolerance) + difference_atol(
        isoscore, isoscore + delta, rtol=tolerance
    )  # each delta known to its terms' difference_atol: closer than both, their order may differ
    near_tie = np.min(np.abs(deltas - delta)) < tie
    assert row["anisotropy_p_value_exact"] == result.anisotropy_p_value_exact or near_tie


def run_windows(
    model, tokenizer, steps: list[list[dict]], make_probe: Callable, *, lr: float = 0.05, **step_options
) -> tuple[list[dict], list]:
    """Train one step per entry of `steps` with a live probe; return its rows and the weights before each step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    snapshots, rows = [], []
    template = copy.deepcopy(model)  # copied before the probe's hooks are on the model (a copy would carry them)
    with make_probe(model) as probe:
        for batches in steps:
            snapshot = copy.deepcopy(template)
            snapshot.load_state_dict(model.state_dict())
            snapshots.append(snapshot)
            rows.extend(train_step(model, probe, batches, optimizer, **step_options))
    return rows, snapshots


def finite(value) -> bool:
    """Whether a row value is a finite number."""
    return value is not None and math.isfinite(value)


def pending_bytes(point) -> tuple[int, int]:
    """(bytes of the d x d moments and gradient rows the windows awaiting a tangent hold at a `LivePoint`, bytes of
    every tensor they hold), counted from the tensors themselves."""
    tensors, bounded = [], 0
    for entry in point.pending:
        moments = entry.sums.moments
        bounded += moments.s2.nbytes
        tensors += [moments.n, moments.s1, moments.s2, moments.shift]
        tensors += [entry.sums.sequence_energy, entry.sums.sequence_total, entry.sums.sequence_id]
        if entry.kept is not None:
            bounded += sum(batch.rows.nbytes for batch in entry.kept.batches)
            tensors += [tensor for batch in entry.kept.batches for tensor in (batch.rows, batch.finite)]
            tensors += entry.kept.has_rows
    unique = {id(tensor): tensor for tensor in tensors if tensor is not None}
    return bounded, sum(tensor.nbytes for tensor in unique.values())
