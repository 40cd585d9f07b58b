# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The local Hub-compatible test server answers huggingface_hub and transformers as the Hub does (no mock)."""

from __future__ import annotations

import pytest
import torch

pytest_plugins = ["helpers.hub_fixtures"]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_libraries_list_refs_info_and_download_from_the_server(online, hub_folders):
    import huggingface_hub
    from huggingface_hub import HfApi
    from transformers import AutoModelForCausalLM

    api = HfApi()
    refs = api.list_repo_refs("org/tiny-neox")
    assert {b.name for b in refs.branches} == {"step0", "step8", "step16", "main"}
    info = api.model_info("org/tiny-neox", revision="step8")
    assert info.sha == online.repos["org/tiny-neox"]["step8"].commit
    assert "model.safetensors" in {s.rfilename for s in info.siblings}
    folder = huggingface_hub.snapshot_download("org/tiny-neox", revision="step8")
    assert folder.endswith(info.sha)
    model = AutoModelForCausalLM.from_pretrained("org/tiny-neox", revision="step16")
    expected = AutoModelForCausalLM.from_pretrained(hub_folders["org/tiny-neox", "step16"])
    for key, value in model.state_dict().items():
        assert torch.equal(value, expected.state_dict()[key]), key
    commit = online.repos["org/tiny-neox"]["step16"].commit
    assert online.count(f"/resolve/{commit}/model.safetensors", "GET") == 1  # transformers resolves the branch first
    assert online.unknown == []


def test_missing_repo_revision_and_file_are_the_hub_errors(online):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny-neox", "config.json", revision="step999")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("org/tiny-neox", "nothing.json", revision="step8")
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info("org/none")


def test_faults_bandwidth_and_resume(online):
    from huggingface_hub import hf_hub_download

    online.fail(r"/resolve/step8/model\.safetensors", "drop", method="GET", times=1, after_bytes=1000)
    path = hf_hub_download("org/tiny-neox", "model.safetensors", revision="step8")
    with open(path, "rb") as handle:
        assert handle.read() == online.repos["org/tiny-neox"]["step8"].files["model.safetensors"]
    gets = [p for m, p in online.requests if m == "GET" and p.endswith("step8/model.safetensors")]
    assert len(gets) == 2  # dropped once, then resumed
