# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Pytest fixtures around `hub_server.HubServer`: tiny repositories, and the Hub libraries pointed at the server.

Use them in a test module with ``pytest_plugins = ["helpers.hub_fixtures"]``.

* `hub_folders` (session): tiny saved models, one folder per revision: ``org/tiny-neox`` (GPT-NeoX, branches
  ``step0``, ``step8``, ``step16``, Pythia's naming, each with other weights), ``org/tiny-smol`` (GPT-NeoX, branches
  ``step-0``, ``step-8``, SmolLM2's naming) and ``org/tiny-bert`` (BERT masked LM, branch ``step-4``).
* `hub`: a running `HubServer` serving them (fresh faults and counts in each test).
* `online`: the server as the Hub of this test: `HF_ENDPOINT` and the offline flags unset in the environment and in
  `huggingface_hub.constants` (read at import time), a private `HF_HOME` and cache under `tmp_path`, no token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .hub_server import HubServer

__all__ = ["REPOS", "hub", "hub_folders", "online", "save_tiny"]

#: repository -> revisions, as served by `hub`.
REPOS: dict[str, tuple[str, ...]] = {
    "org/tiny-neox": ("step0", "step8", "step16"),
    "org/tiny-smol": ("step-0", "step-8"),
    "org/tiny-bert": ("step-4",),
}

_WORDS = "the a cat dog sat on mat and ran to big small red blue".split()


def tiny_tokenizer():
    """A word-level tokenizer of 19 tokens with pad, eos, mask and unk tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[EOS]": 1, "[PAD]": 2, "[MASK]": 3, "[BOS]": 4}
    vocab.update({w: i + 5 for i, w in enumerate(_WORDS)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", mask_token="[MASK]", eos_token="[EOS]", pad_token="[PAD]"
    )


def save_tiny(folder: Path, *, arch: str = "neox", seed: int = 0) -> Path:
    """Saves a tiny randomly initialised model (`arch` "neox" or "bert") and its tokenizer into `folder`."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    common = {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2}
    if arch == "neox":
        model = GPTNeoXForCausalLM(
            GPTNeoXConfig(**common, intermediate_size=32, max_position_embeddings=64, bos_token_id=4, eos_token_id=1)
        )
    else:
        model = BertForMaskedLM(BertConfig(**common, intermediate_size=32, max_position_embeddings=64, pad_token_id=2))
    model.eval().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def hub_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """(repository, revision) -> the folder holding that revision's files."""
    root = tmp_path_factory.mktemp("hub-repos")
    folders = {}
    for index, (repo, revisions) in enumerate(REPOS.items()):
        for seed, revision in enumerate(revisions):
            folder = root / repo.replace("/", "--") / revision
            save_tiny(folder, arch="bert" if "bert" in repo else "neox", seed=100 * index + seed)
            folders[repo, revision] = folder
    return folders


@pytest.fixture
def hub(hub_folders: dict[tuple[str, str], Path]):
    """A running `HubServer` serving `REPOS`; the last revision of each repository is also its `main` branch."""
    server = HubServer()
    for (repo, revision), folder in hub_folders.items():
        server.add_revision(repo, revision, folder, main=revision == REPOS[repo][-1])
    with server:
        yield server


@pytest.fixture
def online(hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HubServer:
    """Points huggingface_hub and transformers at `hub`, online, with an empty private cache; yields the server."""
    from huggingface_hub import constants

    home = tmp_path / "hf-home"
    cache = home / "hub"
    cache.mkdir(parents=True)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # huggingface_hub reads these once, at import time.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    return hub
