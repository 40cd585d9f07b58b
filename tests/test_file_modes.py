# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Files the library writes get the mode a plain ``open`` would give them (the umask's, 0644 typically), not the
0600 of temporary files; the texts files the docs make are ignored by git."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from interpreto_anisotropy.commons.files import default_file_mode, write_atomically

ROOT = Path(__file__).resolve().parents[1]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_default_mode_follows_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        assert default_file_mode() == 0o640
        assert _mode(write_atomically(tmp_path / "a.bin", b"x")) == 0o640
    finally:
        os.umask(previous)
    assert _mode(write_atomically(tmp_path / "b.bin", b"x")) == 0o666 & ~previous


def test_the_umask_is_read_without_being_changed(tmp_path, monkeypatch):
    from interpreto_anisotropy.commons import files

    previous = os.umask(0o027)
    try:
        calls = []
        monkeypatch.setattr(os, "umask", lambda *args: calls.append(args))  # setting the umask is process-wide
        assert default_file_mode() == 0o640  # from /proc/self/status on Linux
        monkeypatch.setattr(files, "_PROC_STATUS", str(tmp_path / "missing"))
        assert default_file_mode() == 0o640  # from a probe file elsewhere
        assert calls == []
    finally:
        monkeypatch.undo()
        os.umask(previous)


def test_checkpoint_and_tangent_files_are_not_private(toy_checkpoints, tmp_path):
    expected = default_file_mode()
    for path in Path(toy_checkpoints.checkpoints[0]).iterdir():
        assert _mode(path) == expected, f"{path.name} has mode {oct(_mode(path))}"


def test_texts_files_are_ignored_by_git():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "texts.jsonl" in ignored and "texts.txt" in ignored
