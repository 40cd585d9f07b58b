# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A checkpoint suite swept from a throttled Hub: prefetched sweep against pure download and pure compute.

The local Hub-compatible server of the tests (`tests/helpers/hub_server.py`, on 127.0.0.1, in a process of its own)
serves `--revisions`
revisions of a random-init GPT-NeoX (each with its own weights). The benchmark measures, in one run:

1. pure compute: the sweep over the same files as local folders (nothing downloaded), timed first and again last
   (the mean is reported: the machine's load may drift);
2. then throttles the server so that downloading the suite takes about as long as computing it (bytes per second =
   the suite's bytes / the compute time, corrected after fetching one revision; `--bandwidth-ratio` scales the
   time aimed at), and measures pure download: every revision fetched in turn into an empty cache
   (`commons.hub.fetch`, as a sweep does), nothing computed;
3. the prefetched sweep from the Hub into an empty cache, with a disk budget of `--budget-revisions` revisions,
   the cache folder's size polled every few milliseconds;
4. the sequential sweep (`prefetch=0`, no budget), each checkpoint fetched when its turn comes.

It reports the prefetched sweep's wall time over max(download, compute) (1 is perfect overlap) and over their sum
(what fetching each checkpoint at its turn costs), and the cache's peak growth against the budget plus one revision.
The prefetched rows are checked against the local folders' rows.

Usage:
    python benchmarks/suite_prefetch.py [--revisions 12] [--hidden 256] [--layers 4] [--texts 8] [--prefetch 2]
        [--budget-revisions 3] [--bandwidth-ratio 1.0]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.cache_size import CacheSize  # noqa: E402
from helpers.hub_server import HubServer  # noqa: E402

REPO = "bench/suite"
WORDS = "the a cat dog sat on mat and ran to big small red blue".split()
WALL_CLOCK = {"wall_seconds", "download_seconds", "source", "revision", "fingerprint"}


def serve(connection) -> None:
    """The Hub server, in a process of its own (so that serving bytes never waits for the sweep's interpreter lock):
    answers ("add", repo, revision, folder), ("bandwidth", bytes per second) and ("stop",) sent on `connection`."""
    server = HubServer().start()
    connection.send(server.url)
    while True:
        message = connection.recv()
        if message[0] == "add":
            server.add_revision(*message[1:])
        elif message[0] == "bandwidth":
            server.bandwidth = message[1]
        else:
            server.stop()
            return
        connection.send("ok")


class Server:
    """The parent's handle on `serve`."""

    def __init__(self) -> None:
        self.connection, theirs = multiprocessing.get_context("spawn").Pipe()
        self.process = multiprocessing.get_context("spawn").Process(target=serve, args=(theirs,), daemon=True)
        self.process.start()
        self.url = self.connection.recv()
        self.bandwidth: float | None = None

    def ask(self, *message) -> None:
        self.connection.send(message)
        self.connection.recv()

    def throttle(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        self.ask("bandwidth", bandwidth)

    def stop(self) -> None:
        self.connection.send(("stop",))
        self.process.join()


def point_hub_at(server: Server, home: Path) -> Path:
    """Set the environment huggingface_hub reads at import: the server as endpoint, a private cache; returns it."""
    cache = home / "hub"
    cache.mkdir(parents=True)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        os.environ.pop(name, None)
    os.environ.update(HF_ENDPOINT=server.url, HF_HOME=str(home), HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_TELEMETRY="1")
    return cache


def save_suite(root: Path, revisions: int, hidden: int, layers: int) -> dict[int, Path]:
    """`revisions` random-init GPT-NeoX models (each seed its own weights) with the tests' tiny tokenizer."""
    import torch
    from helpers.hub_fixtures import tiny_tokenizer
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        vocab_size=4096,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=256,
        bos_token_id=4,
        eos_token_id=1,
    )
    folders = {}
    for index in range(revisions):
        step = 1000 * index
        torch.manual_seed(index)
        folder = root / f"step{step}"
        GPTNeoXForCausalLM(config).eval().save_pretrained(folder)
        tiny_tokenizer().save_pretrained(folder)
        folders[step] = folder
    return folders


def texts(count: int, words: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words)) for i in range(count)]


def empty(cache: Path) -> None:
    shutil.rmtree(cache)
    cache.mkdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revisions", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="compute threads (the others serve and fetch the downloads)"
    )
    parser.add_argument("--texts", type=int, default=8, help="texts (half fit, half probe), 48 words each")
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--budget-revisions", type=float, default=3.0, help="max_cache_gb, in revisions")
    parser.add_argument("--bandwidth-ratio", type=float, default=1.0, help="download time / compute time aimed at")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="suite-prefetch-"))
    server = Server()
    cache = point_hub_at(server, work / "hf-home")
    import torch

    import interpreto_anisotropy as ia
    from interpreto_anisotropy.commons.hub import fetch, revision_bytes

    torch.set_num_threads(args.torch_threads)

    folders = save_suite(work / "repo", args.revisions, args.hidden, args.layers)
    for step, folder in folders.items():
        server.ask("add", REPO, f"step{step}", str(folder))
    one = max(revision_bytes(folder) for folder in folders.values())
    suite_bytes = sum(revision_bytes(folder) for folder in folders.values())
    hub = ia.checkpoints.hub(REPO, [f"step{step}" for step in folders])
    local = [ia.checkpoints.Checkpoint(step, str(folder), kind="local") for step, folder in folders.items()]
    options = {
        "split_point": 1,
        "texts": texts(args.texts, 48),
        "nb_concepts": 8,
        "n_controls": 8,
        "early_fraction": 0.05,
        "device": "cpu",
        "progress": False,
    }

    def sweep(checkpoints, name: str, **more):
        start = time.perf_counter()
        result = ia.CheckpointSweep(checkpoints, results_dir=work / name, **options, **more).run()
        return time.perf_counter() - start, result

    compute, from_folders = sweep(local, "compute")
    aimed = compute * args.bandwidth_ratio  # the download time aimed at
    server.throttle(suite_bytes / aimed)
    start = time.perf_counter()  # one revision, to correct the rate for the per-request overheads
    fetch(hub[0].source, hub[0].revision, quiet=True)
    server.throttle(server.bandwidth * len(hub) * (time.perf_counter() - start) / aimed)
    empty(cache)

    start = time.perf_counter()
    for checkpoint in hub:
        fetch(checkpoint.source, checkpoint.revision, quiet=True)
    download = time.perf_counter() - start
    empty(cache)

    budget = args.budget_revisions * one
    with CacheSize(cache) as size:
        wall, prefetched = sweep(hub, "prefetched", prefetch=args.prefetch, max_cache_gb=budget / 1e9)
    peak = size.peak
    left = size.now()
    empty(cache)
    sequential, _ = sweep(hub, "sequential", prefetch=0)
    server.stop()
    compute_after, _ = sweep(local, "compute-after")  # the machine's load may drift: compute is timed on both sides
    compute_before, compute = compute, (compute + compute_after) / 2

    same = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in prefetched.rows] == [
        {k: v for k, v in r.items() if k not in WALL_CLOCK} for r in from_folders.rows
    ]
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"{platform.node()}, {os.cpu_count()} CPUs (load average {load}), torch threads {torch.get_num_threads()}")
    print(
        f"{args.revisions} revisions of {one / 1e6:.1f} MB (GPT-NeoX d={args.hidden}, {args.layers} layers), "
        f"served at {server.bandwidth / 1e6:.2f} MB/s, prefetch={args.prefetch}, "
        f"max_cache_gb={budget / 1e9:.4f} ({args.budget_revisions:g} revisions)"
    )
    print(
        f"pure compute (local folders)        {compute:7.2f} s   (first {compute_before:.2f} s, last {compute_after:.2f} s)"
    )
    print(f"pure download (fetch each in turn)  {download:7.2f} s")
    print(f"prefetched sweep                    {wall:7.2f} s")
    print(f"sequential sweep (prefetch=0)       {sequential:7.2f} s")
    print(f"wall / max(download, compute)       {wall / max(download, compute):7.3f}   (target <= 1.15)")
    print(f"wall / (download + compute)         {wall / (download + compute):7.3f}")
    print(f"sequential / (download + compute)   {sequential / (download + compute):7.3f}")
    print(f"peak cache growth                   {peak / 1e6:7.1f} MB = {peak / one:.2f} revisions")
    print(f"budget + one revision               {(budget + one) / 1e6:7.1f} MB   (peak <= it: {peak <= budget + one})")
    print(f"cache left after the sweep          {left / 1e6:7.3f} MB")
    print(f"prefetched rows == local folders' rows (wall-clock and source columns aside): {same}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
