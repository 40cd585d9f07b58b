# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A plain PyTorch training loop with a live TrainingProbe: anisotropy measured on the training step's own gradients.

Trains a causal LM with AdamW, gradient accumulation and (on a GPU) a float16 gradient scaler; the probe, attached as
a context manager, pools each window's micro-batches at the split points and writes one row per window. The
tangent is fitted live on the activations of the first steps ("early"); the windows before it are scored
retrospectively. At the end the rows are a `SweepResult`: its summary is printed and its HTML report written.

A Hub model (GPU advised):

    python examples/live_training.py --model EleutherAI/pythia-70m --split-point 3 --steps 500 --device cuda

Offline, on the CPU, in well under a minute (a toy GPT-NeoX built here, trained on the toy corpus):

    python examples/live_training.py --toy
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def _split_point(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() else value


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--toy", action="store_true", help="offline: a toy GPT-NeoX and tokenizer built here")
    source.add_argument("--model", help="a Hugging Face causal LM (Hub id or folder), trained further here")
    parser.add_argument("--split-point", type=_split_point, action="append", help="layer index or path (repeatable)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: 40; 500 with --model)")
    parser.add_argument("--accumulation", type=int, default=2, help="micro-batches per optimizer step (default: 2)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per micro-batch (default: 8)")
    parser.add_argument("--max-length", type=int, default=64, help="tokens per sequence (default: 64)")
    parser.add_argument("--every", type=int, default=1, help="optimizer steps per window (default: 1)")
    parser.add_argument("--nb-concepts", type=int, default=8, help="tangent rank k (default: 8)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--out", default="runs/live_example", help="results folder (default: runs/live_example)")
    return parser


def model_and_tokenizer(args: argparse.Namespace, texts: list[str]):
    """The model to train and its tokenizer (a fresh toy GPT-NeoX with --toy)."""
    from interpreto_anisotropy.demo import build_model, train_tokenizer

    if args.toy:
        tokenizer = train_tokenizer(texts, arch="gpt_neox", vocab_size=512)
        model = build_model("gpt_neox", vocab_size=len(tokenizer), hidden_size=64, num_layers=2, tokenizer=tokenizer)
        return model, tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(args.model), tokenizer


def micro_batches(tokenizer, texts: list[str], args: argparse.Namespace):
    """Endless right-padded micro-batches with labels (-100 on padding)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    while True:
        for index in torch.randperm(len(texts), generator=generator).split(args.batch_size):
            chunk = [texts[i] for i in index.tolist()]
            batch = tokenizer(chunk, padding=True, truncation=True, max_length=args.max_length, return_tensors="pt")
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            yield {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "labels": labels}


def train(args: argparse.Namespace) -> None:
    """Train with the live probe attached, then print the rows and write the report."""
    import torch

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.demo import load_corpus

    if args.toy:
        torch.set_num_threads(1)  # a tiny model runs fastest on one CPU thread
    texts = load_corpus("train", max_texts=400, progress=False)
    model, tokenizer = model_and_tokenizer(args, texts)
    device = torch.device(args.device)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
    autocast = torch.autocast(device.type, dtype=torch.float16, enabled=device.type == "cuda")
    steps = args.steps or (40 if args.toy else 500)
    batches = micro_batches(tokenizer, texts, args)
    probe = ia.TrainingProbe(
        model,
        args.split_point or [1],
        tokenizer=tokenizer,
        results_dir=Path(args.out),
        nb_concepts=args.nb_concepts,
        every=args.every,
        total_steps=steps,  # "early": the tangent is fitted on the first 30 % of the steps
        reduction="mean",  # the model's loss is a mean over each micro-batch's tokens
        loss_scale=1 / args.accumulation,  # the loop divides it by the accumulation steps
        grad_scaler=scaler,  # its scale is undone (a no-op on the CPU, where it is disabled)
        overwrite=True,
    )
    with probe:
        for _step in range(steps):
            for _ in range(args.accumulation):
                batch = {key: value.to(device) for key, value in next(batches).items()}
                with autocast:
                    loss = model(**batch).loss / args.accumulation
                torch.autograd.backward(scaler.scale(loss))  # nnsight patches Tensor.backward; this is the same
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            for row in probe.step():
                if row["step"] % 10 == 0 and not row["retrospective"]:
                    print(f"step {row['step']:>4}  E_T {row['energy_share']:.4f}  ratio {row['energy_ratio']:.2f}")
    table = ia.SweepResult.load(args.out)
    print(table.summary_table().splitlines()[-1])
    print("report:", ia.write_report(table, Path(args.out) / "report"))


def main() -> None:
    """Entry point."""
    args = build_parser().parse_args()
    start = time.perf_counter()
    train(args)
    print(f"wall time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
