# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The Hugging Face cache as a sweep sees it: which revisions it held before the sweep, how much a revision
weighs, and evicting the revisions the sweep fetched (with huggingface_hub's own `scan_cache_dir` and
`delete_revisions`, which keep every file another revision still links to).

Examples:
    >>> before = cached_before("runs/sweep/hub_cache_before.json", "~/.cache/huggingface/hub",
    ...                        ["EleutherAI/pythia-70m"])  # doctest: +SKIP
    >>> evict("~/.cache/huggingface/hub", ["<commit the sweep fetched>"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..commons.files import write_atomically
from ..commons.json_files import load_json
from ..errors import ResultsStoreError

__all__ = ["BEFORE_FILE", "cached_before", "evict", "revision_bytes", "snapshot_commits"]

#: The file of a results directory recording the snapshots its Hub repositories had before its first run.
BEFORE_FILE = "hub_cache_before.json"


def snapshot_commits(cache: str | os.PathLike, repo_id: str) -> set[str]:
    """The commits of a model repository that have a snapshot folder in the cache (complete or not)."""
    from huggingface_hub.file_download import repo_folder_name

    snapshots = Path(cache).expanduser() / repo_folder_name(repo_id=repo_id, repo_type="model") / "snapshots"
    try:
        return {entry.name for entry in snapshots.iterdir() if entry.is_dir()}
    except OSError:  # no such folder: nothing of this repository is cached
        return set()


def cached_before(record: str | os.PathLike, cache: str | os.PathLike, repos: Iterable[str]) -> dict[str, set[str]]:
    """The commits each repository had in the cache before the sweep's first run; records the new repositories.

    Args:
        record: The results directory's `BEFORE_FILE`.
        cache: The Hugging Face cache folder.
        repos: The repositories the sweep fetches from.

    Returns:
        repository -> commits that were cached before (as recorded by an earlier run of the sweep on the same cache;
        listed now for a repository or a cache the record does not know).
    """
    record, cache = Path(record), str(Path(cache).expanduser().resolve())
    try:
        stored = load_json(record) if record.exists() else {}
    except ResultsStoreError:
        stored = {}  # a damaged record is listed again
    known = stored.get("snapshots", {}) if isinstance(stored, dict) and stored.get("cache") == cache else {}
    before = {repo: set(known[repo]) if repo in known else snapshot_commits(cache, repo) for repo in repos}
    if set(before) - set(known):
        merged = {**known, **{repo: sorted(commits) for repo, commits in before.items()}}
        write_atomically(record, json.dumps({"cache": cache, "snapshots": merged}, indent=1, sort_keys=True))
    return before


def revision_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the files a snapshot folder holds, each blob counted once (what evicting it frees at most)."""
    blobs = {os.path.realpath(path) for path in Path(folder).rglob("*") if path.is_file()}
    return sum(os.path.getsize(blob) for blob in blobs)


def evict(cache: str | os.PathLike, commits: Iterable[str]) -> int:
    """Deletes revisions (by commit) from the cache, keeping the blobs other revisions still link to.

    Args:
        cache: The Hugging Face cache folder.
        commits: The revisions' commits.

    Returns:
        The bytes freed, as huggingface_hub reckons them.
    """
    from huggingface_hub import scan_cache_dir

    strategy = scan_cache_dir(cache).delete_revisions(*commits)
    strategy.execute()
    return strategy.expected_freed_size
