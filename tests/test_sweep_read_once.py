# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep reads each checkpoint's fit texts once, tokenises its texts once per tokenizer, and frees a checkpoint
without a garbage collection; none of it changes a number."""

from __future__ import annotations

import gc
import shutil
import weakref

import pytest
import torch
from test_sweep import SETTINGS

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import train_tokenizer
from interpreto_anisotropy.errors import NonFiniteError
from interpreto_anisotropy.reading.batching import TokenBatcher, TokenCache, tokenizer_key
from interpreto_anisotropy.results.change import CHANGE_FIELDS
from interpreto_anisotropy.results.store import SweepStore
from interpreto_anisotropy.sweeps import checkpoints as checkpoint_tools
from interpreto_anisotropy.sweeps.runner import CheckpointSweep, FitReader


def _without_timings(rows):
    return {
        (row["step"], row["tangent"]): {key: value for key, value in row.items() if key != "wall_seconds"}
        for row in rows
    }


def _counting_reads(monkeypatch) -> list[str]:
    """The checkpoint folder of every fit-text read the sweep starts, in order."""
    reads: list[str] = []
    original = CheckpointSweep._activation_batches

    def counted(self, splitter, **kwargs):
        reads.append(splitter.tokenizer.name_or_path)
        return original(self, splitter, **kwargs)

    monkeypatch.setattr(CheckpointSweep, "_activation_batches", counted)
    return reads


def test_early_rows_take_the_reference_read_and_equal_rows_read_again(
    toy_checkpoints, sweep_texts, tmp_path, monkeypatch
):
    reads = _counting_reads(monkeypatch)
    sweep = CheckpointSweep(
        str(toy_checkpoints.out_dir / "checkpoint-*"),
        reference="both",
        results_dir=tmp_path / "sweep",
        **sweep_texts,
        **SETTINGS,
    )
    first = _without_timings(sweep.run().rows)
    early = [checkpoint.step for checkpoint in sweep.plan.early]
    assert early == [0, 1, 2, 4]
    # one read per checkpoint: the early ones' in the reference pass, feeding both the reference and their rows
    assert sorted(reads) == sorted(str(path) for path in toy_checkpoints.checkpoints)

    # Resumed with the reference on disk, the early checkpoints' rows come from reads of their own, in the main loop.
    SweepStore(tmp_path / "sweep").drop_steps(set(early))
    reads.clear()
    again = _without_timings(
        CheckpointSweep(
            str(toy_checkpoints.out_dir / "checkpoint-*"),
            reference="both",
            results_dir=tmp_path / "sweep",
            **sweep_texts,
            **SETTINGS,
        )
        .run()
        .rows
    )
    assert len(reads) == len(early)
    assert again == first


class _BrokenTangent:
    """A tangent whose second batch is non-finite."""

    def __init__(self):
        self.batches = 0

    def partial_fit(self, rows):
        self.batches += 1
        if self.batches == 2:
            raise NonFiniteError("non-finite activations")


def test_a_kept_read_hands_on_its_error_instead_of_raising_it():
    reader = FitReader(_BrokenTangent(), streamed=True, max_sample=10)
    rows, ids, where = torch.ones(3, 4), torch.arange(3), torch.zeros(3, 2, dtype=torch.long)
    for _ in range(3):
        reader.add_or_defer(rows, ids, where)  # the reference pass goes on reading
    assert reader.tangent.batches == 2  # nothing fed after the error
    kept = reader.kept()
    assert isinstance(kept, NonFiniteError) and "non-finite" in str(kept)
    direct = FitReader(_BrokenTangent(), streamed=True, max_sample=10)  # a read in the main loop raises at once
    direct.add(rows, ids, where)
    with pytest.raises(NonFiniteError):
        direct.add(rows, ids, where)


def test_loaded_frees_the_weights_without_a_garbage_collection(toy_checkpoints, monkeypatch):
    checkpoint = ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[0]

    def refused():
        raise AssertionError("gc.collect() was called")

    monkeypatch.setattr(gc, "collect", refused)
    gc.disable()
    try:
        with checkpoint_tools.loaded(checkpoint, device="cpu") as (model, _):
            weights = [weakref.ref(parameter) for parameter in model.parameters()]
        assert weights and all(weight() is None for weight in weights)  # freed by reference counting, at once
        assert next(model.parameters()).device.type == "meta"
    finally:
        gc.enable()


# ---------------------------------------------------------------------------------------------------- token ids
@pytest.fixture(scope="module")
def other_tokenizer(corpus_texts):
    """A tokenizer of the same size as the toy run's, trained on other texts: other ids for the same texts."""
    return train_tokenizer(corpus_texts[::-1][:120], arch="gpt_neox", vocab_size=384)


def _batches(tokenizer, texts, cache=None):
    batcher = TokenBatcher(tokenizer, batch_size=4, max_length=64, token_cache=cache)
    return [batch for batch, _ in batcher.batches(texts)[1]], batcher.truncated_sequences


def test_the_cache_gives_each_tokenizer_its_own_ids(toy_checkpoints, other_tokenizer, texts, monkeypatch):
    _, tokenizer = checkpoint_tools.load_checkpoint(ia.checkpoints.local(str(toy_checkpoints.checkpoints[0]))[0])
    cache = TokenCache()
    first, truncated = _batches(tokenizer, texts, cache)
    expected, expected_truncated = _batches(tokenizer, texts)
    assert truncated == expected_truncated > 0  # max_length 64 cuts some texts, counted from the cache too
    assert all(torch.equal(a[k], b[k]) for a, b in zip(first, expected, strict=True) for k in a)

    def tokenised_again(self, chunk):
        raise AssertionError("tokenised again")

    monkeypatch.setattr(TokenBatcher, "_tokenise", tokenised_again)
    reloaded = checkpoint_tools.load_checkpoint(ia.checkpoints.local(str(toy_checkpoints.checkpoints[-1]))[0])[1]
    assert tokenizer_key(reloaded) == tokenizer_key(tokenizer)  # another checkpoint's copy of the same tokenizer
    again, _ = _batches(reloaded, texts, cache)
    assert all(torch.equal(a[k], b[k]) for a, b in zip(again, expected, strict=True) for k in a)
    monkeypatch.undo()

    assert tokenizer_key(other_tokenizer) != tokenizer_key(tokenizer)
    other, _ = _batches(other_tokenizer, texts, cache)
    own, _ = _batches(other_tokenizer, texts)
    assert all(torch.equal(a[k], b[k]) for a, b in zip(other, own, strict=True) for k in a)
    assert any(not torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(other, expected, strict=True))


@pytest.mark.filterwarnings("ignore:n_random=5")
def test_a_sweep_over_checkpoints_with_different_tokenizers_reads_each_with_its_own(
    toy_checkpoints, other_tokenizer, sweep_texts, tmp_path
):
    """Steps 8 and 20 with the run's tokenizer, step 30 (step 8's weights) with another of the same size: step 30's
    rows are those of a sweep over it alone."""
    folder = tmp_path / "checkpoint-30"
    shutil.copytree(toy_checkpoints.out_dir / "checkpoint-8", folder)
    for path in folder.glob("tokenizer*"):
        path.unlink()
    other_tokenizer.save_pretrained(folder)
    settings = {**SETTINGS, **sweep_texts, "reference": "each", "n_random": 5}  # R' of one family
    mixed = [
        *ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*"))[-2:],
        *ia.checkpoints.local(str(folder)),
    ]
    assert [checkpoint.step for checkpoint in mixed] == [8, 20, 30]
    together = CheckpointSweep(mixed, results_dir=tmp_path / "together", **settings).run().rows
    alone = CheckpointSweep(mixed[-1:], results_dir=tmp_path / "alone", **settings).run().rows
    # the drift and the change from the first checkpoint compare step 30 with the steps before it
    drift = ("drift_previous_mean_angle", "drift_previous_max_angle", "drift_previous_step", *CHANGE_FIELDS)
    row, expected = (
        {key: value for key, value in rows[-1].items() if key not in ("wall_seconds", *drift)}
        for rows in (together, alone)
    )
    assert row["step"] == 30 and row == expected
    same_weights = next(r for r in together if r["step"] == 8)
    assert same_weights["freq_distance_pearson"] != row["freq_distance_pearson"]  # the ids did differ
