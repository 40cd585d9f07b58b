# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`AnisotropyCallback` and the Trainer's own loggers: in `Trainer(callbacks=[...])` as with `add_to`, every
window's figures reach what `report_to` names (TensorBoard, W&B offline, MLflow with a file store) at the window's
step, read back from what each logger wrote; nothing more is printed, and the Trainer's own logs are unchanged.

Recomputed another way: the values each logger holds are the rows on disk (`rows.jsonl`), one per window and split
point, at the rows' steps; the Trainer's loss is logged at its own logging steps only.

A run of 6 optimizer steps, `logging_steps=4` (one Trainer log, at step 4, and the summary at the end), a window per
step, an "early" tangent fitted after 2 steps (windows 0 and 1 scored retrospectively), at split points 0 and 1.
"""

from __future__ import annotations

import copy

import pytest
from helpers.logger_files import tensorboard_scalars, wandb_history
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

import interpreto_anisotropy as ia
from interpreto_anisotropy.live.callback import AnisotropyCallback
from interpreto_anisotropy.live.rows import LOGGED_FIELDS

STEPS, LOGGING_STEPS = 6, 4


class _Recorder(TrainerCallback):
    """A user's callback: the logs its `on_log` receives (the Trainer's own, not the probe's)."""

    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs))


def _train(pair, texts, tmp_path, report_to, *, bound=False, recorder=None):
    model, tokenizer = copy.deepcopy(pair[0]).train().requires_grad_(True), pair[1]
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=STEPS,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        logging_steps=LOGGING_STEPS,
        save_strategy="no",
        report_to=report_to,
        use_cpu=True,
        disable_tqdm=True,  # the PrinterCallback, not a progress bar: what it prints is checked
        seed=0,
    )
    options = {"results_dir": tmp_path / "live", "early_steps": 2, "nb_concepts": 4, "n_controls": 5}
    kit = {
        "model": model,
        "args": args,
        "train_dataset": [tokenizer(text, truncation=True, max_length=32) for text in texts[:16]],
        "data_collator": DataCollatorForLanguageModeling(tokenizer, mlm=False),
    }
    extra = [recorder] if recorder is not None else []
    if bound:
        trainer = Trainer(**kit, callbacks=extra)
        AnisotropyCallback.add_to(trainer, [0, 1], report_dir=False, **options)
    else:
        trainer = Trainer(**kit, callbacks=[AnisotropyCallback([0, 1], report_dir=False, **options), *extra])
    trainer.train()
    return trainer, ia.SweepResult.load(tmp_path / "live")


def _expected(table, prefix):
    """{logged key: [(step, value) per window]} from the rows on disk."""
    expected = {}
    for row in table.rows:
        for name in LOGGED_FIELDS:
            expected.setdefault(f"{prefix}anisotropy/{row['layer']}/{name}", []).append((row["step"], row[name]))
    return expected


def _assert_logged(logged, expected, *, rel):
    assert set(expected) <= set(logged), sorted(set(expected) - set(logged))
    for key, values in expected.items():
        assert [step for step, _ in logged[key]] == [step for step, _ in values], key  # one per window, its step
        assert [value for _, value in logged[key]] == pytest.approx([value for _, value in values], rel=rel), key


@pytest.mark.parametrize("bound", [False, True], ids=["callbacks", "add_to"])
def test_every_window_reaches_tensorboard_at_its_step(
    gpt_neox_training_model, texts, tmp_path, monkeypatch, capsys, bound
):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tensorboard"))  # transformers 4: output_dir/runs
    recorder = _Recorder()
    trainer, table = _train(gpt_neox_training_model, texts, tmp_path, ["tensorboard"], bound=bound, recorder=recorder)
    assert table.steps == [step for step in range(STEPS) for _ in (0, 1)]  # a row per window and split point
    assert sum(row["retrospective"] for row in table.rows) == 2 * 2
    scalars = tensorboard_scalars(tmp_path)
    _assert_logged(scalars, _expected(table, "train/"), rel=1e-6)  # TensorBoard keeps float32
    for layer in (0, 1):  # the finding's numbers, for every window: the exact p, the anisotropy share and its exact p
        for name in ("p_value_exact", "anisotropy_share", "anisotropy_p_value_exact"):
            logged = scalars[f"train/anisotropy/{layer}/{name}"]
            assert [step for step, _ in logged] == list(range(STEPS)), name
            assert [value for _, value in logged] == pytest.approx(table.select(layer=layer).column(name), rel=1e-6)
    assert [step for step, _ in scalars["train/loss"]] == [LOGGING_STEPS]  # the Trainer's own log, kept
    # Nothing printed, nor given to the other callbacks, but the Trainer's own logs (PrinterCallback: one line each)
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(printed) == len(recorder.logs) == 2 and not any("anisotropy" in line for line in printed)
    assert not any(key.startswith("anisotropy/") for logs in recorder.logs for key in logs)
    # The history: the Trainer's entries as they were, and one entry per window at its step
    own = [entry for entry in trainer.state.log_history if not any(key.startswith("anisotropy/") for key in entry)]
    assert [entry["step"] for entry in own] == [LOGGING_STEPS, STEPS] and "loss" in own[0]
    windows = [entry for entry in trainer.state.log_history if entry not in own]
    assert [entry["step"] for entry in windows] == list(range(STEPS))
    history = {key: [(entry["step"], entry[key]) for entry in windows] for key in windows[0] if key != "step"}
    _assert_logged(history, _expected(table, ""), rel=1e-12)


def test_every_window_reaches_wandb_offline_at_its_step(gpt_neox_training_model, texts, tmp_path, monkeypatch):
    import wandb  # in the test extra, as tensorboard and mlflow-skinny

    for name, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_PROJECT": "live"}.items():
        monkeypatch.setenv(name, value)
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    try:
        _, table = _train(gpt_neox_training_model, texts, tmp_path, ["wandb"])
    finally:
        wandb.finish()  # the Trainer's WandbCallback leaves the run open
        wandb.teardown()  # and W&B's service process writes the run's file until it stops
    (run_dir,) = (tmp_path / "wandb-home" / "wandb").glob("offline-run-*")
    history = wandb_history(run_dir)
    _assert_logged(history, _expected(table, "train/"), rel=1e-12)
    assert [step for step, _ in history["train/loss"]] == [LOGGING_STEPS]


def test_every_window_reaches_mlflow_at_its_step(gpt_neox_training_model, texts, tmp_path, monkeypatch):
    import mlflow

    store = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it to use a local file store
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "live")
    # The Trainer logs to MLflow asynchronously, on 10 threads by default; the file store makes a new metric's folder
    # (anisotropy/0/) by "create if missing", and a thread that loses that race drops its batch: a window's values.
    monkeypatch.setenv("MLFLOW_ASYNC_LOGGING_THREADPOOL_SIZE", "1")
    try:
        _, table = _train(gpt_neox_training_model, texts, tmp_path, ["mlflow"])
    finally:
        mlflow.flush_async_logging()  # the Trainer's MLflowCallback logs asynchronously (MLflow >= 2.8)
        mlflow.end_run()
    client = mlflow.MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("live").experiment_id])
    expected = _expected(table, "")
    logged = {  # in step order: logged asynchronously, the lines of a metric may be written out of order
        key: sorted((metric.step, metric.value) for metric in client.get_metric_history(run.info.run_id, key))
        for key in [*expected, "loss"]
    }
    _assert_logged(logged, expected, rel=1e-12)
    assert [step for step, _ in logged["loss"]] == [LOGGING_STEPS]
