# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
# %% [markdown]
# # A checkpoint sweep
#
# The paper's protocol runs over a model's training checkpoints: fit one **reference tangent** on activations
# pooled over the early checkpoints, then, at every checkpoint, probe the true training-loss gradients against
# it and against matched-rank normal controls. `ia.CheckpointSweep` does all of it, writes one row per checkpoint
# as each finishes, and resumes where it stopped.
#
# You will learn to:
#
# 1. train a toy model that saves Pythia-like checkpoints, and list them with `ia.checkpoints.local`;
# 2. run a `CheckpointSweep` with the early reference tangent and a tangent refitted at each checkpoint;
# 3. read the `SweepResult`: the energy and anisotropy shares over training;
# 4. draw the figures (`ia.plotting.plot_sweep(table)`) and write the HTML report (`ia.write_report(table, ...)`);
# 5. resume a sweep.
#
# It runs offline on the CPU in well under a minute. For real Pythia checkpoints, see the
# [how-to](../how-to/pythia.md): only the list of checkpoints changes.

# %% [markdown]
# ## 1. A toy training run with checkpoints
#
# `ia.demo.train_toy` trains a 2-layer, d=64 GPT-NeoX on docstrings of the standard library and saves
# `checkpoint-{step}` folders at the steps we ask for; checkpoint 0 is the initialisation.

# %%
import time
from pathlib import Path

import torch

import interpreto_anisotropy as ia

torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
OUT = Path("runs/tutorials/checkpoint_sweep")

run = ia.demo.train_toy(
    OUT / "toy", steps=100, checkpoint_steps=[0, 4, 16, 40, 100], max_train_texts=800, overwrite=True, progress=False
)
print(f"loss {run.losses[0]:.2f} -> {run.losses[-1]:.2f}")

checkpoints = ia.checkpoints.local(OUT / "toy" / "checkpoint-*")
for checkpoint in checkpoints:
    print(checkpoint.name, "->", Path(checkpoint.source).name)

# %% [markdown]
# `ia.checkpoints.local` reads each folder's step from its name and sorts by step. For hub revisions the list
# comes from `ia.checkpoints.pythia("160m", [0, 1000, 143000])`, `ia.checkpoints.smollm2(...)`,
# `ia.checkpoints.suite(preset, ...)` for any of the ten models the paper swept (see the model suites page) or
# `ia.checkpoints.hub(model_id, revisions)` instead.

# %% [markdown]
# ## 2. The sweep
#
# Texts are split in two roles: **fit texts**, whose activations fit the tangents, and held-out **probe texts**,
# whose training-loss gradients are probed. `reference="both"` reports two tangents side by side at each
# checkpoint: `"early"`, fitted once on the checkpoints of the first 30 % of training (steps 0, 4 and 16 here)
# and reused, as in the paper; and `"each"`, refitted on the checkpoint itself.

# %%
fit_texts = [text for text in ia.demo.load_corpus("fit", progress=False) if len(text) <= 400][:40]
probe_texts = [text for text in ia.demo.load_corpus("probe", progress=False) if len(text) <= 400][:24]

sweep = ia.CheckpointSweep(
    checkpoints,
    split_point=1,  # the output of the second transformer block
    texts=fit_texts,
    probe_texts=probe_texts,
    objective="causal_lm",
    method="pca",
    nb_concepts=8,  # k; chance is k/d = 8/64
    reference="both",
    n_controls=20,
    results_dir=OUT / "sweep",
    device="cpu",
    overwrite=True,
    progress=False,
)
start = time.perf_counter()
table = sweep.run()
print(f"sweep: {time.perf_counter() - start:.1f} s, {table}")
print(table.summary_table())

# %% [markdown]
# ## 3. Reading the result
#
# A `SweepResult` is a list of rows, one per (checkpoint, split point, tangent), each holding every `ProbeResult`
# field by name plus the activations' isotropy and the tangent's drift ([every column](../columns.md)).
# `select` keeps the rows whose columns hold the values given (`table.select(tangent="early", step=[0, 20])`,
# any column); `column` reads one field; `to_frame()` is the pandas DataFrame of the rows.

# %%
early = table.select(tangent="early")
print(f"{'step':>5} {'E_T':>7} {'E_N':>7} {'ratio':>7} {'capture':>8} {'dIso*_T':>8} {'IsoScore(h)':>12}")
for row in early.rows:
    print(
        f"{row['step']:>5} {row['energy_share']:7.3f} {row['control_mean']:7.3f} {row['energy_ratio']:7.2f} "
        f"{row['anisotropy_capture']:8.3f} {row['delta_isoscore_star']:+8.3f} {row['activation_isoscore']:12.3f}"
    )

# %% [markdown]
# - **E_T** is the tangent's share of the gradient energy, **E_N** the mean share of its 20 normal controls
#   (about (1 - E_T) k / (d - k)), and **ratio** is E_T / E_N.
# - **capture** is (E_T - k/d) / (oracle - k/d): the share of the best achievable excess over chance.
# - **dIso\*_T** is ΔIsoScore\*: how much more isotropic the gradients become once the tangent is removed.
# - **IsoScore(h)** is the isotropy of the activations themselves.
#
# [Concepts](../concepts.md) defines each of them. `table.to_csv(path)` writes the scalar columns, `table.to_frame()`
# gives them all to pandas; the files of the sweep are in `results_dir`: `config.json`, `rows.jsonl` (one JSON
# object a row), the reference subspace and each checkpoint's own tangent.

# %%
print(sorted(path.name for path in (OUT / "sweep").iterdir()))
reference = ia.Subspace.load(OUT / "sweep" / "reference" / "1.safetensors")
print("reference tangent:", reference.rank, "directions, fitted on steps", reference.info.get("early_steps"))

# %% [markdown]
# ## 4. Figures and report
#
# `ia.plotting.plot_sweep(table)` returns one matplotlib figure per topic; nothing is shown, so save them where
# you like. The x axis is the training step on a symmetric-log scale, since checkpoints are log-spaced and step 0 must show.

# %%
figures = ia.plotting.plot_sweep(table)
(OUT / "figures").mkdir(parents=True, exist_ok=True)
for name, figure in figures.items():
    figure.savefig(OUT / "figures" / f"{name}.png", dpi=90)
print(sorted(figures))

# %% [markdown]
# The energy figure of this run (`figures["energy"]`): each tangent's share E_T with its bootstrap interval,
# against the min-max band and mean of its controls, the analytic null and chance k/d. The early tangent beats
# all 20 of its controls at every checkpoint, by a factor that grows during training (about 2 at initialisation,
# more than 10 at the end); the tangent refitted at each checkpoint holds less, late in training.
#
# ![Gradient energy of the tangents vs normal controls over training](../images/tutorials/sweep_energy.png)
#
# ΔIsoScore\* of the tangents and of their controls over the same checkpoints:
#
# ![Delta IsoScore* over training](../images/tutorials/sweep_delta_isoscore.png)
#
# `ia.write_report(table, folder)` writes all the figures, the table of rows and the settings into one
# self-contained HTML page (no external files); [Reading the report](../how-to/reading-the-report.md) walks through it.

# %%
report = ia.write_report(table, OUT / "report", title="Toy GPT-NeoX, 100 steps, layer 1")
print("report:", report)

# %% [markdown]
# ## 5. Resuming
#
# Each finished checkpoint's rows are written atomically to `rows.jsonl`. Running the same sweep again (same
# settings and texts) finds every checkpoint done and returns at once; after a crash it resumes at the first
# unfinished checkpoint. Changing a setting with the same `results_dir` raises an `InvalidInputError` unless
# `overwrite=True`.

# %%
start = time.perf_counter()
again = ia.CheckpointSweep(
    checkpoints,
    split_point=1,
    texts=fit_texts,
    probe_texts=probe_texts,
    objective="causal_lm",
    method="pca",
    nb_concepts=8,
    reference="both",
    n_controls=20,
    results_dir=OUT / "sweep",
    device="cpu",
    progress=False,
).run()
print(f"resumed: {len(again)} rows in {time.perf_counter() - start:.2f} s")

# %% [markdown]
# The same sweep from the shell is `interpreto-anisotropy sweep --model runs/tutorials/checkpoint_sweep/toy
# --split-point 1 --texts texts.txt --out DIR`, and `interpreto-anisotropy report DIR` rebuilds the report.
#
# Next: [tangent concepts and Interpreto attributions](attributions.md).
