# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The Hub deadline holds on whichever HTTP library the installed huggingface_hub uses (httpx, httpx2, or requests
before 1.0: `commons.hub`); `make test-compat` runs this on huggingface_hub 0.36 and 2.x.

The other stalled-Hub tests (tests/test_hub_checkpoints.py) need the local test Hub server, whose fixtures serve
huggingface_hub 1.x and later only; this one needs just a server that accepts connections and never answers.
"""

from __future__ import annotations

import time

import pytest
from helpers.stalled_server import StalledServer

import interpreto_anisotropy.sweeps.checkpoints as ck
from interpreto_anisotropy.commons import hub
from interpreto_anisotropy.errors import CheckpointError

DEADLINE = 2.0


@pytest.fixture
def online_sessions(monkeypatch):
    """Online for this test; huggingface_hub 0.x's per-thread sessions, made offline or online, dropped around it."""
    from huggingface_hub import constants, utils

    reset = getattr(utils, "reset_sessions", lambda: None)  # 0.x: a session's adapters follow HF_HUB_OFFLINE
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    reset()
    yield constants
    monkeypatch.undo()
    reset()


def test_listing_the_revisions_of_a_stalled_hub_fails_within_the_deadline(online_sessions, monkeypatch):
    constants = online_sessions
    with StalledServer() as server:
        url = server.url
        monkeypatch.setattr(constants, "ENDPOINT", url)
        start = time.perf_counter()
        with pytest.raises(CheckpointError) as info:
            ck.check_revisions(ck.hub("org/tiny-neox", ["step0"]), hub_timeout=DEADLINE)
        elapsed = time.perf_counter() - start
    client = "requests" if hub.httpx is None else hub.httpx.__name__
    print(f"check_revisions against a stalled Hub, huggingface_hub on {client}: {elapsed:.2f} s")
    assert DEADLINE * 0.9 <= elapsed < 3 * DEADLINE  # huggingface_hub sets no timeout on this listing: forever
    assert server.accepted >= 1
    assert f"did not answer within hub_timeout = {DEADLINE:g} s" in str(info.value) and url in str(info.value)
