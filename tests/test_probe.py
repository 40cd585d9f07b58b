# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""GradientProbe against independent computations: per-token autograd loops and NumPy recomputations."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
import torch.nn.functional as F
from helpers.tolerances import assert_difference_close
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import DegenerateStatisticsWarning, InvalidInputError, NonFiniteError, ReadingWarning
from interpreto_anisotropy.probing.intervals import share_intervals
from interpreto_anisotropy.probing.probe import GradientProbe
from interpreto_anisotropy.tangents.controls import normal_control_bases

N_BRUTE = 4  # sequences checked token by token
NEW_FIELDS = {
    "random_energy_shares",
    "p_value_exact",
    "chance_std",
    "z_score",
    "anisotropy_share",
    "delta_isoscore_star_random",
    "anisotropy_p_value_exact",
}


def _double_mwsp(pair):
    """A float64 copy of a fixture model (fixtures are shared and must not be mutated)."""
    model, tokenizer = pair
    model = copy.deepcopy(model).double().eval()
    return ModelWithSplitPoints(model, split_point=1, tokenizer=copy.deepcopy(tokenizer), batch_size=3)


def _split_output_hook(store: dict):
    def hook(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        store["h"] = hidden
        return None

    return hook


def _brute_force_gradients(mwsp, input_ids: torch.Tensor, loss_terms) -> torch.Tensor:
    """dL/dh for one unpadded sequence: sum over loss terms of autograd.grad(term, h), one term at a time."""
    model = mwsp._model
    store: dict = {}
    handle = model.get_submodule(mwsp.split_point).register_forward_hook(_split_output_hook(store))
    try:
        with torch.enable_grad():
            output = model(input_ids=input_ids[None], attention_mask=torch.ones_like(input_ids)[None])
            hidden = store["h"]
            total = torch.zeros_like(hidden)
            for term in loss_terms(output.logits[0]):
                (gradient,) = torch.autograd.grad(term, hidden, retain_graph=True)
                total += gradient
    finally:
        handle.remove()
    return total[0]


def _causal_terms(input_ids):
    def terms(logits):
        for position in range(input_ids.shape[0] - 1):
            yield F.cross_entropy(logits[position], input_ids[position + 1])

    return terms


@pytest.fixture(scope="module")
def neox64(gpt_neox_model):
    return _double_mwsp(gpt_neox_model)


@pytest.fixture(scope="module")
def llama64(llama_model):
    return _double_mwsp(llama_model)


@pytest.fixture(scope="module")
def eurobert64(eurobert_model):
    return _double_mwsp(eurobert_model)


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("which", ["neox64", "llama64"])
def test_causal_lm_gradients_equal_per_token_autograd_loop(which, request, texts):
    mwsp = request.getfixturevalue(which)
    probe = GradientProbe(mwsp, objective="causal_lm")
    result = probe.gradients(texts[:N_BRUTE])
    for sequence in range(N_BRUTE):
        ids = mwsp.tokenizer(texts[sequence], truncation=True, max_length=probe.max_length, return_tensors="pt")[
            "input_ids"
        ][0]
        expected = _brute_force_gradients(mwsp, ids, _causal_terms(ids))
        rows = result.sequence_ids == sequence
        # The last token predicts nothing: its gradient is identically zero and it is not probed.
        assert torch.all(expected[-1] == 0)
        assert rows.sum() == ids.shape[0] - 1
        assert torch.equal(result.positions[rows], torch.arange(ids.shape[0] - 1))
        assert torch.equal(result.input_ids[rows], ids[:-1])
        assert _relative_error(result.gradients[rows], expected[:-1]) < 1e-5


def test_masked_lm_gradients_equal_per_token_autograd_loop(eurobert64, texts):
    probe = GradientProbe(eurobert64, objective="masked_lm", seed=3)
    result = probe.gradients(texts[:N_BRUTE])
    assert result.masked is not None and result.masked.any()
    tokenizer = eurobert64.tokenizer
    for sequence in range(N_BRUTE):
        encoded = tokenizer(texts[sequence], truncation=True, max_length=probe.max_length, return_tensors="pt")
        prepared = probe.objective.prepare(
            dict(encoded), sequence_ids=torch.tensor([sequence]), tokenizer=tokenizer
        )  # the mask depends on (seed, sequence index) only, so it is the one the probe used
        corrupted, labels = prepared["input_ids"][0], prepared["labels"][0]
        selected = (labels != -100).nonzero().flatten()

        def terms(logits, selected=selected, labels=labels):
            for position in selected:
                yield F.cross_entropy(logits[position], labels[position])

        expected = _brute_force_gradients(eurobert64, corrupted, terms)
        rows = result.sequence_ids == sequence
        ids = encoded["input_ids"][0]
        # The token policy: BOS / EOS (the toy encoder's CLS / SEP) are not rows, every other token is.
        kept = ~torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
        assert not kept[0] and not kept[-1] and kept[1:-1].all()
        assert torch.equal(result.masked[rows], (labels != -100)[kept])
        assert torch.equal(result.input_ids[rows], ids[kept])
        assert torch.equal(result.positions[rows], kept.nonzero().flatten())
        assert _relative_error(result.gradients[rows], expected[kept]) < 1e-5


def test_masked_lm_mask_is_seeded_and_independent_of_batching(eurobert_mwsp, texts):
    masks = []
    for batch_size, seed in [(8, 1), (3, 1), (8, 2)]:
        probe = GradientProbe(eurobert_mwsp, objective="masked_lm", seed=seed, batch_size=batch_size)
        masks.append(probe.gradients(texts[:10]).masked)
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(masks[0], masks[2])
    share = masks[0].float().mean().item()
    assert 0.05 < share < 0.3  # about 15 % of the non-special tokens


def test_left_and_right_padding_give_the_same_gradients(neox64, texts):
    probe = GradientProbe(neox64, objective="causal_lm")
    tokenizer = neox64.tokenizer
    by_side = {}
    for side in ("left", "right"):
        encoded = tokenizer(
            texts[:6], padding=True, padding_side=side, truncation=True, max_length=128, return_tensors="pt"
        )
        by_side[side] = probe.gradients(encoded)
    left, right = by_side["left"], by_side["right"]
    assert torch.equal(left.sequence_ids, right.sequence_ids)
    assert torch.equal(left.positions, right.positions)
    assert _relative_error(left.gradients, right.gradients) < 1e-9


def _numpy_isoscore_star(points: np.ndarray, zeta: float = 0.2) -> float:
    """IsoScore* by the original eigenvalue algorithm (Rudman et al. 2022 steps) on the shrunk covariance."""
    covariance = np.cov(points.T)
    d = covariance.shape[0]
    shrunk = (1 - zeta) * covariance + zeta * np.trace(covariance) / d * np.eye(d)
    eigenvalues = np.linalg.eigvalsh(shrunk)
    normalised = np.sqrt(d) * eigenvalues / np.linalg.norm(eigenvalues)
    defect = np.linalg.norm(normalised - 1) / np.sqrt(2 * (d - np.sqrt(d)))
    phi = (d - defect**2 * (d - np.sqrt(d))) ** 2 / d**2
    return float((d * phi - 1) / (d - 1))


@pytest.fixture(scope="module")
def neox_tangent(gpt_neox_mwsp, fit_texts):
    activations, _ = gpt_neox_mwsp.get_activations(
        fit_texts, activation_granularity=ModelWithSplitPoints.activation_granularities.TOKEN
    )
    return ia.PCATangent(gpt_neox_mwsp, nb_concepts=6).fit(activations)


def test_result_numbers_equal_a_numpy_recomputation(gpt_neox_mwsp, neox_tangent, texts):
    n_controls = 12
    probe = GradientProbe(gpt_neox_mwsp, objective="causal_lm")
    result = probe.run(texts, neox_tangent, n_controls=n_controls, seed=5, progress=False)
    raw = probe.gradients(texts)
    G = raw.gradients.double().numpy()
    Q = neox_tangent.subspace.basis.double().numpy()
    controls = normal_control_bases(neox_tangent.subspace, n_controls, seed=5).double().numpy()
    d, k = Q.shape
    total = np.sum(G**2)
    energy = np.sum((G @ Q) ** 2) / total
    control_energy = np.array([np.sum((G @ C) ** 2) / total for C in controls])
    assert result.n_tokens == G.shape[0] and result.dim == d and result.rank == k
    assert result.energy_share == pytest.approx(energy, rel=1e-5)
    np.testing.assert_allclose(result.control_energy_shares, control_energy, rtol=1e-5)
    assert result.control_mean == pytest.approx(control_energy.mean(), rel=1e-5)
    assert result.chance == k / d
    assert result.analytic_null == pytest.approx((1 - energy) * k / (d - k), rel=1e-5)
    assert result.energy_ratio == pytest.approx(energy / control_energy.mean(), rel=1e-5)
    assert result.p_value == pytest.approx((1 + np.sum(control_energy >= energy)) / (n_controls + 1))
    top = np.linalg.eigvalsh(G.T @ G)[::-1]
    oracle = top[:k].sum() / top.sum()
    assert result.oracle_energy_share == pytest.approx(oracle, rel=1e-5)
    assert result.energy_share <= result.oracle_energy_share + 1e-9
    assert result.anisotropy_capture == pytest.approx((energy - k / d) / (oracle - k / d), rel=1e-4)
    assert result.isoscore_star == pytest.approx(_numpy_isoscore_star(G), abs=1e-6)
    complement = scipy.linalg.null_space(Q.T)
    assert result.isoscore_star_without_tangent == pytest.approx(_numpy_isoscore_star(G @ complement), abs=1e-6)
    without_controls = [_numpy_isoscore_star(G @ scipy.linalg.null_space(C.T)) for C in controls]
    np.testing.assert_allclose(result.isoscore_star_without_controls, without_controls, atol=1e-6)
    terms = (result.isoscore_star_without_tangent, result.isoscore_star)
    assert_difference_close(result.delta_isoscore_star, terms[0] - terms[1], *terms, rtol=1e-6)
    sequence_ids = raw.sequence_ids.numpy()
    assert result.n_sequences == len(np.unique(sequence_ids))
    # Loss: mean next-token cross-entropy over the probed tokens.
    assert result.loss == pytest.approx(raw.loss_sum / raw.loss_count, rel=1e-6)
    # Interval: `share_intervals` (checked against a loop in test_intervals.py) of per-sequence sums recomputed here
    # in float64 from the raw gradients, with the probe's seed and resamples, gives the probe's interval.
    per_sequence = np.array(
        [[np.sum((G[sequence_ids == s] @ Q) ** 2), np.sum(G[sequence_ids == s] ** 2)] for s in np.unique(sequence_ids)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateStatisticsWarning)
        (low,), (high,) = share_intervals(
            torch.from_numpy(per_sequence[:, :1]),
            torch.from_numpy(per_sequence[:, 1]),
            n_resamples=1000,
            confidence=0.95,
            generator=torch.Generator().manual_seed(5),
        )
    width = high - low
    assert result.ci_low <= result.energy_share <= result.ci_high
    assert abs(result.ci_low - low) < 1e-3 * width and abs(result.ci_high - high) < 1e-3 * width


def test_exact_p_value_equals_a_brute_force_over_raw_gradients(gpt_neox_mwsp, neox_tangent, texts):
    """p_value_exact, recomputed by a loop over the random subspaces, each projected on the raw per-token gradients."""
    n_random, seed = 30, 5
    probe = GradientProbe(gpt_neox_mwsp, objective="causal_lm")
    tangents = {"pca": neox_tangent, "random": ia.Subspace.random(64, 6, seed=3)}
    results = probe.run(texts, tangents, n_controls=4, n_random=n_random, seed=seed, progress=False)
    G = probe.gradients(texts).gradients.double()
    randoms = ia.controls.random_subspace_bases(64, 6, n_random, seed=seed, dtype=torch.float64)
    for name, tangent in tangents.items():
        Q = tangent.subspace.basis if hasattr(tangent, "subspace") else tangent.basis
        total = sum(float(row @ row) for row in G)
        energy = sum(float((Q.double().T @ row).square().sum()) for row in G) / total
        beaten_by = 0
        for index in range(n_random):
            random_energy = sum(float((randoms[index].T @ row).square().sum()) for row in G) / total
            assert results[name].random_energy_shares[index] == pytest.approx(random_energy, rel=1e-5)
            beaten_by += random_energy >= energy
        assert results[name].p_value_exact == (1 + beaten_by) / (n_random + 1)
    eigenvalues = np.linalg.eigvalsh((G.T @ G).numpy())
    spread = (eigenvalues**2).sum() / eigenvalues.sum() ** 2 - 1 / 64
    sigma = np.sqrt(2 * 6 * 58 / (64 * 63 * 66) * spread)
    for result in results.values():
        assert result.chance_std == pytest.approx(sigma, rel=1e-5)
        assert result.z_score == pytest.approx((result.energy_share - 6 / 64) / sigma, rel=1e-6)


def test_isoscore_options_flow_from_run_and_are_recorded(gpt_neox_mwsp, neox_tangent, texts):
    probe = GradientProbe(gpt_neox_mwsp)
    default = probe.run(texts, neox_tangent, n_controls=3, seed=1, progress=False)
    assert (default.isoscore_convention, default.isoscore_zeta, default.isoscore_c0) == (
        "complement",
        0.2,
        "scaled_identity",
    )
    ambient = probe.run(
        texts,
        neox_tangent,
        n_controls=3,
        seed=1,
        isoscore_convention="ambient",
        isoscore_zeta=0.75,
        isoscore_c0="identity",
        progress=False,
    )
    assert (ambient.isoscore_convention, ambient.isoscore_zeta, ambient.isoscore_c0) == ("ambient", 0.75, "identity")
    assert ambient.energy_share == default.energy_share and ambient.p_value_exact == default.p_value_exact
    G = probe.gradients(texts).gradients.double()
    Q = neox_tangent.subspace.basis.double()
    eye = torch.eye(64, dtype=torch.float64)
    without = ia.metrics.isoscore_star(G - G @ Q @ Q.T, zeta=0.75, C0=eye)
    assert ambient.isoscore_star_without_tangent == pytest.approx(without, abs=1e-6)
    assert ambient.isoscore_star == pytest.approx(ia.metrics.isoscore_star(G, zeta=0.75, C0=eye), abs=1e-6)
    given = probe.run(texts, neox_tangent, n_controls=3, isoscore_c0=torch.cov(G.T), progress=False)
    assert given.isoscore_c0 == "given"
    with pytest.raises(InvalidInputError, match="isoscore_c0"):
        probe.run(texts[:2], neox_tangent, isoscore_c0=torch.eye(3), progress=False)
    with pytest.raises(InvalidInputError, match="isoscore_convention"):
        probe.run(texts[:2], neox_tangent, isoscore_convention="tangent", progress=False)
    with pytest.raises(InvalidInputError, match=r"n_random.*\b0\b"):
        probe.run(texts[:2], neox_tangent, n_random=0, progress=False)


def test_batching_and_seed_do_not_change_the_result(gpt_neox_mwsp, neox_tangent, texts):
    results = [
        GradientProbe(gpt_neox_mwsp, batch_size=batch_size).run(texts[:12], neox_tangent, n_controls=5, progress=False)
        for batch_size in (12, 5, 12)
    ]
    for other in results[1:]:
        assert other.energy_share == pytest.approx(results[0].energy_share, rel=1e-5)
        np.testing.assert_allclose(other.control_energy_shares, results[0].control_energy_shares, rtol=1e-5)
        assert other.isoscore_star == pytest.approx(results[0].isoscore_star, abs=1e-6)
        assert other.n_tokens == results[0].n_tokens
    assert results[0].to_dict() == results[2].to_dict()


def test_mean_reduction_divides_each_gradient_by_the_number_of_terms(gpt_neox_mwsp, texts):
    summed = GradientProbe(gpt_neox_mwsp, reduction="sum", batch_size=64).gradients(texts[:6])
    mean = GradientProbe(gpt_neox_mwsp, reduction="mean", batch_size=64).gradients(texts[:6])
    assert _relative_error(mean.gradients * summed.loss_count, summed.gradients) < 1e-5


def test_random_subspaces_hold_chance_energy_and_controls_meet_the_analytic_null(gpt_neox_mwsp, texts):
    d, k = 64, 4
    randoms = {f"random-{seed}": ia.Subspace.random(d, k, seed=seed) for seed in range(8)}
    results = GradientProbe(gpt_neox_mwsp).run(texts, randoms, n_controls=100, seed=1, progress=False)
    shares = np.array([result.energy_share for result in results.values()])
    standard_error = shares.std(ddof=1) / np.sqrt(shares.size)
    assert abs(shares.mean() - k / d) < 4 * standard_error + 1e-3
    for result in results.values():
        control_error = result.control_energy_shares.std(ddof=1) / np.sqrt(result.control_energy_shares.size)
        assert abs(result.control_mean - result.analytic_null) < 4 * control_error


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_result_serialises_and_prints(gpt_neox_mwsp, neox_tangent, texts):
    result = GradientProbe(gpt_neox_mwsp).run(texts[:6], {"pca": neox_tangent}, n_controls=3, progress=False)["pca"]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["energy_share"] == result.energy_share and len(data["control_energy_shares"]) == 3
    again = ia.ProbeResult.from_dict(data)
    assert again.energy_share == result.energy_share
    text = str(result)
    assert "energy share" in text and "p-value" in text and "IsoScore*" in text
    assert "p-value exact" in text and "z-score" in text and "anisotropy share" in text
    assert data["p_value_exact"] == result.p_value_exact and len(data["random_energy_shares"]) == 3
    assert data["anisotropy_share"] == result.anisotropy_share
    older = {key: value for key, value in data.items() if key not in NEW_FIELDS}  # a result saved before them
    assert np.isnan(ia.ProbeResult.from_dict(older).p_value_exact)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_max_tokens_caps_the_rows(gpt_neox_mwsp, neox_tangent, texts):
    result = GradientProbe(gpt_neox_mwsp).run(texts, neox_tangent, n_controls=2, max_tokens=37, progress=False)
    assert result.n_tokens == 37
    raw = GradientProbe(gpt_neox_mwsp).gradients(texts, max_tokens=37)
    assert raw.gradients.shape[0] == 37


def test_sequence_classification_objective(gpt_neox_classifier_mwsp, texts):
    probe = GradientProbe(gpt_neox_classifier_mwsp, objective="sequence_classification")
    with pytest.raises(InvalidInputError, match="labels"):
        probe.gradients(texts[:4])
    raw = probe.gradients(texts[:4], labels=[0, 1, 0, 1])
    assert raw.loss_count == 4 and torch.isfinite(raw.gradients).all()


def test_custom_callable_objective_equals_causal_lm(gpt_neox_mwsp, texts):
    def next_token_loss(output, batch):
        logits, ids, mask = output.logits[:, :-1], batch["input_ids"][:, 1:], batch["attention_mask"]
        valid = mask[:, :-1].bool() & mask[:, 1:].bool()
        return F.cross_entropy(logits[valid], ids[valid], reduction="sum")

    custom = GradientProbe(gpt_neox_mwsp, objective=next_token_loss).gradients(texts[:4])
    builtin = GradientProbe(gpt_neox_mwsp, objective="causal_lm").gradients(texts[:4])
    # The callable probes every real token; the built-in drops each sequence's last (zero-gradient) token.
    keep = torch.isin(custom.positions, builtin.positions) & (custom.gradients.abs().sum(1) > 0)
    torch.testing.assert_close(custom.gradients[keep], builtin.gradients, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------------------------- bad input
def test_empty_and_too_short_inputs(gpt_neox_mwsp, neox_tangent, texts):
    probe = GradientProbe(gpt_neox_mwsp)
    with pytest.raises(InvalidInputError):
        probe.run([], neox_tangent, progress=False)
    single_tokens = [gpt_neox_mwsp.tokenizer.decode([i]) for i in (40, 41)]
    with pytest.raises(InvalidInputError, match=r"\b2 tokens.*causal_lm"):
        probe.run(single_tokens, neox_tangent, progress=False)
    with pytest.warns(ReadingWarning, match=r"^2 sequence.*\b2 tokens"):
        kept = probe.gradients([*texts[:2], *single_tokens])
    assert set(kept.sequence_ids.tolist()) == {0, 1}
    with pytest.raises(InvalidInputError):
        probe.run(42, neox_tangent, progress=False)


def test_subspace_of_another_dimension_is_refused(gpt_neox_mwsp, texts):
    with pytest.raises(InvalidInputError, match="R\\^32"):
        GradientProbe(gpt_neox_mwsp).run(texts[:2], ia.Subspace.random(32, 4), progress=False)


def test_unknown_objective_and_options_are_refused(gpt_neox_mwsp):
    with pytest.raises(InvalidInputError, match="causal_lm"):
        GradientProbe(gpt_neox_mwsp, objective="next_sentence")
    with pytest.raises(InvalidInputError):
        GradientProbe(gpt_neox_mwsp, reduction="max")
    with pytest.raises(InvalidInputError):
        GradientProbe(gpt_neox_mwsp, on_nonfinite="ignore")
    with pytest.raises(InvalidInputError):
        GradientProbe("not a splitter")


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_non_finite_gradients_raise_naming_the_batch_or_are_skipped(gpt_neox_mwsp, neox_tangent, texts):
    calls = {"n": 0}

    def poisoned(output, batch):
        calls["n"] += 1
        loss = F.cross_entropy(
            output.logits[:, :-1].flatten(0, 1), batch["input_ids"][:, 1:].flatten(), reduction="sum"
        )
        return loss * float("nan") if calls["n"] == 2 else loss

    with pytest.raises(NonFiniteError, match="batch 1") as raised:
        GradientProbe(gpt_neox_mwsp, objective=poisoned, batch_size=4).run(texts[:12], neox_tangent, progress=False)
    advice = str(raised.value)  # weights, or the float64 padded-batch bug of some models (Gemma2)
    assert "weights" in advice and "batch_size=1" in advice and "float32" in advice and "Gemma2" in advice
    calls["n"] = 0
    with pytest.warns(ReadingWarning, match=r"4 sequence.*\b1 batch"):
        result = GradientProbe(gpt_neox_mwsp, objective=poisoned, batch_size=4, on_nonfinite="skip").run(
            texts[:12], neox_tangent, n_controls=3, progress=False
        )
    assert result.n_skipped_batches == 1 and result.n_sequences == 8 and result.n_skipped_sequences == 4


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_every_text_a_skip_drops_is_counted_and_said(gpt_neox_mwsp, neox_tangent, texts):
    """Issue 39: dropping 8 of 12 texts for non-finite gradients gave n_skipped_sequences=0 and no warning."""
    calls = {"n": 0}

    def poisoned(output, batch):
        calls["n"] += 1
        loss = F.cross_entropy(
            output.logits[:, :-1].flatten(0, 1), batch["input_ids"][:, 1:].flatten(), reduction="sum"
        )
        return loss * float("inf") if calls["n"] in (1, 3) else loss

    probe = GradientProbe(gpt_neox_mwsp, objective=poisoned, batch_size=4, on_nonfinite="skip")
    with pytest.warns(ReadingWarning, match=r"^8 sequence.*\b2 batch"):
        result = probe.run(texts[:12], neox_tangent, n_controls=3, progress=False)
    assert (result.n_skipped_batches, result.n_sequences, result.n_skipped_sequences) == (2, 4, 8)
    calls["n"] = 0
    with pytest.warns(ReadingWarning, match=r"^8 sequence.*\b2 batch"):
        assert set(probe.gradients(texts[:12]).sequence_ids.tolist()) == {4, 5, 6, 7}


def test_tokenizer_without_pad_token_pads_with_eos_and_is_left_unchanged(gpt_neox_model, texts):
    model, tokenizer = gpt_neox_model
    tokenizer = copy.deepcopy(tokenizer)
    mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=4)
    tokenizer.pad_token = None
    with pytest.warns(ReadingWarning, match=r"pad.token.*'<\|endoftext\|>'"):
        probe = GradientProbe(mwsp)
    assert tokenizer.pad_token is None  # the caller's tokenizer is not changed
    assert probe.gradients(texts[:3]).gradients.shape[1] == 64


def test_probe_leaves_the_model_as_it_found_it(gpt_neox_mwsp, texts):
    model = gpt_neox_mwsp._model
    flags = [parameter.requires_grad for parameter in model.parameters()]
    GradientProbe(gpt_neox_mwsp).gradients(texts[:2])
    assert [parameter.requires_grad for parameter in model.parameters()] == flags
    assert all(parameter.grad is None for parameter in model.parameters())
    assert not model.training


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_bfloat16_autocast_stays_close_to_float32(gpt_neox_mwsp, neox_tangent, texts):
    exact = GradientProbe(gpt_neox_mwsp).run(texts[:8], neox_tangent, n_controls=4, progress=False)
    fast = GradientProbe(gpt_neox_mwsp, autocast_dtype=torch.bfloat16).run(
        texts[:8], neox_tangent, n_controls=4, progress=False
    )
    assert fast.n_tokens == exact.n_tokens
    assert fast.energy_share == pytest.approx(exact.energy_share, rel=0.05)
    named = GradientProbe(gpt_neox_mwsp, autocast_dtype="bf16").run(
        texts[:8], neox_tangent, n_controls=4, progress=False
    )
    assert named.to_dict() == fast.to_dict()
    with pytest.raises(InvalidInputError, match=r"autocast.*torch\.float64"):
        GradientProbe(gpt_neox_mwsp, autocast_dtype=torch.float64)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_callers_autocast_does_not_round_the_accumulated_sums(gpt_neox_mwsp, neox_tangent, texts):
    """The probe's projections and moments run with autocast disabled, whatever context the caller set."""
    exact = GradientProbe(gpt_neox_mwsp).run(texts[:8], neox_tangent, n_controls=4, progress=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = GradientProbe(gpt_neox_mwsp).run(texts[:8], neox_tangent, n_controls=4, progress=False)
    assert inside.energy_share == pytest.approx(exact.energy_share, rel=1e-6)
    assert inside.isoscore_star == pytest.approx(exact.isoscore_star, abs=1e-6)


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_a_splitter_built_from_a_folder_is_loaded_before_the_first_read(toy_checkpoints, texts):
    """Interpreto loads such a model lazily (meta tensors until its first use); the package's reads load it."""
    mwsp = ModelWithSplitPoints(
        str(toy_checkpoints.checkpoints[-1]), automodel=toy_checkpoints.automodel, split_point=1, batch_size=4
    )
    tangent = ia.PCATangent(mwsp, nb_concepts=4).fit(texts[:6])
    result = GradientProbe(mwsp).run(texts[6:10], tangent, n_controls=2, progress=False)
    assert 0 < result.energy_share < 1 and not tangent.subspace.basis.is_meta


def _truncation_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(item.message) for item in caught if "truncated to" in str(item.message)]


def test_truncated_texts_are_counted_and_named_once_per_probe(gpt_neox_mwsp, texts):
    tokenizer = gpt_neox_mwsp.tokenizer
    lengths = [len(tokenizer(text)["input_ids"]) for text in texts[:6]]
    limit = sorted(lengths)[2]  # a text of exactly this length fits: it is not counted
    cut = sum(length > limit for length in lengths)
    probe = GradientProbe(gpt_neox_mwsp, max_length=limit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe.gradients(texts[:6])
        probe.gradients(texts[:6])
    notes = _truncation_notes(caught)
    assert 0 < cut < 6 and len(notes) == 1
    assert notes[0].startswith(
        f"{cut} text(s) were longer than max_length={limit} tokens and were truncated to {limit}"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GradientProbe(gpt_neox_mwsp).gradients(texts[:6])  # the default max_length: nothing cut
    assert not _truncation_notes(caught)
