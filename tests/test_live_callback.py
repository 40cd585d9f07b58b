# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`AnisotropyCallback` in a real `transformers.Trainer` run (CPU, gradient accumulation): figures in the Trainer's
log history, one row per window on disk, the report written at the end.

Recomputed another way: the logged energy share of each window is the row's `energy_share` on disk, and the window
count is the number of optimizer steps the Trainer reports.
"""

from __future__ import annotations

import copy
import types

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import build_model
from interpreto_anisotropy.live.callback import AnisotropyCallback


@pytest.mark.parametrize("bound", [True, False])
def test_trainer_callback_logs_writes_and_reports(gpt_neox_training_model, texts, tmp_path, bound):
    # the session's model may have been wrapped by Interpreto's ModelWithSplitPoints, which freezes its parameters
    model, tokenizer = (
        copy.deepcopy(gpt_neox_training_model[0]).train().requires_grad_(True),
        gpt_neox_training_model[1],
    )
    data = [tokenizer(text, truncation=True, max_length=32) for text in texts[:16]]
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=4,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    options = {"results_dir": tmp_path / "live", "tangent": ia.Subspace.random(64, 4, seed=0), "n_controls": 5}
    if bound:
        trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator)
        callback = AnisotropyCallback.add_to(trainer, 1, **options)
    else:
        callback = AnisotropyCallback(1, **options)
        trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[callback])
    trainer.train()
    table = ia.SweepResult.load(tmp_path / "live")
    assert table.steps == [0, 1, 2, 3] and all(row["window_micro_batches"] == 2 for row in table.rows)
    logged = [
        entry["anisotropy/1/energy_share"]
        for entry in trainer.state.log_history
        if "anisotropy/1/energy_share" in entry
    ]
    assert logged == pytest.approx(table.column("energy_share"), rel=1e-12)
    assert (tmp_path / "live" / "report" / "index.html").exists()
    assert callback.probe.reduction.value == "sum"  # GPT-NeoX takes num_items_in_batch: one factor per step
    assert not callback.probe.attached and torch.is_grad_enabled()


class _StopAt(TrainerCallback):
    """Stop the training after `step` optimizer steps (a run that dies after its checkpoint)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step >= self.step


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_a_trainer_resumed_from_its_checkpoint_writes_the_rows_of_the_run_never_stopped(
    gpt_neox_training_model, texts, tmp_path, arch
):
    tokenizer = gpt_neox_training_model[1]
    built = build_model(arch, vocab_size=len(tokenizer), hidden_size=64, num_layers=2, num_heads=4, seed=0)
    data = [tokenizer(text, truncation=True, max_length=32) for text in texts[:24]]

    def train(name, *, stop_at=None, resume=None):
        model = copy.deepcopy(built)
        if resume and arch == "gpt_neox":
            # The Trainer of transformers 5 does not load a GPT-NeoX checkpoint's head back (saved as embed_out,
            # the module's is lm_head): the model is loaded from the checkpoint, as docs/how-to/live-probe.md says.
            model = AutoModelForCausalLM.from_pretrained(resume)
        model = model.train().requires_grad_(True)
        args = TrainingArguments(
            output_dir=str(tmp_path / name),
            max_steps=6,
            per_device_train_batch_size=4,
            learning_rate=1e-3,
            save_strategy="steps",
            save_steps=3,
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        callback = AnisotropyCallback(
            1, results_dir=tmp_path / name / "live", early_steps=2, nb_concepts=4, n_controls=5, report_dir=False
        )
        callbacks = [callback] + ([_StopAt(stop_at)] if stop_at else [])
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
        Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=callbacks).train(
            resume_from_checkpoint=resume
        )
        return ia.SweepResult.load(tmp_path / name / "live").rows

    expected = train("whole")
    stopped = train("stopped", stop_at=4)
    assert [row["step"] for row in stopped] == [0, 1, 2, 3]
    resumed = train("stopped", resume=str(tmp_path / "stopped" / "checkpoint-3"))
    assert [row["step"] for row in resumed] == [row["step"] for row in expected] == list(range(6))
    for row, reference in zip(resumed, expected, strict=True):
        assert row["energy_share"] == pytest.approx(reference["energy_share"], rel=1e-6), row["step"]
        assert row["control_mean"] == pytest.approx(reference["control_mean"], rel=1e-6), row["step"]


def test_a_config_keeps_its_reduction_and_gets_the_trainers_length(gpt_neox_training_model, tmp_path):
    model, tokenizer = gpt_neox_training_model
    state = types.SimpleNamespace(global_step=0, max_steps=8)
    settings = {}
    for name, options in {
        "config": {"config": ia.LiveConfig(reduction="mean", n_controls=5, call="first")},
        "keywords": {"n_controls": 5, "call": "first"},
    }.items():
        callback = AnisotropyCallback(1, results_dir=tmp_path / name, **options)
        callback.on_train_begin(None, state, None, model=model, processing_class=tokenizer)
        settings[name] = callback.probe.settings
        callback.probe.detach()
    assert (settings["config"].reduction, settings["config"].total_steps) == ("mean", 8)  # the config's, kept
    assert (settings["keywords"].reduction, settings["keywords"].total_steps) == ("sum", 8)  # from the model's loss
    assert settings["config"].call == settings["keywords"].call == "first"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"results_dir": 3}, "results_dir.*int"),
        ({"results_dir": None}, "results_dir.*NoneType"),
        ({"report_dir": 5}, r"report_dir.*\b5\b"),
        ({"colour": "red"}, "AnisotropyCallback.*colour"),
    ],
)
def test_callback_paths_and_option_names_are_checked_when_it_is_made(tmp_path, options, named):
    from interpreto_anisotropy.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=named):
        AnisotropyCallback(1, **{"results_dir": tmp_path, **options})
    assert AnisotropyCallback(1, results_dir=tmp_path, tokenizer=None, n_controls=3).probe_options["n_controls"] == 3


@pytest.mark.parametrize(
    ("split_points", "options", "named"),
    [
        (1.5, {}, r"split.points?.*1\.5"),
        ([1, None], {}, r"split.points?.*None"),
        ([], {}, "split_points"),
        (1, {"tangent": "weird"}, "tangent.*'weird'"),
        (1, {"tangent": {1: "pca"}}, r"tangent.*\bstr\b"),
        (1, {"n_controls": 0}, r"n_controls.*\b0\b"),
    ],
)
def test_callback_split_points_tangent_and_settings_are_checked_before_training(
    tmp_path, split_points, options, named
):
    from interpreto_anisotropy.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=named):
        AnisotropyCallback(split_points, results_dir=tmp_path, **options)
    given = ia.Subspace.random(32, 2, seed=0)
    assert AnisotropyCallback([1, "gpt_neox.layers.0"], results_dir=tmp_path, tangent={1: given}).split_points
