# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What training added: the change from the first checkpoint, its paired bootstrap interval and its p-value.

Recomputed another way: the interval and the p-value by an explicit loop over the bootstrap replicas (numpy, the
same resample indices, a leave-one-out loop for each jackknife error); the test of "no change" calibrated on a
known process (synthetic per-sequence gradients at two checkpoints with a fixed tangent, paired per sequence: the
rejection rate under zero change inside the binomial 99 % band at 0.05 over 400 replicas); the probe's per-sequence
lists summed back to its energy share and ratio; a sweep's change columns against the rows' own differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy.probing.intervals import paired_change
from interpreto_anisotropy.results.change import CHANGE_FIELDS, change_fields
from interpreto_anisotropy.results.verdict import sweep_verdict, verdict_text

LEVEL = 0.05


def _synthetic(rng, n, *, boost=(2.0, 2.0), rho=0.6, dim=8, rank=2, n_controls=4):
    """Per-sequence (energy in the tangent, total, mean energy in the controls) at two checkpoints, paired.

    Sequence i has a gamma scale s_i and L_i tokens; its gradient rows at checkpoint 0 are N(0, s_i C_0) with
    C_c = diag(boost_c on the tangent's `rank` coordinates, 1 elsewhere); at checkpoint 1 they are rho times those
    plus fresh noise (the same sequences: paired). Population energy share: rank b / (rank b + dim - rank); ratio
    against controls in the complement: b.
    """
    lengths, scales = rng.poisson(6, n) + 2, rng.gamma(2.0, 0.5, n)
    controls = [np.linalg.qr(rng.standard_normal((dim - rank, rank)))[0] for _ in range(n_controls)]
    energy, total, control = (np.zeros((2, n)) for _ in range(3))
    for i in range(n):
        first = rng.standard_normal((lengths[i], dim))
        second = rho * first + math.sqrt(1 - rho**2) * rng.standard_normal((lengths[i], dim))
        for c, noise in enumerate((first, second)):
            rows = noise * math.sqrt(scales[i])
            rows[:, :rank] *= math.sqrt(boost[c])
            energy[c, i], total[c, i] = (rows[:, :rank] ** 2).sum(), (rows**2).sum()
            control[c, i] = np.mean([((rows[:, rank:] @ basis) ** 2).sum() for basis in controls])
    return energy, total, control


def _change(energy, total, control, *, seed=0, n_resamples=200, confidence=0.95):
    numerators = (np.stack([energy[0]] * 2, 1), np.stack([energy[1]] * 2, 1))
    denominators = (np.stack([total[0], control[0]], 1), np.stack([total[1], control[1]], 1))
    return paired_change(
        numerators, denominators, n_resamples=n_resamples, confidence=confidence,
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip


def test_no_change_is_rejected_at_the_nominal_rate():
    """400 replicas of zero change (the same law at both checkpoints): the rejection rate at 0.05, for the energy
    share and the energy ratio, lies in the binomial 99 % band of 400 draws at 0.05."""
    rng = np.random.default_rng(2026)
    replicas = 400
    rejected = np.zeros(2)
    for replica in range(replicas):
        found = _change(*_synthetic(rng, 30), seed=replica)
        rejected += found.p_value <= LEVEL
    low, high = scipy.stats.binom.interval(0.99, replicas, LEVEL)
    assert np.all((low <= rejected) & (rejected <= high)), (rejected / replicas, low / replicas, high / replicas)


def test_a_real_change_is_detected_and_covered():
    """A boost from 1 to 3 on the tangent: population share change 6/12 - 2/8 = 0.25, ratio change 2; both are
    rejected as "no change" and lie inside most intervals."""
    rng = np.random.default_rng(7)
    truth = np.array([6 / 12 - 2 / 8, 3.0 - 1.0])
    covered, rejected, replicas = np.zeros(2), np.zeros(2), 60
    for replica in range(replicas):
        found = _change(*_synthetic(rng, 40, boost=(1.0, 3.0)), seed=replica)
        covered += (found.low <= truth) & (truth <= found.high)
        rejected += found.p_value <= LEVEL
    assert np.all(rejected == replicas)
    assert np.all(covered >= scipy.stats.binom.ppf(0.005, replicas, 0.95)), covered


def _explicit(a0, a1, b0, b1, *, seed, n_resamples, confidence):
    """The interval and p-value by hand: one replica at a time on the indices `torch.randint` draws (in chunks of
    250, as the library draws them), the jackknife error of each by a leave-one-out loop."""

    def change(idx):
        return a1[idx].sum() / b1[idx].sum() - a0[idx].sum() / b0[idx].sum()

    def error(idx):
        left_out = np.array([change(np.delete(idx, j)) for j in range(len(idx))])
        m = len(idx)
        return math.sqrt((m - 1) / m * ((left_out - left_out.mean()) ** 2).sum())

    n = len(a0)
    generator = torch.Generator().manual_seed(seed)
    indices = []
    for start in range(0, n_resamples, 250):
        size = min(250, n_resamples - start)
        indices += list(torch.randint(n, (size, n), generator=generator).numpy())
    everything = np.arange(n)
    observed, se = change(everything), error(everything)
    t = np.array([(change(idx) - observed) / error(idx) for idx in indices])
    tail = (1 - confidence) / 2
    ordered, absolute = np.sort(t), np.sort(np.abs(t))
    pick = lambda values, level: values[math.ceil(level * len(values) - 1e-9) - 1]  # noqa: E731
    symmetric = pick(absolute, confidence)
    below, above = max(pick(ordered, 1 - tail), symmetric), max(-pick(ordered, tail), symmetric)
    p = (1 + np.sum(np.abs(t) >= abs(observed) / se)) / (len(t) + 1)
    return observed, observed - below * se, observed + above * se, p


def test_the_interval_and_p_value_equal_an_explicit_loop_over_the_replicas():
    energy, total, control = _synthetic(np.random.default_rng(3), 12, boost=(2.0, 2.5))
    found = _change(energy, total, control, seed=5, n_resamples=300, confidence=0.9)
    for column, denominator in enumerate((total, control)):
        expected = _explicit(
            energy[0], energy[1], denominator[0], denominator[1], seed=5, n_resamples=300, confidence=0.9
        )
        got = (found.change[column], found.low[column], found.high[column], found.p_value[column])
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_degenerate_inputs():
    one = np.ones((1, 1))
    found = paired_change((one, 2 * one), (one, one), n_resamples=10, confidence=0.95,
                          generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert found.change[0] == 1.0 and math.isnan(found.low[0]) and math.isnan(found.p_value[0])
    same = np.arange(1.0, 6.0)[:, None]
    found = paired_change((same, same), (same + 1, same + 1), n_resamples=50, confidence=0.95,
                          generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert (found.change[0], found.low[0], found.high[0], found.p_value[0]) == (0.0, 0.0, 0.0, 1.0)
    with pytest.raises(ia.errors.InvalidInputError, match="n_seq"):
        paired_change((same, same[:3]), (same, same), n_resamples=5, confidence=0.9,
                      generator=torch.Generator())  # fmt: skip


@pytest.mark.parametrize("n_random", [5, 60])  # 60 * 4 > d: the random block is read from the scatter
def test_the_probes_per_sequence_lists_sum_to_its_share_and_ratio(gpt_neox_mwsp, texts, n_random):
    probe = ia.GradientProbe(gpt_neox_mwsp, seed=0)
    dim = probe.gradients(texts[:2], progress=False).gradients.shape[1]
    tangents = {"a": ia.Subspace.random(dim, 4, seed=1), "b": ia.Subspace.random(dim, 4, seed=2)}
    results = probe.run(texts[:10], tangents, n_controls=5, n_random=n_random, progress=False)
    raw = probe.gradients(texts[:10], progress=False)
    for name, result in results.items():
        energy, total = np.array(result.sequence_energies), np.array(result.sequence_totals)
        controls = np.array(result.sequence_control_energies)
        assert result.sequence_ids == sorted(set(raw.sequence_ids.tolist()))
        assert energy.sum() / total.sum() == pytest.approx(result.energy_share, rel=1e-12)
        assert energy.sum() / controls.sum() == pytest.approx(result.energy_ratio, rel=1e-12)
        gradients = raw.gradients.double()
        basis = tangents[name].basis.double()
        by_sequence = [(gradients[raw.sequence_ids == i] @ basis).square().sum().item() for i in result.sequence_ids]
        np.testing.assert_allclose(energy, by_sequence, rtol=1e-5)


def _row(step, energy, total, control, ids=None, **fields):
    ids = list(range(len(energy))) if ids is None else ids
    return {
        "step": step, "layer": 1, "split_point": "m.layers.1", "tangent": "early", "confidence": 0.95,
        "energy_share": energy.sum() / total.sum(), "energy_ratio": energy.sum() / control.sum(),
        "sequence_ids": ids, "sequence_energies": list(energy), "sequence_totals": list(total),
        "sequence_control_energies": list(control), **fields,
    }  # fmt: skip


def test_sweep_rows_change_from_their_curves_first_checkpoint():
    energy, total, control = _synthetic(np.random.default_rng(11), 25, boost=(1.0, 3.0))
    first = _row(0, energy[0], total[0], control[0], anisotropy_share=0.1)
    later = _row(60, energy[1], total[1], control[1], anisotropy_share=0.25)
    fields = change_fields([later, first, {**first, "tangent": "each"}], seed=4)
    assert set(fields[(0, "1", "early")]) == set(CHANGE_FIELDS)
    at_first = fields[(0, "1", "early")]
    assert (at_first["energy_share_change"], at_first["energy_share_change_low"]) == (0.0, 0.0)
    assert at_first["energy_ratio_change_p_value"] is None and at_first["change_reference_step"] == 0
    changed = fields[(60, "1", "early")]
    assert changed["energy_share_change"] == pytest.approx(later["energy_share"] - first["energy_share"], rel=1e-12)
    assert changed["energy_ratio_change"] == pytest.approx(later["energy_ratio"] - first["energy_ratio"], rel=1e-12)
    assert changed["anisotropy_share_change"] == pytest.approx(0.15)
    expected = _change(energy, total, control, seed=4, n_resamples=1000)
    assert changed["energy_ratio_change_low"] == pytest.approx(expected.low[1], rel=1e-12)  # one column, not two
    assert changed["energy_share_change_p_value"] == expected.p_value[0]
    assert changed["change_n_sequences"] == 25 and fields[(0, "1", "each")]["change_reference_step"] == 0


def test_only_sequences_probed_at_both_checkpoints_are_paired():
    energy, total, control = _synthetic(np.random.default_rng(12), 20)
    first = _row(0, energy[0], total[0], control[0])
    keep = list(range(2, 20))  # sequences 0 and 1 dropped at the later checkpoint (a skipped batch)
    later = _row(5, energy[1][keep], total[1][keep], control[1][keep], ids=keep)
    changed = change_fields([first, later], seed=0)[(5, "1", "early")]
    expected = energy[1][keep].sum() / total[1][keep].sum() - energy[0][keep].sum() / total[0][keep].sum()
    assert changed["change_n_sequences"] == 18
    assert changed["energy_share_change"] == pytest.approx(expected, rel=1e-12)
    older = {key: value for key, value in later.items() if not key.startswith("sequence_")}
    assert change_fields([first, older], seed=0)[(5, "1", "early")]["energy_share_change"] is None


def test_the_verdict_states_what_training_added():
    energy, total, control = _synthetic(np.random.default_rng(13), 25, boost=(1.0, 3.0))
    first = _row(0, energy[0], total[0], control[0], anisotropy_share=0.1)
    later = _row(60, energy[1], total[1], control[1], anisotropy_share=0.25)
    rows = [first, later]
    for row in rows:
        row.update(change_fields(rows, seed=0)[(row["step"], "1", "early")])
    text = verdict_text(sweep_verdict(rows))
    ratio = f"energy ratio {first['energy_ratio']:.2f} at step 0 → {later['energy_ratio']:.2f} at step 60: "
    interval = f"[{later['energy_ratio_change_low']:+.2f}, {later['energy_ratio_change_high']:+.2f}]"
    assert f"{ratio}{later['energy_ratio_change']:+.2f} (95 % paired bootstrap interval {interval}" in text
    assert "anisotropy share 0.100 at step 0 → 0.250 at step 60: +0.150 (no interval)" in text
    assert "What training added" not in verdict_text(sweep_verdict([first]))


def test_the_change_figure_draws_each_rows_change_and_interval():
    from interpreto_anisotropy.results.table import SweepResult
    from interpreto_anisotropy.visualizations.plotting import plot_change

    energy, total, control = _synthetic(np.random.default_rng(14), 25, boost=(1.0, 3.0))
    rows = [
        _row(step, energy[c], total[c], control[c], anisotropy_share=0.1 * (c + 1)) for c, step in enumerate((0, 60))
    ]
    for row in rows:
        row.update(change_fields(rows, seed=0)[(row["step"], "1", "early")])
    figure = plot_change(SweepResult(rows, {}))
    ratio_panel = figure.axes[0]
    (container,) = ratio_panel.containers
    line, _, (bars,) = container.lines
    np.testing.assert_allclose(np.asarray(line.get_ydata(), dtype=float), [0.0, rows[1]["energy_ratio_change"]])
    low, high = rows[1]["energy_ratio_change_low"], rows[1]["energy_ratio_change_high"]
    segment = bars.get_segments()[1]
    np.testing.assert_allclose(sorted(segment[:, 1]), [low, high])
    assert "change not recorded" not in [text.get_text() for text in figure.axes[2].texts]
    bare = plot_change(SweepResult([{"step": 0, "split_point": "m", "tangent": "early", "energy_share": 0.3}], {}))
    assert all("change not recorded" in [text.get_text() for text in ax.texts] for ax in bare.axes)


def test_the_change_figure_draws_a_change_outside_its_own_interval():
    """A bootstrap-t interval need not hold its estimate: its bar is drawn to the bound, not refused."""
    from interpreto_anisotropy.results.table import SweepResult
    from interpreto_anisotropy.visualizations.plotting import plot_change

    energy, total, control = _synthetic(np.random.default_rng(14), 25, boost=(1.0, 3.0))
    rows = [_row(step, energy[c], total[c], control[c]) for c, step in enumerate((0, 60))]
    for row in rows:
        row.update(change_fields(rows, seed=0)[(row["step"], "1", "early")])
    change = rows[1]["energy_ratio_change"]
    rows[1]["energy_ratio_change_low"], rows[1]["energy_ratio_change_high"] = change + 0.1, change + 0.3
    (container,) = plot_change(SweepResult(rows, {})).axes[0].containers
    _, _, (bars,) = container.lines
    np.testing.assert_allclose(sorted(bars.get_segments()[1][:, 1]), [change, change + 0.3])
