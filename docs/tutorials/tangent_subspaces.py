# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
# %% [markdown]
# # Tangent subspaces of one model
#
# A *tangent subspace* is a low-rank linear proxy of the activation manifold at one layer. This tutorial fits
# four of them on the same activations of a tiny language model, with four of Interpreto's concept methods
# (PCA, SemiNMF, ICA and a TopK sparse autoencoder), compares them with principal angles, reads what their
# directions encode with Interpreto's `TopKInputs`, and finally asks how much of the model's training-loss
# gradient each of them holds.
#
# You will learn to:
#
# 1. wrap a model in Interpreto's `ModelWithSplitPoints` and read its token activations;
# 2. fit tangent explainers (`ia.PCATangent`, `ia.SemiNMFTangent`, `ia.ICATangent`, `ia.TopKSAETangent`) and get
#    their orthonormal bases as `ia.Subspace` objects;
# 3. compare subspaces with `Subspace.principal_angles` and `Subspace.overlap`;
# 4. interpret tangent directions with `TopKInputs`, since a tangent explainer *is* an Interpreto concept explainer;
# 5. probe the true causal-LM gradients against all the tangents at once with `ia.GradientProbe`.
#
# Everything runs offline on the CPU in well under a minute: the model is a 2-layer, d=64 GPT-NeoX (a Pythia
# miniature) trained for 60 steps on docstrings of the Python standard library.

# %% [markdown]
# ## 1. Set-up and a toy model
#
# `ia.demo.train_toy` trains a tokenizer and a tiny model, and saves `checkpoint-{step}` folders that
# `from_pretrained` reloads. Here we keep only the last checkpoint. Tiny models run fastest on one CPU thread.

# %%
import warnings

import numpy as np
import torch
from interpreto import ModelWithSplitPoints
from interpreto.concepts import TopKInputs
from transformers.utils import logging as transformers_logging

import interpreto_anisotropy as ia

torch.set_num_threads(1)
transformers_logging.disable_progress_bar()  # Interpreto's own loads below would print a "Loading weights" bar
warnings.filterwarnings("ignore", message=".*(converge|dropped|atoms).*")  # iterative methods on a tiny budget

run = ia.demo.train_toy(
    "runs/tutorials/tangent_subspaces",
    steps=60,
    checkpoint_steps=[60],
    max_train_texts=600,
    overwrite=True,
    progress=False,
)
print(f"loss {run.losses[0]:.2f} -> {run.losses[-1]:.2f}; checkpoint: {run.checkpoints[-1]}")

# %% [markdown]
# ## 2. Token activations at a split point
#
# `split_point=1` is the output of the second (last) transformer block. `ia.token_activations` is the package's
# activation reader: one row per real token, special tokens left out (the rows the gradient probe probes), each
# text read exactly as it is read alone. (A tangent can also be fitted on texts directly, `tangent.fit(texts)`;
# here four tangents share one read.) Prefer it to Interpreto 0.5.2's `get_activations`, which pads on the left
# without position ids and so reads models with learned absolute positions (GPT-2, BERT...) at shifted positions.
# We fit on texts of the corpus's `fit` split, and keep the `probe` split, disjoint from it, for the gradients at
# the end.

# %%
TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN  # for Interpreto's TopKInputs below
mwsp = ModelWithSplitPoints(str(run.checkpoints[-1]), automodel=run.automodel, split_point=1, batch_size=16)

fit_texts = [text for text in ia.demo.load_corpus("fit", progress=False) if len(text) <= 400][:48]
probe_texts = [text for text in ia.demo.load_corpus("probe", progress=False) if len(text) <= 400][:32]
activations, token_ids = ia.token_activations(mwsp, fit_texts)
print("activations:", tuple(activations.shape), "(tokens, d)")

# %% [markdown]
# ## 3. Four tangents of rank k = 8
#
# Each tangent explainer runs its Interpreto concept method on the centred activations, then orthonormalises the
# learned dictionary into a `Subspace` with basis Q of shape (d, k). PCA is streamed and exact; the iterative
# methods get small budgets here (`max_iter`, `nb_epochs`) so that the tutorial stays fast.

# %%
K = 8
tangents = {
    "pca": ia.PCATangent(mwsp, nb_concepts=K).fit(activations),
    "semi_nmf": ia.SemiNMFTangent(mwsp, nb_concepts=K).fit(activations, max_iter=50),
    "ica": ia.ICATangent(mwsp, nb_concepts=K).fit(activations),
    "topk_sae": ia.TopKSAETangent(mwsp, nb_concepts=K, top_k=2).fit(activations, nb_epochs=5, batch_size=256),
}
subspaces = {name: tangent.subspace for name, tangent in tangents.items()}
subspaces["random"] = ia.Subspace.random(activations.shape[1], K, seed=0)  # a baseline: no relation to the data

for name, subspace in subspaces.items():
    print(f"{name:>9}: basis {tuple(subspace.basis.shape)}, method {subspace.method!r}")

# %% [markdown]
# How much of the activations' variance does each subspace hold? On centred activations the energy share is the
# explained variance, and PCA's is the largest possible for rank k. A random subspace holds about k/d.

# %%
centred = activations - activations.mean(0)
for name, subspace in subspaces.items():
    print(f"{name:>9}: variance share {subspace.energy_share(centred):.3f}   (k/d = {subspace.chance:.3f})")

# %% [markdown]
# ## 4. Comparing subspaces
#
# Principal angles are the basis-free way to compare two subspaces: 0° for a shared direction, 90° for an
# orthogonal one. `overlap` sums the squared cosines, normalised to [0, 1]: 1 when the subspaces coincide, about
# k/d for two random ones.

# %%
names = list(subspaces)
print(" " * 10 + "".join(f"{name:>10}" for name in names))
for first in names:
    row = "".join(f"{subspaces[first].overlap(subspaces[second]):>10.2f}" for second in names)
    print(f"{first:>10}{row}")

angles = np.degrees(subspaces["pca"].principal_angles(subspaces["semi_nmf"]))
print("\nprincipal angles PCA vs SemiNMF (degrees):", np.round(angles, 1))

# %% [markdown]
# FastICA whitens the data with a PCA before unmixing, so its k components span exactly the top-k principal
# subspace: its overlap with PCA is 1 even though its directions differ. SemiNMF's span is close to PCA's (most
# angles near 0°, a few larger), and the sparse autoencoder's, trained for a few epochs, is a different subspace.

# %% [markdown]
# ## 5. What do tangent directions encode? `TopKInputs`
#
# A tangent explainer is an Interpreto `ConceptAutoEncoderExplainer` whose concepts are the coordinates
# (h - mean) Q. So Interpreto's interpretation methods apply as they are. `TopKInputs` lists, for each concept,
# the tokens of the fit texts that activate it most. A PCA direction has no preferred sign: this shows its
# positive end.

# %%
interpretation = TopKInputs(concept_explainer=tangents["pca"], activation_granularity=TOKEN, k=5).interpret(
    concepts_indices="all", inputs=fit_texts, latent_activations=activations
)


def show(token: str) -> str:
    """Byte-level BPE writes a leading space as 'Ġ' and a newline as 'Ċ'."""
    return repr(token.replace("Ġ", " ").replace("Ċ", "\n"))


for concept, top in interpretation.items():
    print(f"direction {concept}: " + ", ".join(show(token) for token in top))

# %% [markdown]
# ## 6. Which tangent holds the training gradient?
#
# Now the question of the paper. `GradientProbe` takes the causal-LM loss of the held-out probe texts, summed over
# tokens, and its gradient at the split point: one row per real token, in one forward and one backward pass per
# batch. Given a dict of subspaces it projects the same gradients onto all of them, each against 20 matched-rank
# normal controls drawn in its orthogonal complement.

# %%
probe = ia.GradientProbe(mwsp, objective="causal_lm")
results = probe.run(probe_texts, subspaces, n_controls=20, seed=0, progress=False)

print(f"{'tangent':>9} {'E_T':>7} {'controls':>9} {'ratio':>7} {'p':>6} {'capture':>8}")
for name, result in results.items():
    print(
        f"{name:>9} {result.energy_share:7.3f} {result.control_mean:9.3f} {result.energy_ratio:7.2f} "
        f"{result.p_value:6.3f} {result.anisotropy_capture:8.3f}"
    )
print()
print(results["pca"])

# %% [markdown]
# The activation-derived tangents hold several times more gradient energy than their controls, and the p-value is
# the smallest that 20 controls allow (1/21). The random subspace, like its own controls, holds about chance.
# This is a description of where the gradient points, not proof that training "uses" the tangent: see
# [Concepts](../concepts.md#what-the-numbers-do-not-say).
#
# Next: [a checkpoint sweep](checkpoint_sweep.md) follows these numbers over training.
