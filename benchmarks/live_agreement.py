# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Live vs post hoc: the largest relative difference between a live window and `GradientProbe` on the same batches
with the weights of that step, per training setup (the cases of tests/test_live_probe.py, figures printed), and
for a window scored retrospectively once the early tangent was fitted.

Float64 copies of the toy GPT-NeoX and EuroBERT (d=64, 2 layers), a random rank-8 tangent, 20 controls, 2 steps.

Usage:
    python benchmarks/live_agreement.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.live_kit import COMPARED, micro_batch, post_hoc, relative_error, run_windows  # noqa: E402

import interpreto_anisotropy as ia  # noqa: E402
from interpreto_anisotropy.demo import build_model, load_corpus, train_tokenizer  # noqa: E402


def pair(arch: str, corpus: list[str]):
    tokenizer = train_tokenizer(corpus, arch=arch, vocab_size=512)
    model = build_model(arch, vocab_size=len(tokenizer), hidden_size=64, num_layers=2, seed=0, tokenizer=tokenizer)
    return model.double().train(), tokenizer


def steps(tokenizer, texts, *, per_step: int, micro: int, masked: bool = False) -> list[list[dict]]:
    out, start = [], 0
    for _ in range(2):
        batches = []
        for index in range(per_step):
            batches.append(micro_batch(tokenizer, texts[start : start + micro], start=index * micro, masked=masked))
            start += micro
        out.append(batches)
    return out


def main() -> None:
    torch.set_num_threads(1)
    corpus = load_corpus("train", max_texts=300, progress=False)
    texts = [text for text in load_corpus("probe", progress=False) if len(text) <= 400][:32]
    tangent = ia.Subspace.random(64, 8, seed=3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)
    cases = [
        ("causal LM, padding, mean loss", "gpt_neox", {}, {}, 1, 6),
        ("causal LM, padding, summed loss", "gpt_neox", {"reduction": "sum"}, {"summed": True}, 1, 6),
        ("masked LM, seeded masks", "eurobert", {}, {}, 1, 6),
        (
            "gradient accumulation (3 uneven micro-batches)",
            "gpt_neox",
            {"loss_scale": 1 / 3},
            {"loss_scale": 1 / 3},
            3,
            3,
        ),
        ("gradient checkpointing (non-reentrant)", "gpt_neox", {}, {}, 2, 3),
        ("GradScaler (scale 1024, growing)", "gpt_neox", {"grad_scaler": scaler}, {"scaler": scaler}, 2, 3),
    ]
    print(f"| setup | windows | largest relative difference ({', '.join(COMPARED)}) |")
    print("|---|---|---|")
    for label, arch, options, step_options, per_step, micro in cases:
        model, tokenizer = pair(arch, corpus)
        if "checkpointing" in label:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        work = steps(tokenizer, texts, per_step=per_step, micro=micro, masked=arch == "eurobert")
        probe_options = {"reduction": "mean", **options}
        rows, snapshots = run_windows(
            model,
            tokenizer,
            work,
            lambda m, probe_options=probe_options, tokenizer=tokenizer: ia.TrainingProbe(
                m, 1, tokenizer=tokenizer, tangent=tangent, **probe_options
            ),
            **step_options,
        )
        worst = 0.0
        for row, snapshot, batches in zip(rows, snapshots, work, strict=True):
            objective = "masked_lm" if arch == "eurobert" else "causal_lm"
            reference = post_hoc(
                snapshot, tokenizer, batches, tangent, objective=objective, draw_seed=row["draw_seed"]
            )
            worst = max(worst, *(relative_error(row[name], getattr(reference, name)) for name in COMPARED))
        print(f"| {label} | {len(rows)} | {worst:.1e} |")
    print(
        f"| retrospective window (early tangent fitted after step 0), interval included | 1 | {retrospective(corpus, texts):.1e} |"
    )


def retrospective(corpus: list[str], texts: list[str]) -> float:
    """Largest relative difference between a window scored retrospectively (it closed before the early tangent was
    fitted) and the post-hoc probe of its batches with that tangent."""
    model, tokenizer = pair("gpt_neox", corpus)
    work = steps(tokenizer, texts, per_step=1, micro=6)
    probes = []

    def make(m):
        probes.append(ia.TrainingProbe(m, 1, tokenizer=tokenizer, early_steps=1, nb_concepts=8, reduction="mean"))
        return probes[-1]

    rows, snapshots = run_windows(model, tokenizer, work, make)
    assert rows[0]["retrospective"] and rows[0]["ci_low"] is not None
    tangent = probes[0].points["gpt_neox.layers.1"].schedule.tangent
    reference = post_hoc(
        snapshots[0], tokenizer, work[0], tangent, objective="causal_lm", draw_seed=rows[0]["draw_seed"]
    )
    return max(relative_error(rows[0][name], getattr(reference, name)) for name in COMPARED)


if __name__ == "__main__":
    main()
