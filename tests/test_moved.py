# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Modules that moved still import under their former names, with a FutureWarning naming the new module."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

import interpreto_anisotropy  # noqa: F401 (installs the finder)
from interpreto_anisotropy import _moved


def _fresh_import(former: str):
    sys.modules.pop(former, None)
    with pytest.warns(FutureWarning, match=re.escape(former)) as record:
        module = importlib.import_module(former)
    return module, record


@pytest.mark.parametrize("former", sorted(_moved.MOVED))
def test_a_former_module_hands_out_the_new_modules_names(former):
    module, record = _fresh_import(f"interpreto_anisotropy.{former}")
    new = importlib.import_module(f"interpreto_anisotropy.{_moved.MOVED[former]}")
    assert new.__name__ in str(record[0].message)
    public = [name for name in dir(new) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(new, name) for name in public)


def test_the_finder_maps_only_what_it_lists(monkeypatch):
    monkeypatch.setitem(_moved.MOVED, "commons.former_tensors", "commons.tensors")
    module, record = _fresh_import("interpreto_anisotropy.commons.former_tensors")
    from interpreto_anisotropy.commons import tensors

    assert "interpreto_anisotropy.commons.tensors" in str(record[0].message)
    assert module.check_finite is tensors.check_finite and dir(module) == dir(tensors)
    sys.modules.pop("interpreto_anisotropy.commons.former_tensors", None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("interpreto_anisotropy.commons.never_existed")
