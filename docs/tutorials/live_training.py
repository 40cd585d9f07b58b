# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
# %% [markdown]
# # Watching anisotropy form during training
#
# A checkpoint sweep probes the gradients of saved checkpoints afterwards, paying one more forward and backward per
# checkpoint and seeing only the steps that were saved. But the training step computes the gradient dL/dh at every
# layer anyway: `ia.TrainingProbe` takes it there, during your own `loss.backward()`, and scores the tangent
# against its normal controls at every logging window, at almost no cost ([Performance](../performance.md)).
#
# You will learn to:
#
# 1. train a toy model with a Hugging Face `Trainer` and the `AnisotropyCallback`, which sends the figures to the
#    Trainer's own loggers (`report_to`) and writes one row per window;
# 2. read the live rows: an `"early"` tangent fitted on the first 30 % of the steps, the windows before it scored
#    retrospectively;
# 3. sweep the checkpoints the Trainer saved with the same tangent, and draw the live curve next to the sweep.
#
# It runs offline on the CPU in well under a minute. In a plain PyTorch loop, attach the probe yourself:
# `examples/live_training.py`.

# %% [markdown]
# ## 1. Training with the callback
#
# A 2-layer, d=64 GPT-NeoX learns causal language modelling on docstrings of the standard library, packed into
# blocks of 64 tokens. The callback attaches a `TrainingProbe` at split point 1 when training begins: the
# tangent is a streamed PCA of the training activations of the first 30 % of `max_steps` (`"early"`), k=8, with 20
# matched-rank normal controls, and a window closes at every optimizer step.

# %%
import math
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

import interpreto_anisotropy as ia
from interpreto_anisotropy.live.callback import AnisotropyCallback

torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
hf_logging.disable_progress_bar()
OUT = Path("runs/tutorials/live_training")

texts = ia.demo.load_corpus("train", max_texts=800, progress=False)
tokenizer = ia.demo.train_tokenizer(texts, arch="gpt_neox", vocab_size=512)
model = ia.demo.build_model("gpt_neox", vocab_size=len(tokenizer), hidden_size=64, num_layers=2, tokenizer=tokenizer)
stream = [token for ids in tokenizer(texts)["input_ids"] for token in [*ids, tokenizer.eos_token_id]]
blocks = [{"input_ids": stream[start : start + 64]} for start in range(0, len(stream) - 64, 64)]

args = TrainingArguments(
    output_dir=str(OUT / "trainer"),
    max_steps=100,
    per_device_train_batch_size=16,
    learning_rate=3e-3,
    warmup_steps=5,
    lr_scheduler_type="cosine",
    save_strategy="steps",
    save_steps=20,  # checkpoints at steps 20, 40, ..., 100, for the sweep below
    save_only_model=True,
    logging_steps=10,
    report_to=[],  # or ["tensorboard"], ["wandb"], ["mlflow"]: each window's figures go there too
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
callback = AnisotropyCallback(split_points=1, results_dir=OUT / "live", nb_concepts=8, n_controls=20, overwrite=True)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=blocks,
    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    processing_class=tokenizer,
    callbacks=[callback],
)
start = time.perf_counter()
trainer.train()
print(f"trained 100 steps with the live probe in {time.perf_counter() - start:.1f} s")

# %% [markdown]
# Only the Trainer's own logs were printed (its loss every 10 steps). Each window's figures, keyed
# `anisotropy/<split point>/<field>`, went to the integrations `report_to` names (none here) at the window's own
# step, and to the Trainer's history, one entry per window: the 100 windows, the 30 scored retrospectively
# included (their entries were added when the tangent was fitted, each with its own step).

# %%
logged = [entry for entry in trainer.state.log_history if "anisotropy/1/energy_share" in entry]
print(len(logged), "windows logged, at steps", sorted(entry["step"] for entry in logged)[:3], "...; the last:")
print({key: round(value, 4) for key, value in logged[-1].items() if key.startswith("anisotropy/")})

# %% [markdown]
# ## 2. The live rows
#
# The rows are in `results_dir` in the schema of a checkpoint sweep (`source` "live"), so `ia.SweepResult` reads
# them, plots them and writes their report as it does for a sweep. A window's `step` is the optimizer step of the
# weights its gradients were taken with: the window of step 20 used the weights that `checkpoint-20` holds. The
# windows of the first 30 steps closed before the tangent existed: they kept their gradient moments G^T G and
# their gradient rows, and were scored once it was fitted (`retrospective`), bootstrap interval included, exactly
# as they would have been with that tangent from the start.

# %%
live = ia.SweepResult.load(OUT / "live")
print(live)
print(f"{'step':>5} {'retro':>6} {'E_T':>7} {'E_N':>7} {'ratio':>7} {'p':>6} {'dIso*_T':>8}")
for row in live.rows[::10]:
    print(
        f"{row['step']:>5} {row['retrospective']!s:>6} {row['energy_share']:7.3f} {row['control_mean']:7.3f} "
        f"{row['energy_ratio']:7.2f} {row['p_value']:6.3f} {row['delta_isoscore_star']:+8.3f}"
    )

# %% [markdown]
# ## 3. The live curve next to the post-hoc sweep
#
# The live tangent was saved where a sweep keeps its reference (`live/reference/1.safetensors`). Sweeping the
# checkpoints the Trainer saved with that same tangent as a given reference puts both on one footing: same
# tangent, controls drawn the same way (from a seed per row). The sweep probes held-out texts with each checkpoint's weights; the live probe
# probed the training batches of each step with the weights of that step, so the two curves tell the same story
# without being equal (on the same batches and weights they are equal to 1e-6: the tests check it).

# %%
tangent = ia.Subspace.load(OUT / "live" / "reference" / "1.safetensors")
fit_texts = [text for text in ia.demo.load_corpus("fit", progress=False) if len(text) <= 400][:24]
probe_texts = [text for text in ia.demo.load_corpus("probe", progress=False) if len(text) <= 400][:24]
sweep = ia.CheckpointSweep(
    ia.checkpoints.local(OUT / "trainer" / "checkpoint-*"),
    split_point=1,
    texts=fit_texts,
    probe_texts=probe_texts,
    objective="causal_lm",
    nb_concepts=8,
    reference=tangent,
    n_controls=20,
    results_dir=OUT / "sweep",
    device="cpu",
    overwrite=True,
    progress=False,
)
swept = sweep.run()
print(swept.summary_table())

# %%
figure, ax = plt.subplots(figsize=(7, 3.6))
steps = live.steps
ax.plot(steps, live.column("energy_share"), color="C0", label="live: tangent E_T (training batches)")
low = [min(row["control_energy_shares"]) for row in live.rows]
high = [max(row["control_energy_shares"]) for row in live.rows]
ax.fill_between(steps, low, high, color="C0", alpha=0.2, label="live: 20 normal controls (min-max)")
errors = [
    [row["energy_share"] - (row["ci_low"] or row["energy_share"]) for row in swept.rows],
    [(row["ci_high"] or row["energy_share"]) - row["energy_share"] for row in swept.rows],
]
ax.errorbar(
    swept.steps,
    swept.column("energy_share"),
    yerr=errors,
    fmt="o",
    color="C3",
    capsize=3,
    label="post-hoc sweep of the checkpoints (held-out texts)",
)
ax.axvline(math.ceil(0.3 * 100), color="grey", linestyle=":", label="tangent fitted (30 % of the steps)")
ax.axhline(8 / 64, color="grey", linestyle="--", linewidth=0.8, label="chance k/d")
ax.set_xlabel("optimizer step")
ax.set_ylabel("gradient energy share")
ax.legend(fontsize=7, loc="center right")
figure.tight_layout()
(OUT / "figures").mkdir(parents=True, exist_ok=True)
figure.savefig(OUT / "figures" / "live_vs_sweep.png", dpi=110)

# %% [markdown]
# The figure of this run: the tangent's share of the training gradient's energy at every step (blue), far above
# its 20 controls from the first steps on, and the sweep of the saved checkpoints (red) on held-out texts.
#
# ![Live energy share at every step next to the post-hoc sweep of the saved checkpoints](../images/tutorials/live_vs_sweep.png)
#
# `ia.write_report(live, folder)` writes the usual HTML report of the live rows, and the callback wrote one at
# the end of training in `live/report/`; `ia.write_report(swept, folder, live=live)` writes the sweep's report
# with the live curve drawn next to it (as `make demo` does; on the command line, `interpreto-anisotropy report SWEEP_DIR --live LIVE_DIR`).
# To probe every step in a long run, raise `every` (a window every 10 steps costs
# about 0.6 % of a step of a d=256 model) and keep the same figures.

# %%
print("report:", OUT / "live" / "report" / "index.html", (OUT / "live" / "report" / "index.html").exists())
