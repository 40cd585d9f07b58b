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

import pytest
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

import interpreto_anisotropy as ia
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
