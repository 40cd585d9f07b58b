# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
# %% [markdown]
# # Tangent concepts and Interpreto attributions
#
# A tangent explainer is an Interpreto concept explainer whose concepts are coordinates in an orthonormal basis
# of the activation manifold's tangent proxy. Its encoder and decoder are linear, hence differentiable, so
# Interpreto's attribution machinery applies to tangent directions as it does to any concept. This tutorial
# combines the two on a tiny text classifier:
#
# 1. **concepts → output**: `concept_output_gradient` tells which tangent directions of the token activations
#    drive the classifier's logits; the gradient probe says how much of the training-loss gradient they hold;
# 2. **inputs → concepts**: an `Occlusion` attribution of tangent concepts, through
#    `get_inputs_to_concepts_model()`, tells which input words move the sequence representation along each tangent
#    direction;
# 3. **inputs → output**: a `Saliency` attribution of the classifier's logit on the same inputs, side by side.
#
# It runs offline on the CPU in well under a minute.

# %% [markdown]
# ## 1. A tiny classifier
#
# The task: does a docstring of the Python standard library mention files ("file" anywhere in the text)? We train
# a tokenizer and a 2-layer, d=64 GPT-NeoX sequence classifier from scratch with `ia.demo.train_tokenizer` and
# `ia.demo.build_model`. A decoder classifier reads the last token, so the tokenizer pads on the left.

# %%
import copy

import numpy as np
import torch
from interpreto import Granularity, ModelWithSplitPoints, Occlusion, Saliency, SplitterForClassification
from scipy.stats import spearmanr
from transformers.utils import logging as hf_logging

import interpreto_anisotropy as ia
from interpreto_anisotropy.demo import build_model, train_tokenizer

torch.set_num_threads(1)  # tiny models run fastest on one CPU thread
hf_logging.set_verbosity_error()

texts = [text for text in ia.demo.load_corpus("train", progress=False) if len(text) <= 300]
positives = [text for text in texts if "file" in text.lower()][:300]
negatives = [text for text in texts if "file" not in text.lower()][: len(positives)]
data = [(text, 1) for text in positives] + [(text, 0) for text in negatives]
order = torch.randperm(len(data), generator=torch.Generator().manual_seed(0)).tolist()
data = [data[index] for index in order]
train, test = data[:-100], data[-100:]

tokenizer = train_tokenizer(texts, vocab_size=512)
tokenizer.padding_side = "left"
model = build_model("gpt_neox", vocab_size=len(tokenizer), tokenizer=tokenizer, task="sequence_classification")


def encode(batch_texts):
    return tokenizer(batch_texts, return_tensors="pt", padding=True, truncation=True, max_length=96)


optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
model.train()
for step in range(120):
    batch = [train[(step * 16 + offset) % len(train)] for offset in range(16)]
    output = model(**encode([text for text, _ in batch]), labels=torch.tensor([label for _, label in batch]))
    optimizer.zero_grad()
    torch.autograd.backward(output.loss)
    optimizer.step()
model.eval()

with torch.no_grad():
    predictions = model(**encode([text for text, _ in test])).logits.argmax(-1)
accuracy = (predictions == torch.tensor([label for _, label in test])).float().mean().item()
print(f"{len(train)} training texts, held-out accuracy {accuracy:.2f}")

# %% [markdown]
# Each Interpreto wrapper below gets its own copy of the trained model: a wrapper patches the modules of the model
# it is given, and a deep copy of an already wrapped model would silently run the original modules.

# %%
token_model, sequence_model, saliency_model = (copy.deepcopy(model) for _ in range(3))

# %% [markdown]
# ## 2. Concepts → output: `concept_output_gradient`
#
# Fit a rank-8 PCA tangent on the token activations of texts at the output of the classifier's second block (read
# by the package's reader: the same token rows the gradient probe uses), then ask
# Interpreto for the gradient of each class logit with respect to the tangent concepts, token by token
# (`concepts_x_gradients=True` by default: gradient times concept value, normalised per target).

# %%
TOKEN = ModelWithSplitPoints.activation_granularities.TOKEN
mwsp = ModelWithSplitPoints(token_model, split_point=1, tokenizer=copy.deepcopy(tokenizer), batch_size=16)
fit_texts = [text for text, _ in train[:120]]
token_tangent = ia.PCATangent(mwsp, nb_concepts=8).fit(fit_texts)

examples = sorted([text for text, label in test if label == 1], key=len)[:3]
importance = np.zeros(8)
for text in examples:
    (gradient,) = token_tangent.concept_output_gradient([text], targets=[0, 1], activation_granularity=TOKEN)
    # gradient: (targets, tokens, concepts); keep the "mentions files" logit, sum over tokens
    importance += gradient[1].abs().sum(0).numpy()
importance /= importance.sum()
print("share of the class-1 attribution per tangent concept:", np.round(importance, 2))

# %% [markdown]
# The gradient probe asks the converse question with the classifier's own training loss: how much of the
# cross-entropy gradient at that layer lies in the tangent, against 20 matched-rank normal controls?

# %%
probe = ia.GradientProbe(mwsp, objective="sequence_classification")
result = probe.run([text for text, _ in test], token_tangent, labels=[label for _, label in test], progress=False)
print(
    f"E_T = {result.energy_share:.3f}, controls {result.control_mean:.4f}, chance {result.chance:.3f}, "
    f"p = {result.p_value:.3f}"
)

# %% [markdown]
# ## 3. Inputs → concepts: `Occlusion` of tangent concepts
#
# Attributions from inputs to concepts need Interpreto's `SplitterForClassification`: it splits the classifier at
# the input of its classification head, where each text has one sequence representation (the last token's, for a
# decoder). We fit a rank-4 tangent of those representations, and `get_inputs_to_concepts_model()` turns the
# tangent explainer into a model whose "logits" are the tangent concepts of a text. These are sequence-level rows,
# which only the splitter itself reads (its tokenizer pads on the left so that the last token sits at -1; the toy
# GPT-NeoX has rotary positions, so padding does not shift it).

# %%
splitter = SplitterForClassification(sequence_model, tokenizer=copy.deepcopy(tokenizer), batch_size=16)
sequence_activations, _ = splitter.get_activations([text for text, _ in train[:300]])
sequence_tangent = ia.PCATangent(splitter, nb_concepts=4).fit(sequence_activations)
inputs_to_concepts = sequence_tangent.get_inputs_to_concepts_model()
print("sequence representations:", tuple(sequence_activations.shape), "-> concepts:", inputs_to_concepts.nb_concepts)

# %% [markdown]
# With a linear head, the gradient of the logit difference (class 1 minus class 0) with respect to the sequence
# representation is the same vector w for every text: the head's decision direction. How much of it lies in the
# tangent, and along which concept?

# %%
head = sequence_model.score.weight.detach()
decision = (head[1] - head[0])[None, :]
Q = sequence_tangent.subspace
print(
    f"decision direction in the tangent: {Q.energy_share(decision):.2f} of its squared norm "
    f"(chance k/d = {Q.chance:.2f})"
)
alignment = Q.coords(decision, center=False)[0]
concept = int(alignment.abs().argmax())
print("cosines with the tangent concepts:", np.round((alignment / decision.norm()).numpy(), 2), "-> concept", concept)

# %% [markdown]
# Occlusion masks one word at a time and measures how much each tangent concept moves. Targets are the concepts
# to explain (here all four, for every input).

# %%
occlusion = Occlusion(inputs_to_concepts, splitter.tokenizer, batch_size=16, granularity=Granularity.WORD)
occlusions = occlusion(examples, targets=torch.arange(4))

# %% [markdown]
# ## 4. Inputs → output: `Saliency`, side by side
#
# `Saliency` explains the classifier itself: the gradient of the "mentions files" logit with respect to the input
# embeddings (times the embeddings), aggregated per word. One target per input.

# %%
saliency = Saliency(saliency_model, tokenizer, batch_size=16, granularity=Granularity.WORD)
saliencies = saliency(examples, targets=torch.ones(len(examples), dtype=torch.long))

for text, occluded, salient in zip(examples, occlusions, saliencies, strict=True):
    words = list(occluded.elements)
    assert words == list(salient.elements)
    occlusion_scores = occluded.attributions[concept].detach().numpy()
    saliency_scores = salient.attributions[0].detach().numpy()
    print(f"\n{text[:70]!r}...")
    print(f"{'word':>16} {'occlusion, concept ' + str(concept):>22} {'saliency, class 1':>18}")
    for index in np.argsort(-np.abs(occlusion_scores))[:6]:
        print(f"{words[index].strip()[:16]:>16} {occlusion_scores[index]:>22.3f} {saliency_scores[index]:>18.4f}")
    rho = spearmanr(np.abs(occlusion_scores), saliency_scores).statistic
    print(f"Spearman correlation of |occlusion| and saliency over {len(words)} words: {rho:+.2f}")

# %% [markdown]
# ## 5. Reading the three views together
#
# - `concept_output_gradient` spreads the class-1 attribution over the token-level tangent concepts: a few carry
#   most of it.
# - The decision direction of the head lies mostly inside the rank-4 tangent of the sequence representations,
#   nearly along one concept, so that concept is where the classifier's evidence shows up: occluding the word
#   "file" moves it far more than any other word.
# - Saliency of the class logit, a local gradient of the classifier itself, agrees only in part: it usually ranks
#   "file" high too, with a moderate rank correlation with the occlusion of the aligned concept.
# - The probe's energy share says the same from the training loss's side: the cross-entropy gradient at layer 1
#   lies mostly in the token tangent.
#
# Exact numbers vary with the seed and the tiny training budget, and all of this is descriptive: aligned
# gradients and attributions do not prove that the classifier's computation *uses* the tangent directions (see
# [Concepts](../concepts.md#what-the-numbers-do-not-say)). Interpreto's other attribution methods (`Lime`,
# `KernelShap`, `IntegratedGradients`...) and concept interpretations (`TopKInputs`, see the
# [tangent subspaces tutorial](tangent_subspaces.md)) combine with tangent explainers in the same way.
