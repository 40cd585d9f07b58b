# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Files that cannot be written are our errors: `commons.files.write_atomically` on read-only and full disks.

Root ignores file permissions, so the read-only folder is tested for real only under another user (or a root without
CAP_DAC_OVERRIDE); the same failure is also simulated, as a full disk is, by making the operating system's calls
raise.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile

import pytest

from interpreto_anisotropy.commons.files import write_atomically
from interpreto_anisotropy.errors import AnisotropyError, ResultsStoreError


def _assert_unwritable(error: ResultsStoreError, path, code: int) -> None:
    assert isinstance(error, AnisotropyError) and isinstance(error, OSError)  # `except OSError` still catches it
    assert error.errno == code
    assert str(path) in str(error)


def _writes_into_read_only_folders(folder) -> bool:
    """True for root (os.geteuid() == 0) with its usual capabilities: it ignores the folder's permissions."""
    try:
        (folder / "probe").touch()
    except PermissionError:
        return False
    (folder / "probe").unlink()
    return True


def test_a_read_only_folder_is_our_error(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if _writes_into_read_only_folders(folder):
            pytest.skip(f"this user (uid {os.geteuid()}) writes into read-only folders")
        with pytest.raises(ResultsStoreError, match=re.escape(str(folder / "rows.jsonl"))) as error:
            write_atomically(folder / "rows.jsonl", "{}\n")
        _assert_unwritable(error.value, folder / "rows.jsonl", errno.EACCES)
        with pytest.raises(ResultsStoreError):
            write_atomically(folder / "new" / "rows.jsonl", "{}\n")  # its folder cannot be created either
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


def test_a_temporary_file_that_cannot_be_created_is_our_error(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    with pytest.raises(ResultsStoreError, match=re.escape(str(tmp_path / "rows.jsonl"))) as error:
        write_atomically(tmp_path / "rows.jsonl", "{}\n")
    _assert_unwritable(error.value, tmp_path / "rows.jsonl", errno.EACCES)


@pytest.mark.parametrize("call", ["fsync", "replace"])
def test_a_full_disk_is_our_error_and_leaves_no_temporary_file(tmp_path, monkeypatch, call):
    (tmp_path / "rows.jsonl").write_text("old\n")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, call, full)
    with pytest.raises(ResultsStoreError, match=re.escape(str(tmp_path / "rows.jsonl"))) as error:
        write_atomically(tmp_path / "rows.jsonl", "new\n")
    _assert_unwritable(error.value, tmp_path / "rows.jsonl", errno.ENOSPC)
    assert [path.name for path in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left
    assert (tmp_path / "rows.jsonl").read_text() == "old\n"  # the old version untouched


def test_a_folder_in_place_of_the_file_is_our_error(tmp_path):
    (tmp_path / "index.html").mkdir()
    with pytest.raises(ResultsStoreError, match=re.escape(str(tmp_path / "index.html"))) as error:
        write_atomically(tmp_path / "index.html", "<html></html>")
    assert error.value.errno == errno.EISDIR
    assert [path.name for path in tmp_path.iterdir()] == ["index.html"]


def test_an_interrupted_write_leaves_no_temporary_file_and_is_not_wrapped(tmp_path, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "rows.jsonl", "{}\n")
    assert list(tmp_path.iterdir()) == []
