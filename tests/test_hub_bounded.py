# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One bounded path for every Hub call (issue 40, item 1): `commons.hub.hub_call`.

Against a Hub that stalls (accepting and silent, or headers then silence), every entry point (the sweep's revision
check, checkpoint loading, `TangentExplainer.from_pretrained`, `push_to_hub`) ends with our error naming the
repository and the server within `hub_timeout` + 5 s. One server error on each kind of request a sweep or a tangent
load makes (refs listing, revision lookup, a file's HEAD, a file's GET) is retried: the sweep's rows equal a
fault-free run's, the loaded tangent is the pushed one. A 4xx is not retried.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy import checkpoints as ck
from interpreto_anisotropy.commons import hub
from interpreto_anisotropy.errors import CheckpointError, ResultsStoreError

pytest_plugins = ["helpers.hub_fixtures"]
pytestmark = [
    pytest.mark.filterwarnings("ignore::interpreto_anisotropy.errors.DegenerateStatisticsWarning"),
    pytest.mark.filterwarnings("ignore:.*pad token:UserWarning"),
]

WORDS = "the a cat dog sat on mat and ran to big small red blue".split()
TEXTS = [" ".join(WORDS[start:] + WORDS[:start]) for start in range(8)]
#: The deadline of these tests, in seconds; the bound is the issue's: the deadline plus 5 s.
TIMEOUT = 2.0
BOUND = TIMEOUT + 5.0


@pytest.fixture(scope="module")
def fitted(gpt_neox_mwsp, fit_texts):
    return ia.PCATangent(gpt_neox_mwsp, nb_concepts=3).fit(fit_texts[:6])


@pytest.fixture
def quick_retries(monkeypatch):
    """The retries' waits shortened (their number kept): the tests count tries, not seconds."""
    monkeypatch.setattr(hub, "HUB_RETRY_WAITS", (0.01,) * len(hub.HUB_RETRY_WAITS))


def _stalled_hub(monkeypatch, headers: bool):
    from helpers.stalled_server import StalledServer
    from huggingface_hub import constants

    server = StalledServer(headers=headers)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    return server


ENTRY_POINTS = {  # name: (the error it raises, the repository it names, the call)
    "check_revisions": (
        CheckpointError,
        "org/tiny-neox",
        lambda fitted, mwsp: ck.check_revisions(ck.hub("org/tiny-neox", ["step8"]), hub_timeout=TIMEOUT),
    ),
    "load_checkpoint": (
        CheckpointError,
        "org/tiny-neox",
        lambda fitted, mwsp: ck.load_checkpoint(
            ck.hub("org/tiny-neox", "step8")[0], device="cpu", hub_timeout=TIMEOUT
        ),
    ),
    "from_pretrained": (
        ResultsStoreError,
        "me/tangent",
        lambda fitted, mwsp: ia.TangentExplainer.from_pretrained("me/tangent", mwsp, hub_timeout=TIMEOUT),
    ),
    "push_to_hub": (
        ResultsStoreError,
        "me/tangent",
        lambda fitted, mwsp: fitted.push_to_hub("me/tangent", token="hf_test", hub_timeout=TIMEOUT),
    ),
}


@pytest.mark.parametrize("headers", [False, True], ids=["silent", "headers-then-silence"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_hub_entry_point_ends_within_the_deadline_on_a_stalled_hub(
    online, monkeypatch, fitted, gpt_neox_mwsp, entry, headers
):
    server = _stalled_hub(monkeypatch, headers)
    url = server.url
    with server:
        start = time.perf_counter()
        error, repo, call = ENTRY_POINTS[entry]
        with pytest.raises(error, match=re.escape(repo)) as info:
            call(fitted, gpt_neox_mwsp)
        elapsed = time.perf_counter() - start
    print(f"{entry} against a stalled Hub ({'headers' if headers else 'silent'}): {elapsed:.2f} s")
    assert elapsed < BOUND
    assert server.accepted >= 1
    message = str(info.value)
    assert url in message and re.search(rf"hub_timeout\W+{TIMEOUT:g}\b", message)


def _comparable(rows):
    return [{k: v for k, v in row.items() if k not in {"wall_seconds", "download_seconds"}} for row in rows]


def _sweep(results_dir: Path):
    checkpoints = ck.hub("org/tiny-neox", ["step0", "step8"])
    sweep = ia.CheckpointSweep(
        checkpoints, split_point=0, texts=TEXTS, nb_concepts=2, n_controls=2, results_dir=results_dir, progress=False
    )
    return sweep.run()


def _empty_cache() -> None:
    from huggingface_hub import constants

    shutil.rmtree(constants.HF_HUB_CACHE)
    Path(constants.HF_HUB_CACHE).mkdir()


#: One request of each kind a sweep makes: (path pattern, method).
SWEEP_REQUESTS = {
    "listing": (r"/api/models/org/tiny-neox/refs$", "GET"),
    "revision lookup": (r"/api/models/org/tiny-neox/revision/step8$", "GET"),
    "file HEAD": (r"/resolve/[0-9a-f]{40}/config\.json$", "HEAD"),
    "file GET": (r"/resolve/[0-9a-f]{40}/model\.safetensors$", "GET"),
}


@pytest.mark.parametrize("request_kind", sorted(SWEEP_REQUESTS))
def test_one_server_error_on_any_request_of_a_sweep_leaves_its_rows_unchanged(
    online, quick_retries, tmp_path, request_kind
):
    clean = _sweep(tmp_path / "clean")
    _empty_cache()
    pattern, method = SWEEP_REQUESTS[request_kind]
    fault = online.fail(pattern, 500, method=method, times=1)
    faulted = _sweep(tmp_path / "faulted")
    assert fault.served == 1  # the fault hit the sweep once
    assert len(faulted.rows) == 2 and faulted.skipped == []
    assert _comparable(faulted.rows) == _comparable(clean.rows)


TANGENT_REQUESTS = {
    "revision lookup": (r"/api/models/me/tangent/revision/main$", "GET"),
    "file HEAD": (r"/me/tangent/resolve/.*/subspace\.safetensors$", "HEAD"),
    "file GET": (r"/me/tangent/resolve/.*/subspace\.safetensors$", "GET"),
    "push": (r"/api/models/me/tangent/commit/main$", "POST"),
}


@pytest.mark.parametrize("request_kind", sorted(TANGENT_REQUESTS))
def test_one_server_error_on_any_request_of_a_tangent_push_or_load_is_retried(
    online, quick_retries, fitted, gpt_neox_mwsp, request_kind
):
    pattern, method = TANGENT_REQUESTS[request_kind]
    fault = online.fail(pattern, 503, method=method, times=1)
    fitted.push_to_hub("me/tangent", token="hf_test")
    loaded = ia.TangentExplainer.from_pretrained("me/tangent", gpt_neox_mwsp)
    assert fault.served == 1
    assert torch.equal(loaded.subspace.basis, fitted.subspace.basis)


def test_a_lasting_server_error_ends_after_the_stated_tries_and_a_4xx_is_not_retried(online, quick_retries):
    online.fail(r"/api/models/org/tiny-neox/revision/step8$", 500)
    with pytest.raises(CheckpointError, match=rf"step-8.*tried {hub.HUB_RETRIES + 1} times") as info:
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step8")[0], device="cpu")
    assert re.search("'org/tiny-neox'.*'step8'", str(info.value)) and online.url in str(info.value)
    assert online.count("/revision/step8$") == hub.HUB_RETRIES + 1
    online.faults.clear()
    online.fail(r"/api/models/org/tiny-neox/revision/step16$", 403)
    with pytest.raises(CheckpointError, match=r"step-16.*HF_TOKEN"):
        ck.load_checkpoint(ck.hub("org/tiny-neox", "step16")[0], device="cpu")
    assert online.count("/revision/step16$") == 1
