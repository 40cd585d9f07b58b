# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Hub checkpoints against the local Hub-compatible server: loading, sweeps, revisions checked before the first
checkpoint, a same-named local folder never standing in, and one message per kind of failure (issues 18 and 19).

Nothing of ours is mocked: huggingface_hub and transformers talk HTTP to `helpers.hub_server.HubServer`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from importlib.metadata import distribution
from pathlib import Path

import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.commons import hub
from interpreto_anisotropy.errors import CheckpointError, CheckpointWarning, InvalidInputError
from interpreto_anisotropy.results.records import fingerprint

pytest_plugins = ["helpers.hub_fixtures"]
pytestmark = pytest.mark.filterwarnings(
    "ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning", "ignore:.*pad token:UserWarning"
)

WORDS = "the a cat dog sat on mat and ran to big small red blue".split()
TEXTS = [" ".join(WORDS[start:] + WORDS[:start]) for start in range(8)]


def _same_weights(model, folder: Path) -> bool:
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    return all(torch.equal(value, saved[key]) for key, value in model.state_dict().items())


def _sweep(checkpoints, results_dir: Path, **options) -> ia.CheckpointSweep:
    return ia.CheckpointSweep(
        checkpoints,
        split_point=0,
        texts=TEXTS,
        nb_concepts=2,
        n_controls=2,
        results_dir=results_dir,
        progress=False,
        **options,
    )


# --------------------------------------------------------------------------------------------------------------------
# loading


def test_load_checkpoint_fetches_the_revision_from_the_server(online, hub_folders):
    model, tokenizer = ck.load_checkpoint(ck.Checkpoint(8, "org/tiny-neox", revision="step8"), device="cpu")
    assert _same_weights(model, hub_folders["org/tiny-neox", "step8"])
    assert not _same_weights(model, hub_folders["org/tiny-neox", "step16"])
    assert tokenizer.pad_token == "[PAD]"
    commit = online.repos["org/tiny-neox"]["step8"].commit
    assert online.count(f"/resolve/{commit}/model.safetensors", "GET") == 1
    ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")  # cached: nothing fetched again
    assert online.count("/model.safetensors", "GET") == 1
    assert fingerprint(ck.hub("org/tiny-neox", "step8")[0]) == f"commit:{commit}"
    assert online.unknown == []


def test_a_masked_lm_and_smollm2_naming(online, hub_folders):
    model, _ = ck.load_checkpoint(ck.hub("org/tiny-bert", "step-4")[0], device="cpu")
    assert type(model).__name__ == "BertForMaskedLM"
    model, _ = ck.load_checkpoint(ck.hub("org/tiny-smol", ["step-8"])[0], device="cpu")
    assert _same_weights(model, hub_folders["org/tiny-smol", "step-8"])


def test_a_sweep_over_hub_revisions_equals_the_same_sweep_over_local_folders(online, hub_folders, tmp_path):
    revisions = ["step0", "step8", "step16"]
    from_hub = _sweep(ck.hub("org/tiny-neox", revisions), tmp_path / "hub").run()
    local = [ck.Checkpoint(ck.parse_step(r), str(hub_folders["org/tiny-neox", r])) for r in revisions]
    from_folders = _sweep(local, tmp_path / "local").run()
    ignored = {"source", "revision", "fingerprint", "wall_seconds", "download_seconds"}

    def comparable(rows):
        return [{k: v for k, v in row.items() if k not in ignored} for row in rows]

    assert len(from_hub.rows) == 3
    assert comparable(from_hub.rows) == comparable(from_folders.rows)
    assert [row["revision"] for row in from_hub.rows] == revisions
    assert online.count("/refs") == 1  # the revisions were checked once, before the first checkpoint


# --------------------------------------------------------------------------------------------------------------------
# a same-named local folder (issue 19, item 1)


@pytest.fixture
def shadow(online, tmp_path, monkeypatch) -> Path:
    """A folder org/tiny-neox in the working directory, holding another model."""
    from helpers.hub_fixtures import save_tiny

    monkeypatch.chdir(tmp_path)
    return save_tiny(tmp_path / "org" / "tiny-neox", seed=999)


def test_a_same_named_local_folder_never_stands_in_for_hub_checkpoints(shadow, hub_folders, tmp_path):
    for checkpoint in (ck.hub("org/tiny-neox", "step8")[0], ck.Checkpoint(8, "org/tiny-neox", "step8", kind="hub")):
        assert not checkpoint.is_local
        model, _ = ck.load_checkpoint(checkpoint, device="cpu")
        assert _same_weights(model, hub_folders["org/tiny-neox", "step8"])
    rows = _sweep(ck.hub("org/tiny-neox", ["step0", "step8"]), tmp_path / "sweep").run().rows
    assert [row["step"] for row in rows] == [0, 8]


def test_prefer_local_loads_the_folder_but_not_for_two_revisions(shadow, tmp_path):
    (checkpoint,) = ck.hub("org/tiny-neox", "step8", prefer_local=True)
    assert checkpoint.is_local
    model, _ = ck.load_checkpoint(checkpoint, device="cpu")
    assert _same_weights(model, shadow)
    with pytest.raises(CheckpointError, match=r"step-0.*step-8.*prefer_local"):
        ck.check_revisions(ck.hub("org/tiny-neox", ["step0", "step8"], prefer_local=True))


def test_a_local_folder_given_a_revision_is_an_error_not_a_warning(shadow):
    with pytest.raises(CheckpointError, match=r"step-8.*'org/tiny-neox'.*'step8'"):
        ck.load_checkpoint(ck.Checkpoint(8, "org/tiny-neox", revision="step8"), device="cpu")
    with pytest.raises(InvalidInputError, match="revision"):
        ck.Checkpoint(8, str(shadow), revision="step8", kind="local")


def test_kind_stays_out_of_comparisons_and_configs():
    hub = ck.Checkpoint(8, "org/m", "step8", kind="hub", prefer_local=True)
    assert hub == ck.Checkpoint(8, "org/m", "step8")
    assert hub.to_dict() == {"step": 8, "source": "org/m", "revision": "step8"}
    with pytest.raises(InvalidInputError, match="kind"):
        ck.Checkpoint(8, "org/m", kind="remote")


# --------------------------------------------------------------------------------------------------------------------
# revisions checked before the first checkpoint (issue 19, item 2)


def test_a_suite_with_two_missing_revisions_fails_before_any_row_naming_both(online, tmp_path):
    checkpoints = ck.hub("org/tiny-neox", ["step0", "step8", "step24", "step32"])
    with pytest.raises(CheckpointError) as info:
        _sweep(checkpoints, tmp_path / "sweep").run()
    message = str(info.value)
    assert "step-24 (org/tiny-neox @ step24)" in message and "step-32 (org/tiny-neox @ step32)" in message
    assert online.url in message and "huggingface.co" not in message
    assert online.count("/resolve/") == 0 and online.count("/refs") == 1
    assert not (tmp_path / "sweep" / "rows.jsonl").exists() or (tmp_path / "sweep" / "rows.jsonl").read_text() == ""


def test_offline_every_revision_is_looked_for_in_the_cache_first(online, monkeypatch):
    from huggingface_hub import constants

    ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")  # cached while online
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    ck.check_revisions(ck.hub("org/tiny-neox", "step8"))
    with pytest.raises(CheckpointError) as info:
        ck.check_revisions(ck.hub("org/tiny-neox", ["step0", "step8", "step16"]))
    message = str(info.value)
    assert "step-0 (org/tiny-neox @ step0)" in message and "step-16" in message and "step-8 " not in message
    assert "`hf download org/tiny-neox --revision step0`" in message
    before = len(online.requests)
    model, _ = ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")  # from the cache, offline
    assert len(online.requests) == before


def test_a_missing_repository_is_named_before_the_first_checkpoint(online):
    with pytest.raises(CheckpointError, match=r"org/none.*http://127\.0\.0\.1"):
        ck.check_revisions(ck.hub("org/none", ["step0"]))


# --------------------------------------------------------------------------------------------------------------------
# one message per failure (issue 19, item 3)


def test_a_missing_revision_at_load_time_names_the_endpoint(online):
    with pytest.raises(CheckpointError) as info:
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step24")[0], device="cpu")
    message = str(info.value)
    assert "revision 'step24' does not exist in org/tiny-neox on " + online.url in message
    assert "huggingface.co" not in message


def test_a_server_error_says_so_after_our_retries(online, monkeypatch):
    monkeypatch.setattr(hub, "HUB_RETRY_WAITS", (0.01,) * hub.HUB_RETRIES)
    online.fail(r"/api/models/org/tiny-neox/revision/step8", 500)
    with pytest.raises(CheckpointError, match=r"step-8.*server error.*retry") as info:
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")
    assert "does not exist" not in str(info.value)
    assert online.count("/revision/step8") == hub.HUB_RETRIES + 1  # huggingface_hub does not retry it; we do


def test_a_connection_reset_says_network(online, monkeypatch):
    monkeypatch.setattr(hub, "HUB_RETRY_WAITS", (0.01,) * hub.HUB_RETRIES)
    online.fail(r"/api/models/org/tiny-neox/revision/step8", "reset", after_bytes=0)
    with pytest.raises(CheckpointError, match=r"step-8.*http://127\.0\.0\.1.*HF_ENDPOINT"):
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")


def test_a_gated_repository_says_log_in(online):
    online.gated.add("org/tiny-neox")
    with pytest.raises(CheckpointError, match=r"org/tiny-neox.*gated.*`hf auth login`"):
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")


def test_the_command_named_in_messages_is_shipped_by_the_installed_huggingface_hub():
    command = hub.HUB_CLI
    scripts = {e.name for e in distribution("huggingface_hub").entry_points if e.group == "console_scripts"}
    assert command in scripts
    assert shutil.which(command) or (Path(sys.executable).parent / command).exists()
    assert hub.download_command("org/m", "step8") == f"{command} download org/m --revision step8"


# --------------------------------------------------------------------------------------------------------------------
# network faults (issue 18, part 3)


def test_transient_failures_are_retried_by_huggingface_hub_then_succeed(online, hub_folders):
    commit = online.repos["org/tiny-neox"]["step8"].commit
    weights = rf"/resolve/{commit}/model\.safetensors"
    online.fail(weights, 503, method="HEAD", times=2)  # its metadata: tried, then retried with backoff (1 s)
    online.fail(weights, "drop", method="GET", times=1, after_bytes=500)  # resumed
    model, _ = ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")
    assert _same_weights(model, hub_folders["org/tiny-neox", "step8"])
    assert online.count(f"/resolve/{commit}/model.safetensors", "HEAD") == 3
    assert online.count(f"/resolve/{commit}/model.safetensors", "GET") == 2  # dropped once, resumed by huggingface_hub


def test_a_sweep_skips_a_checkpoint_whose_download_fails_and_says_why(online, tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "HUB_RETRY_WAITS", (0.01,) * hub.HUB_RETRIES)
    online.fail(r"/revision/step16", 500)  # the revision's file listing
    sweep = _sweep(ck.hub("org/tiny-neox", ["step0", "step8", "step16"]), tmp_path / "s", skip_bad_checkpoints=True)
    with pytest.warns(CheckpointWarning, match="Skipped.*step-16"):
        result = sweep.run()
    assert [row["step"] for row in result.rows] == [0, 8]
    assert [row["step"] for row in result.skipped] == [16]
    assert "server error" in result.skipped[0]["skipped"] and "org/tiny-neox" in result.skipped[0]["skipped"]


FETCH = "from interpreto_anisotropy.commons.hub import fetch; fetch('org/tiny-neox', 'step8')"


@pytest.mark.slow  # a child process that imports the package
def test_a_download_killed_mid_file_resumes_without_refetching_complete_files(online, hub_folders, tmp_path):
    from huggingface_hub import constants

    online.bandwidth = 5000  # bytes per second: the weights (about 30 kB) take seconds, the small files do not
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    blobs = Path(constants.HF_HUB_CACHE) / "models--org--tiny-neox" / "blobs"
    child = subprocess.Popen([sys.executable, "-c", FETCH], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while online.count("/model.safetensors", "GET") == 0 and time.monotonic() < deadline:
            assert child.poll() is None, "the download ended before it could be killed"
            time.sleep(0.05)
        time.sleep(0.5)  # mid-file: the server sends the weights in seconds
        assert child.poll() is None, "the download ended before it could be killed"
    finally:
        child.kill()
        child.wait()
    weights = online.repos["org/tiny-neox"]["step8"].etag("model.safetensors")
    assert list(blobs.glob(f"{weights}*.incomplete")) and not (blobs / weights).exists()  # the weights were cut
    online.bandwidth = None
    model, _ = ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")
    assert _same_weights(model, hub_folders["org/tiny-neox", "step8"])
    for name in ("config.json", "tokenizer.json"):
        assert online.count(f"/{name}", "GET") == 1, name  # fetched once, by the killed process
    assert online.count("/model.safetensors", "GET") == 2 and online.ranged == []  # the partial file was not used


# --------------------------------------------------------------------------------------------------------------------
# a Hub that never answers (issue 27, item 3)

#: The deadline the stalled-server tests give, in seconds.
STALL_TIMEOUT = 2.0
#: The bound each call must return within against a Hub that accepts connections and never answers: 3x the deadline
#: (one request waits it out: the refs listing, or the revision's info; first in a process, huggingface_hub's
#: agent-registry fetch waits at most the deadline too). Before issue 27 the calls waited as long as the server
#: stalled: forever; docs/reliability.md gives these figures.
STALL_BOUND = 3 * STALL_TIMEOUT


@pytest.fixture
def stalled(online, monkeypatch):
    """The Hub of this test accepts connections and never answers."""
    from helpers.stalled_server import StalledServer
    from huggingface_hub import constants

    with StalledServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        yield server


def _timed(call):
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as info:
        call()
    return time.perf_counter() - start, str(info.value)


def test_check_revisions_fails_within_the_deadline_on_a_stalled_hub(stalled):
    checkpoints = ck.hub("org/tiny-neox", ["step0", "step8"])
    elapsed, message = _timed(lambda: ck.check_revisions(checkpoints, hub_timeout=STALL_TIMEOUT))
    print(f"check_revisions against a stalled Hub: {elapsed:.2f} s (deadline {STALL_TIMEOUT:g} s)")
    assert STALL_TIMEOUT * 0.9 <= elapsed < STALL_BOUND
    assert stalled.accepted >= 1
    assert f"did not answer within hub_timeout = {STALL_TIMEOUT:g} s" in message
    assert stalled.url in message and "org/tiny-neox" in message and "--hub-timeout" in message


def test_load_checkpoint_fails_within_the_deadline_on_a_stalled_hub(stalled):
    checkpoint = ck.hub("org/tiny-neox", "step8")[0]
    elapsed, message = _timed(lambda: ck.load_checkpoint(checkpoint, device="cpu", hub_timeout=STALL_TIMEOUT))
    print(f"load_checkpoint against a stalled Hub: {elapsed:.2f} s (deadline {STALL_TIMEOUT:g} s)")
    assert STALL_TIMEOUT * 0.9 <= elapsed < STALL_BOUND
    assert re.search(rf"hub_timeout\W+{STALL_TIMEOUT:g}\b", message)
    assert stalled.url in message and re.search("'org/tiny-neox'.*'step8'", message) and "--hub-timeout" in message


def test_the_deadline_is_an_option_of_the_sweep_and_the_cli(tmp_path):
    from interpreto_anisotropy.cli import build_parser

    local = [ck.Checkpoint(0, str(tmp_path))]
    assert _sweep(local, tmp_path / "s").plan.options.hub_timeout == hub.DEFAULT_HUB_TIMEOUT == 10.0
    assert _sweep(local, tmp_path / "s", hub_timeout=2).plan.options.hub_timeout == 2.0
    for bad in (0, -1, "3", float("inf"), True):
        with pytest.raises(InvalidInputError, match=rf"hub_timeout.*{re.escape(repr(bad))}"):
            _sweep(local, tmp_path / "s", hub_timeout=bad)
    base = ["sweep", "--model", "m", "--texts", "t", "--split-point", "1", "--out", "o"]
    assert build_parser().parse_args(base).hub_timeout == hub.DEFAULT_HUB_TIMEOUT
    assert build_parser().parse_args([*base, "--hub-timeout", "2.5"]).hub_timeout == 2.5
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--hub-timeout", "0"])


#: Seconds huggingface_hub sleeps before it resumes a download (GET) that timed out; it retries a file's metadata
#: (HEAD) at once. The repeat is refused (`commons.hub.HubStalled`): before, a GET was tried 6 times with 1 s between
#: tries, a HEAD 7 times with 1 to 8 s between (30 s with a 1 s deadline, 93 s with 3 s).
MID_STALL_WAITS = {"GET": 1.0, "HEAD": 0.0}


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_file_that_stalls_fails_within_the_deadline_not_huggingface_hubs_retries(online, method):
    online.fail(r"model\.safetensors", "slow", method=method, delay=3 * STALL_TIMEOUT)  # > the deadline per request
    checkpoint = ck.hub("org/tiny-neox", "step8")[0]
    elapsed, message = _timed(lambda: ck.load_checkpoint(checkpoint, device="cpu", hub_timeout=STALL_TIMEOUT))
    print(f"load_checkpoint, {method} of the weights stalled: {elapsed:.2f} s (deadline {STALL_TIMEOUT:g} s)")
    assert online.count("/model.safetensors", method) == 1  # sent once: huggingface_hub's repeat was refused
    assert STALL_TIMEOUT * 0.9 <= elapsed < STALL_BOUND + MID_STALL_WAITS[method]
    assert f"did not answer within hub_timeout = {STALL_TIMEOUT:g} s" in message
    assert online.url in message and "--hub-timeout" in message
    online.faults.clear()  # the Hub recovers: a later call sends the request again
    model, _ = ck.load_checkpoint(checkpoint, device="cpu", hub_timeout=STALL_TIMEOUT)
    assert online.count("/model.safetensors", method) == 2


def test_a_slow_but_steady_download_is_not_cut_off(online, hub_folders, monkeypatch):
    from helpers import hub_server

    monkeypatch.setattr(hub_server, "_CHUNK", 2048)
    online.bandwidth = 8192  # bytes per second: a chunk every 0.25 s, the weights (about 30 kB) in about 4 s
    checkpoint = ck.hub("org/tiny-neox", "step8")[0]
    start = time.perf_counter()
    model, _ = ck.load_checkpoint(checkpoint, device="cpu", hub_timeout=1.0)
    elapsed = time.perf_counter() - start
    assert elapsed > 3 * 1.0  # longer than the deadline, many times: a per-read deadline, not a whole-call one
    assert _same_weights(model, hub_folders["org/tiny-neox", "step8"])
    assert online.count("/model.safetensors", "GET") == 1  # never cut off and resumed
