# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The conformance matrix: 24 Hugging Face architectures against an independent plain-PyTorch reference.

The reference reads one unpadded sequence at a time with the model's own defaults (no attention mask, no position
ids), hooks the split point's output (of the family's chosen call, for ALBERT's shared layer, which runs once per
layer: its first and its last call are two families), and differentiates the model's own loss (`labels=` given to the model, so
transformers computes it) with `torch.autograd.grad`. Against it, for every family of `architectures.py`:

* per-token gradients of `GradientProbe.gradients` (padded batches of 3) match row by row (relative error < 1e-5),
  on exactly the rows of the token policy (real tokens, special tokens out, a causal sequence's last token out);
* left- and right-padded tokenised inputs give the same gradients and the same activations as the texts;
* the activation reader (`ia.token_activations`) equals the unpadded forward;
* a PCA tangent fitted from texts equals the PCA of the reference activations (largest principal angle < 0.01 deg);
* the probe's energy share equals ||G Q||^2 / ||G||^2 of the reference gradients;
* no call leaves the tokenizer's padding side changed.

Models are float64 (the reference comparisons are then limited by the probe's float32 projections only).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.linalg
import torch
from architectures import FAMILIES, VOCAB, Family, build
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer

N_TEXTS = 6
BATCH = 3
RANK = 4
GRADIENT_RTOL = 1e-5
ACTIVATION_RTOL = 1e-9
MAX_ANGLE_DEGREES = 0.01
ENERGY_RTOL = 1e-5


@pytest.fixture(scope="module")
def tokenizers(corpus_texts):
    return {
        "decoder": train_tokenizer(corpus_texts, arch="gpt_neox", vocab_size=VOCAB),
        "wrapped": train_tokenizer(corpus_texts, arch="eurobert", vocab_size=VOCAB),
    }


@pytest.fixture(scope="module")
def matrix_texts(texts):
    """Six texts of spread lengths, so that every batch of 3 is padded."""
    ordered = sorted(texts, key=len)
    return [ordered[round(index * (len(ordered) - 1) / (N_TEXTS - 1))] for index in range(N_TEXTS)]


def _unpadded_ids(tokenizer, texts):
    return [torch.tensor(tokenizer(text)["input_ids"]) for text in texts]


def _reference_sequence(model, family: Family, split_point: str, ids, *, objective, tokenizer, sequence_id, label):
    """(hidden (l, d), dL/dh (l, d)) of one unpadded sequence at the family's call, from the model's own loss."""
    store = {"h": []}
    call = {None: 0, "first": 0, "last": -1}[family.call]

    def hook(module, args, output):
        store["h"].append(output[0] if isinstance(output, tuple) else output)

    handle = model.get_submodule(split_point).register_forward_hook(hook)
    try:
        with torch.enable_grad():
            if family.kind == "decoder":
                loss = model(input_ids=ids[None], labels=ids[None]).loss * (ids.numel() - 1)
            elif family.kind == "encoder":
                batch = {"input_ids": ids[None], "attention_mask": torch.ones_like(ids)[None]}
                masked = objective.prepare(batch, sequence_ids=torch.tensor([sequence_id]), tokenizer=tokenizer)
                count = int((masked["labels"] != -100).sum())
                loss = model(input_ids=masked["input_ids"], labels=masked["labels"]).loss * count
            elif family.kind == "classifier":
                loss = model(input_ids=ids[None], labels=torch.tensor([label])).loss
            else:
                loss = family.objective(model(input_ids=ids[None]), {}).sum()
            (gradient,) = torch.autograd.grad(loss, store["h"][call])
        store["h"].clear()
        with torch.no_grad():
            model(input_ids=ids[None])  # the activations of the text itself (masked LM read a corrupted copy)
    finally:
        handle.remove()
    return store["h"][call][0].detach(), gradient[0]


class Case:
    """One family's model, wrapper, reference and what the package computes, computed once."""

    def __init__(self, family: Family, tokenizer, texts, model=None):
        self.family = family
        self.tokenizer = copy.deepcopy(tokenizer)
        self.texts = texts
        self.labels = [index % 2 for index in range(len(texts))] if family.kind == "classifier" else None
        model = build(family, self.tokenizer) if model is None else model
        self.mwsp = ModelWithSplitPoints(
            model, split_point=family.split_point, tokenizer=self.tokenizer, batch_size=BATCH
        )
        self.model = self.mwsp._model
        self.padding_side = self.tokenizer.padding_side
        self.reading = {"call": family.call}  # the reader's and the probe's option, the same for both
        self.probe = ia.GradientProbe(
            self.mwsp, objective=family.objective, batch_size=BATCH, seed=3, call=family.call
        )
        self.special = set(self.tokenizer.all_special_ids)
        self.ids = _unpadded_ids(self.tokenizer, texts)
        self.hidden, self.gradient = [], []
        for index, ids in enumerate(self.ids):
            hidden, gradient = _reference_sequence(
                self.model,
                family,
                self.mwsp.split_point,
                ids,
                objective=self.probe.objective,
                tokenizer=self.tokenizer,
                sequence_id=index,
                label=None if self.labels is None else self.labels[index],
            )
            self.hidden.append(hidden)
            self.gradient.append(gradient)

    def fit_rows(self) -> list[tuple[int, int]]:
        """(sequence, position) of the token policy's rows: real tokens, special tokens out."""
        return [
            (index, position)
            for index, ids in enumerate(self.ids)
            for position, token in enumerate(ids.tolist())
            if token not in self.special
        ]

    def probe_rows(self) -> list[tuple[int, int]]:
        """The fit rows the objective probes (a causal sequence's last token predicts nothing)."""
        if self.family.kind != "decoder":
            return self.fit_rows()
        return [(index, position) for index, position in self.fit_rows() if position < self.ids[index].numel() - 1]

    def reference_activations(self) -> torch.Tensor:
        return torch.stack([self.hidden[index][position] for index, position in self.fit_rows()])

    def reference_gradients(self) -> torch.Tensor:
        return torch.stack([self.gradient[index][position] for index, position in self.probe_rows()])

    def encoded(self, side: str) -> dict:
        encoded = self.tokenizer(self.texts, padding=True, padding_side=side, return_tensors="pt")
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


_CASES: dict[str, Case] = {}


@pytest.fixture(params=sorted(FAMILIES), ids=str)
def case(request, tokenizers, matrix_texts) -> Case:
    family = FAMILIES[request.param]
    if family.name not in _CASES:
        _CASES[family.name] = Case(family, tokenizers[family.tokenizer], matrix_texts)
    return _CASES[family.name]


def _row_errors(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    return (actual - expected).norm(dim=1) / expected.norm(dim=1).clamp(min=1e-30)


def test_gradients_equal_the_unpadded_reference_row_by_row(case):
    raw = case.probe.gradients(case.texts, labels=case.labels)
    rows = list(zip(raw.sequence_ids.tolist(), raw.positions.tolist(), strict=True))
    assert rows == case.probe_rows(), "the probed rows are not the token policy's"
    errors = _row_errors(raw.gradients, case.reference_gradients())
    assert float(errors.max()) < GRADIENT_RTOL, f"{case.family.name}: max row-relative error {float(errors.max()):.2e}"


def test_left_and_right_padding_give_the_same_gradients_and_activations(case):
    from_texts = case.probe.gradients(case.texts, labels=case.labels)
    for side in ("left", "right"):
        encoded = case.encoded(side)
        if side == "left":
            assert bool((encoded["attention_mask"][:, 0] == 0).any()), "the left-padded batch is not padded"
        raw = case.probe.gradients(encoded, labels=case.labels)
        torch.testing.assert_close(raw.gradients, from_texts.gradients, rtol=1e-9, atol=1e-12)
        rows, _ = ia.token_activations(case.mwsp, encoded, batch_size=BATCH, **case.reading)
        torch.testing.assert_close(rows, case.reference_activations(), rtol=ACTIVATION_RTOL, atol=1e-10)


def test_reader_equals_the_unpadded_forward(case):
    rows, ids = ia.token_activations(case.mwsp, case.texts, batch_size=BATCH, **case.reading)
    expected_ids = [int(case.ids[index][position]) for index, position in case.fit_rows()]
    assert ids.tolist() == expected_ids
    errors = _row_errors(rows, case.reference_activations())
    assert float(errors.max()) < ACTIVATION_RTOL, (
        f"{case.family.name}: max row-relative error {float(errors.max()):.2e}"
    )


def _reference_pca(rows: torch.Tensor, k: int) -> tuple[np.ndarray, float]:
    centred = rows.numpy() - rows.numpy().mean(0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    return vt[:k].T, float((singular[k - 1] ** 2 - singular[k] ** 2) / singular[0] ** 2)


def test_tangent_fitted_from_texts_equals_the_reference_pca(case):
    tangent = ia.PCATangent(case.mwsp, nb_concepts=RANK).fit(case.texts, batch_size=BATCH, **case.reading)
    expected, gap = _reference_pca(case.reference_activations(), RANK)
    angle = np.degrees(scipy.linalg.subspace_angles(tangent.subspace.basis.double().numpy(), expected).max())
    assert angle < MAX_ANGLE_DEGREES, f"{case.family.name}: {angle:.2e} degrees (relative eigengap {gap:.1e})"


@pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning")  # few probe texts
def test_energy_share_equals_the_reference(case):
    tangent = ia.PCATangent(case.mwsp, nb_concepts=RANK).fit(case.texts, batch_size=BATCH, **case.reading)
    result = case.probe.run(case.texts, tangent, labels=case.labels, n_controls=2, n_bootstrap=10, progress=False)
    gradients = case.reference_gradients()
    basis = tangent.subspace.basis.double()
    expected = float((gradients @ basis).square().sum() / gradients.square().sum())
    assert result.energy_share == pytest.approx(expected, rel=ENERGY_RTOL)
    assert result.n_tokens == len(case.probe_rows())


def test_no_call_changes_the_tokenizer(case):
    case.probe.gradients(case.texts[:2], labels=None if case.labels is None else case.labels[:2])
    ia.token_activations(case.mwsp, case.texts[:2], **case.reading)
    assert case.tokenizer.padding_side == case.padding_side
    assert case.mwsp.tokenizer.padding_side == case.padding_side


def test_the_docs_page_lists_every_family_of_the_matrix():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "architectures.md").read_text()
    missing = [family.model_class for family in FAMILIES.values() if f"`{family.model_class}`" not in page]
    assert not missing, f"docs/architectures.md does not list {missing}"
    architectures = len({family.model_class for family in FAMILIES.values()})  # ALBERT is two families, one class
    assert (
        f"{architectures} architectures" in (Path(__file__).resolve().parents[1] / "docs" / "concepts.md").read_text()
    )
