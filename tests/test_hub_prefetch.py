# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Hub checkpoints fetched ahead of their turn, within a disk budget (issue 18, parts 2 and 3), against the local
Hub-compatible server: nothing of ours is mocked, huggingface_hub talks HTTP to `helpers.hub_server.HubServer`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cache_size import CacheSize  # noqa: E402

import interpreto_anisotropy as ia
from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.cli import build_parser
from interpreto_anisotropy.errors import CheckpointError, CheckpointWarning, InvalidInputError
from interpreto_anisotropy.sweeps.prefetch import CheckpointPipeline

pytest_plugins = ["helpers.hub_fixtures"]
pytestmark = pytest.mark.filterwarnings(
    "ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning", "ignore:.*pad token:UserWarning"
)

WORDS = "the a cat dog sat on mat and ran to big small red blue".split()
TEXTS = [" ".join(WORDS[start:] + WORDS[:start]) for start in range(8)]
REPO = "org/tiny-neox"
REVISIONS = ["step0", "step8", "step16"]
WALL_CLOCK = {"wall_seconds", "download_seconds"}


def _sweep(checkpoints, results_dir: Path, **options) -> ia.CheckpointSweep:
    options = {"progress": False, **options}
    return ia.CheckpointSweep(
        checkpoints, split_point=0, texts=TEXTS, nb_concepts=2, n_controls=2, results_dir=results_dir, **options
    )


def _comparable(rows, ignored=WALL_CLOCK):
    return [{key: value for key, value in row.items() if key not in ignored} for row in rows]


def _weights_gets(server, revision: str) -> int:
    commit = server.repos[REPO][revision].commit
    return server.count(f"/resolve/{commit}/model.safetensors", "GET")


def _snapshots(repo: str, revision_of_commit: dict[str, str]) -> set[str]:
    """The revisions of a repository that have a snapshot folder in the test's cache."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}" / "snapshots"
    return {revision_of_commit[path.name] for path in folder.iterdir()} if folder.is_dir() else set()


# --------------------------------------------------------------------------------------------------------------------
# the same rows, fetched ahead


def test_a_prefetched_sweep_equals_the_sequential_one_and_local_folders(online, hub_folders, tmp_path, capfd, caplog):
    checkpoints = ck.hub(REPO, REVISIONS)
    caplog.set_level(logging.INFO, logger="interpreto_anisotropy")
    ahead = _sweep(checkpoints, tmp_path / "ahead", prefetch=2, max_concurrent_downloads=2, progress=True).run()
    bars = capfd.readouterr().err
    assert "Downloads" in bars and "GB fetched" in bars and "Checkpoints" in bars  # two bars: download, compute
    said = sorted(r.getMessage() for r in caplog.records if r.name == "interpreto_anisotropy.commons.hub")
    # each revision's download is information, logged once (from the pool's threads too), naming its snapshot
    assert [line.split(" into ")[0] for line in said] == sorted(
        f"Fetched checkpoint step-{ck.parse_step(r)} ('{REPO}' at revision '{r}')" for r in REVISIONS
    )
    assert all("/snapshots/" in line for line in said)
    for revision in REVISIONS:  # step0 is used twice (reference, then its rows): fetched once
        assert _weights_gets(online, revision) == 1, revision
    one_at_a_time = _sweep(checkpoints, tmp_path / "sequential", prefetch=0).run()
    local = [ck.Checkpoint(ck.parse_step(r), str(hub_folders[REPO, r]), kind="local") for r in REVISIONS]
    from_folders = _sweep(local, tmp_path / "local").run()

    assert [row["step"] for row in ahead.rows] == [0, 8, 16]
    assert _comparable(ahead.rows) == _comparable(one_at_a_time.rows)
    ignored = WALL_CLOCK | {"source", "revision", "fingerprint"}
    assert _comparable(ahead.rows, ignored) == _comparable(from_folders.rows, ignored)
    assert all(row["download_seconds"] >= 0 for row in ahead.rows)
    assert not any("download_seconds" in row for row in from_folders.rows)
    assert online.unknown == []


def test_the_look_ahead_is_bounded_and_starts_while_a_checkpoint_is_used(online):
    uses = ck.hub(REPO, REVISIONS)
    with CheckpointPipeline(uses, prefetch=1) as pipeline:
        first = pipeline.take(uses[0])
        assert Path(first.folder, "model.safetensors").is_file()
        deadline = time.monotonic() + 30
        while _weights_gets(online, "step8") == 0 and time.monotonic() < deadline:  # fetched during use 0
            time.sleep(0.01)
        assert _weights_gets(online, "step8") == 1
        time.sleep(0.5)
        assert online.count("/step16") == 0  # one ahead, no more
        pipeline.done(uses[0])
        assert Path(pipeline.take(uses[1]).folder).name == online.repos[REPO]["step8"].commit
    smol = ck.hub("org/tiny-smol", ["step-0"])
    with CheckpointPipeline(smol, prefetch=0) as pipeline:
        time.sleep(0.5)
        assert online.count("/step-0") == 0  # no look-ahead: fetched when its turn comes
        assert Path(pipeline.take(smol[0]).folder, "config.json").is_file()


# --------------------------------------------------------------------------------------------------------------------
# a background download that fails


def test_a_background_download_is_retried_by_huggingface_hub_then_succeeds(online, hub_folders, tmp_path):
    commit = online.repos[REPO]["step16"].commit
    online.fail(rf"/resolve/{commit}/model\.safetensors", 503, method="HEAD", times=2)
    result = _sweep(ck.hub(REPO, REVISIONS), tmp_path / "s", prefetch=2).run()
    assert [row["step"] for row in result.rows] == [0, 8, 16] and not result.skipped
    assert online.count(f"/resolve/{commit}/model.safetensors", "HEAD") == 3


def test_a_background_download_that_fails_stops_the_sweep_at_its_turn(online, tmp_path):
    online.fail(r"/revision/step16", 500)
    sweep = _sweep(ck.hub(REPO, REVISIONS), tmp_path / "s", prefetch=2)
    with pytest.raises(CheckpointError, match=r"step-16.*'org/tiny-neox'.*'step16'"):
        sweep.run()
    rows = ia.SweepResult.load(tmp_path / "s").rows
    assert [row["step"] for row in rows] == [0, 8]  # the rows before its turn are written


def test_a_background_download_that_fails_is_skipped_and_recorded(online, tmp_path):
    online.fail(r"/revision/step8", 500)
    sweep = _sweep(ck.hub(REPO, REVISIONS), tmp_path / "s", prefetch=2, skip_bad_checkpoints=True)
    with pytest.warns(CheckpointWarning, match="Skipped.*step-8"):
        result = sweep.run()
    assert [row["step"] for row in result.rows] == [0, 16]
    (skipped,) = result.skipped
    assert skipped["step"] == 8 and "org/tiny-neox" in skipped["skipped"] and "'step8'" in skipped["skipped"]
    online.faults.clear()
    again = _sweep(ck.hub(REPO, REVISIONS), tmp_path / "s", prefetch=2).run()  # a later run retries it
    assert [row["step"] for row in again.rows] == [0, 8, 16] and not again.skipped


# --------------------------------------------------------------------------------------------------------------------
# a disk budget


def _revision_bytes(folder: Path) -> int:
    """Bytes a revision's files hold, from the folder the server serves."""
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())


SUITE = "org/tiny-suite"


@pytest.fixture(scope="module")
def suite_folders(tmp_path_factory) -> dict[str, Path]:
    """Six revisions of one model, each with its own weights (no blob shared between two revisions' weights)."""
    from helpers.hub_fixtures import save_tiny

    root = tmp_path_factory.mktemp("suite")
    return {f"step{8 * i}": save_tiny(root / f"step{8 * i}", seed=500 + i) for i in range(6)}


@pytest.fixture
def suite(online, suite_folders):
    """The server, also serving SUITE."""
    for revision, folder in suite_folders.items():
        online.add_revision(SUITE, revision, folder)
    return online


@pytest.mark.slow  # two sweeps of six checkpoints, one from a throttled server
def test_a_budget_evicts_only_what_the_sweep_fetched_and_bounds_the_cache(suite, suite_folders, tmp_path):
    from huggingface_hub import constants, snapshot_download

    revisions = list(suite_folders)
    commits = {suite.repos[SUITE][r].commit: r for r in revisions}
    cache = Path(constants.HF_HUB_CACHE)
    snapshot_download(SUITE, revision="step24")  # the user's own copy, before the sweep
    user_files = {p.relative_to(cache): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    one = max(_revision_bytes(folder) for folder in suite_folders.values())
    budget = 2.5 * one  # room for two revisions: the one computed and one ahead
    suite.bandwidth = 40_000  # bytes per second and connection: a revision takes about 0.8 s, the poll sees it
    options = {"prefetch": 4, "max_concurrent_downloads": 3}
    with CacheSize(cache, interval=0.002) as size:
        base = size.now()
        result = _sweep(ck.hub(SUITE, revisions), tmp_path / "s", **options, max_cache_gb=budget / 1e9).run()
    assert [row["step"] for row in result.rows] == [0, 8, 16, 24, 32, 40]
    assert _snapshots(SUITE, commits) == {"step24"}  # the sweep's own revisions evicted; the user's left whole
    assert {p: data for p, data in ((p, (cache / p).read_bytes()) for p in user_files)} == user_files
    assert 0 < size.peak - base <= budget + one

    suite.bandwidth = None
    with CacheSize(
        cache, interval=0.002
    ) as size:  # the same sweep without a budget: nothing evicted, the cache grows past it
        unbounded = _sweep(ck.hub(SUITE, revisions), tmp_path / "unbounded", **options).run()
    assert _comparable(result.rows) == _comparable(unbounded.rows)
    assert _snapshots(SUITE, commits) == set(revisions)
    assert size.peak - base > budget + one


def test_a_revision_evicted_then_needed_again_is_fetched_again(online, hub_folders, tmp_path):
    commits = {online.repos[REPO][r].commit: r for r in REVISIONS}
    one = max(_revision_bytes(hub_folders[REPO, r]) for r in REVISIONS)
    # One checkpoint of budget, no look-ahead: step0 is evicted after the reference tangent, fetched for its rows.
    tight = _sweep(ck.hub(REPO, REVISIONS), tmp_path / "tight", prefetch=0, max_cache_gb=one / 1e9).run()
    assert _weights_gets(online, "step0") == 2 and _weights_gets(online, "step8") == 1
    assert _snapshots(REPO, commits) == set()
    local = [ck.Checkpoint(ck.parse_step(r), str(hub_folders[REPO, r]), kind="local") for r in REVISIONS]
    ignored = WALL_CLOCK | {"source", "revision", "fingerprint"}
    assert _comparable(tight.rows, ignored) == _comparable(_sweep(local, tmp_path / "local").run().rows, ignored)
    assert all(row["fingerprint"] == f"commit:{online.repos[REPO][row['revision']].commit}" for row in tight.rows)


def test_two_names_of_one_commit_are_evicted_once_both_are_done(online, hub_folders):
    commits = {online.repos[REPO][r].commit: r for r in ["step16"]}
    step16, main = ck.hub(REPO, {16: "step16", 20: "main"})  # main is step16's commit
    one = max(_revision_bytes(hub_folders[REPO, r]) for r in REVISIONS)
    with CheckpointPipeline([step16, main], prefetch=1, max_cache_bytes=2 * one, before={REPO: set()}) as pipeline:
        first = pipeline.take(step16)
        pipeline.done(step16)  # main, fetched ahead, holds the same snapshot: it stays
        second = pipeline.take(main)
        assert second.folder == first.folder and Path(second.folder, "model.safetensors").is_file()
        assert _snapshots(REPO, commits) == {"step16"}
        pipeline.done(main)
    assert _snapshots(REPO, commits) == set()


def test_the_options_are_checked(tmp_path):
    local = [ck.Checkpoint(0, str(tmp_path))]
    for option, value in (
        ("prefetch", -1),
        ("max_concurrent_downloads", 0),
        ("max_cache_gb", 0),
        ("max_cache_gb", "2"),
    ):
        with pytest.raises(InvalidInputError, match=option):
            _sweep(local, tmp_path / "s", **{option: value})
    parser = build_parser()
    base = ["sweep", "--model", "m", "--texts", "t", "--split-point", "1", "--out", "o"]
    args = parser.parse_args([*base, "--prefetch", "0", "--max-concurrent-downloads", "3", "--max-cache-gb", "20"])
    assert (args.prefetch, args.max_concurrent_downloads, args.max_cache_gb) == (0, 3, 20.0)
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--max-cache-gb", "0"])


# --------------------------------------------------------------------------------------------------------------------
# a prefetching sweep killed mid-download, then resumed

CHILD = """
import interpreto_anisotropy as ia
words = "the a cat dog sat on mat and ran to big small red blue".split()
texts = [" ".join(words[s:] + words[:s]) for s in range(8)]
ia.CheckpointSweep(ia.checkpoints.hub("org/tiny-neox", ["step0", "step8", "step16"]), split_point=0, texts=texts,
                   nb_concepts=2, n_controls=2, results_dir={out!r}, progress=False, prefetch=2).run()
"""


@pytest.mark.slow  # a child process that imports the package and computes two checkpoints
def test_a_prefetching_sweep_killed_mid_download_resumes_without_fetching_again(online, tmp_path):
    out = tmp_path / "s"
    commit16 = online.repos[REPO]["step16"].commit
    online.fail(rf"/resolve/{commit16}/model\.safetensors", "slow", method="GET", delay=120)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(out=str(out))], env=env, stderr=subprocess.DEVNULL)
    rows = out / "rows.jsonl"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            written = len(rows.read_text().splitlines()) if rows.exists() else 0
            if written == 2 and _weights_gets(online, "step16") == 1:
                break
            assert child.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.05)
        assert child.poll() is None and written == 2, "the sweep did not reach step16's download"
    finally:
        child.kill()
        child.wait()
    online.faults.clear()
    before = {revision: _weights_gets(online, revision) for revision in REVISIONS}
    before_info = online.count("/revision/step0") + online.count("/revision/step8")
    result = _sweep(ck.hub(REPO, REVISIONS), out, prefetch=2).run()
    assert [row["step"] for row in result.rows] == [0, 8, 16]
    assert before == {"step0": 1, "step8": 1, "step16": 1}
    assert _weights_gets(online, "step0") == 1 and _weights_gets(online, "step8") == 1  # done rows: not fetched
    assert online.count("/revision/step0") + online.count("/revision/step8") == before_info
    assert _weights_gets(online, "step16") == 2 and online.ranged == []  # the cut download fetched afresh
