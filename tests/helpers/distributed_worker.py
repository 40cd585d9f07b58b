# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Run under `torchrun --nproc_per_node=2`: a probe or a sweep on the gloo backend, results written by rank 0.

Usage: python -m torch.distributed.run --nproc_per_node=2 distributed_worker.py ARGS.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests folder, for helpers.live_kit

import torch
import torch.distributed as dist
from interpreto import ModelWithSplitPoints

import interpreto_anisotropy as ia
from interpreto_anisotropy.commons import distributed


def main() -> None:
    args = json.loads(open(sys.argv[1]).read())
    # The test's threads and float32 matmul precision (tests/conftest.py; benchmarks/margins/test_margins.py varies them)
    torch.set_num_threads(int(os.environ.get("INTERPRETO_ANISOTROPY_TEST_THREADS", "1")))
    torch.set_float32_matmul_precision(os.environ.get("INTERPRETO_ANISOTROPY_TEST_MATMUL_PRECISION", "highest"))
    assert distributed.init_from_environment(), "expected a process group with several ranks"
    if args["mode"] == "probe_nonfinite":
        model, tokenizer = ia.checkpoints.load_checkpoint(
            ia.checkpoints.Checkpoint(0, args["checkpoint"]), device="cpu"
        )
        mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=3)

        def nan_in_the_short_last_batch(output, batch):  # 14 texts in batches of 3: the last, of 2, is rank 0's
            per_token = output.logits.float().logsumexp(-1)
            return per_token * float("nan") if batch["input_ids"].shape[0] == 2 else per_token

        try:
            ia.GradientProbe(mwsp, batch_size=3, objective=nan_in_the_short_last_batch).run(
                args["texts"], ia.Subspace.random(model.config.hidden_size, 4, seed=0), n_controls=3, progress=False
            )
            message = "no error"
        except ia.errors.NonFiniteError as error:
            message = f"NonFiniteError: {error}"
        with open(f"{args['out']}.rank{distributed.rank()}", "w") as handle:
            handle.write(message)
    elif args["mode"] == "probe":
        model, tokenizer = ia.checkpoints.load_checkpoint(
            ia.checkpoints.Checkpoint(0, args["checkpoint"]), device="cpu"
        )
        mwsp = ModelWithSplitPoints(model, split_point=1, tokenizer=tokenizer, batch_size=3)
        subspaces = {
            name: ia.Subspace.random(model.config.hidden_size, 4, seed=seed) for name, seed in (("a", 0), ("b", 1))
        }
        results = ia.GradientProbe(mwsp, batch_size=3).run(
            args["texts"], subspaces, n_controls=5, seed=2, progress=False, **args.get("draws", {})
        )
        if distributed.is_main_process():
            with open(args["out"], "w") as handle:
                json.dump({name: result.to_dict() for name, result in results.items()}, handle)
    elif args["mode"] == "live":
        _live(args)
    else:
        ia.CheckpointSweep(args.pop("pattern"), **args["sweep"]).run()
    dist.destroy_process_group()


def _live(args: dict) -> None:
    """Two steps of data-parallel training (DDP) with a live probe: rank r trains on micro-batch r of each step."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from helpers.live_kit import micro_batch

    model, tokenizer = ia.checkpoints.load_checkpoint(ia.checkpoints.Checkpoint(0, args["checkpoint"]), device="cpu")
    model = model.double().train()
    parallel = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(parallel.parameters(), lr=0.05)
    tangent = ia.Subspace.random(model.config.hidden_size, 4, seed=0)
    texts, micro, rank = args["texts"], 3, distributed.rank()
    probe = ia.TrainingProbe(parallel, 1, tokenizer=tokenizer, tangent=tangent, reduction="mean", n_controls=5)
    early_options = {"early_steps": 1, "nb_concepts": 4, "reduction": "mean", "n_controls": 5}
    early_options["results_dir"] = f"{args['out']}.live"
    # the tangent fitted after step 0: window 0 scored retrospectively, with its interval
    early = ia.TrainingProbe(parallel, 1, tokenizer=tokenizer, **early_options)

    def train(step, *probes):
        start = (2 * step + rank) * micro
        batch = micro_batch(tokenizer, texts[start : start + micro], start=0)
        loss = parallel(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        torch.autograd.backward(loss.loss)
        optimizer.step()
        optimizer.zero_grad()
        for each in probes:
            each.step()

    with probe, early:
        for step in range(2):
            if rank == 0:
                torch.save(model.state_dict(), f"{args['out']}.step{step}.pt")
            distributed.barrier()
            train(step, probe, early)
    # The early run restarted at step 1 from the weights of that step: every rank takes up the tangent rank 0 reads.
    model.load_state_dict(torch.load(f"{args['out']}.step1.pt"))
    with ia.TrainingProbe(parallel, 1, tokenizer=tokenizer, start_step=1, **early_options) as resumed:
        train(1, resumed)
    with open(f"{args['out']}.resumed{rank}", "w") as handle:
        json.dump(resumed.rows, handle)
    if rank == 0:
        with open(args["out"], "w") as handle:
            json.dump(probe.rows, handle)
        with open(f"{args['out']}.early", "w") as handle:
            json.dump(early.rows, handle)
        early.points["gpt_neox.layers.1"].schedule.tangent.save(f"{args['out']}.tangent.safetensors")


if __name__ == "__main__":
    main()
