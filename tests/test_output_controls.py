# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What a user can configure of the package's output: warning categories, the logger, and the progress bars.

* Every `warnings.warn` of the package names a category of its own, a subclass of `AnisotropyWarning`; each is
  exported, documented, and filtered alone by `warnings.filterwarnings`.
* Information goes to the "interpreto_anisotropy" logger hierarchy (a `NullHandler` on the package's), not to
  `warnings` or stderr.
* `TQDM_DISABLE` and the package's switch hide every bar, whatever a call asks; `progress=None` shows one only when
  interactive; `fit(texts, progress=True)` shows one.
"""

from __future__ import annotations

import ast
import inspect
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import interpreto_anisotropy as ia
from interpreto_anisotropy import errors
from interpreto_anisotropy.commons import hub, progress
from interpreto_anisotropy.reading.batching import ensure_pad_token
from interpreto_anisotropy.sweeps.checkpoints import Checkpoint
from interpreto_anisotropy.sweeps.resume import PreviousDrift
from interpreto_anisotropy.tangents.controls import warn_if_anti_conservative

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "interpreto_anisotropy"
WARNINGS = {
    name: value
    for name, value in vars(errors).items()
    if inspect.isclass(value) and issubclass(value, Warning) and value.__module__ == errors.__name__
}


def _warn_calls() -> list[tuple[str, int, ast.expr | None]]:
    """(file, line, category expression) of every `warnings.warn(...)` call in the package's source."""
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn":
                keyword = next((k.value for k in node.keywords if k.arg == "category"), None)
                category = node.args[1] if len(node.args) > 1 else keyword
                calls.append((str(path.relative_to(SRC)), node.lineno, category))
    return calls


def test_every_warning_of_the_package_names_a_category_of_its_own():
    calls = _warn_calls()
    assert len(calls) >= 20
    used = set()
    for where, line, category in calls:
        assert isinstance(category, ast.Name), f"{where}:{line} warns without a category of ours"
        if category.id == "FutureWarning":  # a former name of errors.py or a moved module (_moved.py): deprecated
            continue
        assert category.id in WARNINGS, f"{where}:{line} warns with {category.id}, not a class of errors.py"
        used.add(category.id)
    assert set(WARNINGS) - used == {"AnisotropyWarning"}  # the base class only filters; every kind is warned
    assert all(issubclass(value, errors.AnisotropyWarning) for value in WARNINGS.values())
    assert issubclass(errors.AnisotropyWarning, UserWarning)  # filters written for UserWarning keep working
    assert set(WARNINGS) <= set(errors.__all__)
    documented = (ROOT / "docs" / "api" / "errors.md").read_text()
    assert all(f"- {name}\n" in documented for name in WARNINGS)
    assert not any(name in ia.__all__ for name in WARNINGS)  # reached through ia.errors: the top level stays short


def _three_kinds() -> list[type[Warning]]:
    """Warn three kinds of ours for real, through the package's own code, and return the categories recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", append=True)  # after the caller's filters, which decide
        ensure_pad_token(SimpleNamespace(pad_token=None, eos_token="</s>"), source="toy")
        warn_if_anti_conservative(16, 64)
        atoms = torch.eye(4, 6, dtype=torch.float64)
        ia.Subspace.from_dictionary(torch.cat([atoms, atoms[:1]]))  # one atom twice: dropped
    return [item.category for item in caught]


def test_each_category_is_warned_where_it_should_be_and_filtered_alone():
    kinds = [errors.ReadingWarning, errors.DegenerateStatisticsWarning, errors.DegenerateStatisticsWarning]
    assert _three_kinds() == kinds
    for silenced in kinds:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=silenced)
            assert _three_kinds() == [kind for kind in kinds if kind is not silenced]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=errors.AnisotropyWarning)
        assert _three_kinds() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.DegenerateStatisticsWarning)
        with pytest.raises(errors.DegenerateStatisticsWarning, match=r"\b8 atoms.*\b4 dimensions"):
            ia.Subspace.from_dictionary(torch.eye(4, 6).repeat(2, 1))


def test_a_hub_that_cannot_list_revisions_is_a_hub_access_warning(monkeypatch):
    from huggingface_hub import HfApi

    def failing(self, repo_id, **kwargs):
        raise ValueError("the server sent nonsense")

    monkeypatch.setattr(HfApi, "list_repo_refs", failing)
    with pytest.warns(errors.EnvironmentWarning, match="org/model"):
        assert hub._refs("org/model", timeout=5.0) is None


def test_a_missing_previous_tangent_is_a_missing_drift_warning(tmp_path):
    store = SimpleNamespace(tangent=lambda layer, step: None, tangent_path=lambda layer, step: tmp_path / f"{step}")
    drift = PreviousDrift(store, [Checkpoint(0, "a"), Checkpoint(5, "b")])
    with pytest.warns(errors.ResultsFileWarning, match=r"step 5\b.*split.point.*\b1\b"):
        fields = drift.of({"step": 5, "layer": 1}, warn=True)
    assert fields == {"drift_previous_mean_angle": None, "drift_previous_max_angle": None, "drift_previous_step": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drift.of({"step": 5, "layer": 1}, warn=False)  # a refresh says nothing


def test_the_package_logger_has_a_null_handler_and_its_children_carry_the_information(caplog, monkeypatch):
    package = logging.getLogger("interpreto_anisotropy")
    assert any(isinstance(handler, logging.NullHandler) for handler in package.handlers)
    from interpreto_anisotropy.sweeps import runner

    assert runner.logger.name == "interpreto_anisotropy.sweeps.runner" and runner.logger.parent is package
    sweep = SimpleNamespace(announce=None)
    with caplog.at_level(logging.INFO, logger="interpreto_anisotropy"):
        runner.CheckpointSweep._announce(sweep, "about 2 s per checkpoint")
        said = []
        sweep.announce = said.append
        runner.CheckpointSweep._announce(sweep, "to the callable")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("interpreto_anisotropy.sweeps.runner", logging.INFO, "about 2 s per checkpoint")
    ]
    assert said == ["to the callable"]


def test_a_loaded_checkpoint_is_logged_not_warned(toy_checkpoints, caplog):
    from interpreto_anisotropy.sweeps.checkpoints import load_checkpoint, local

    first = local(str(toy_checkpoints.out_dir / "checkpoint-*"))[0]
    with caplog.at_level(logging.INFO, logger="interpreto_anisotropy"):
        model, _ = load_checkpoint(first, device="cpu")
    [record] = [r for r in caplog.records if r.name == "interpreto_anisotropy.sweeps.checkpoints"]
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        f"Loaded checkpoint {first.name} ({type(model).__name__} on cpu) from local checkpoint {first.source!r}."
    )


# ---------------------------------------------------------------------------------------------- progress bars
def _bar_text(capsys, **options) -> str:
    for _ in progress.progress_bar(range(3), desc="Counting", **options):
        pass
    return capsys.readouterr().err


def test_progress_true_shows_false_hides_and_none_follows_the_terminal(capsys, monkeypatch):
    assert "Counting" in _bar_text(capsys, progress=True)
    assert _bar_text(capsys, progress=False) == ""
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert _bar_text(capsys, progress=None) == ""  # pytest's stderr is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress.shows(None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setitem(sys.modules, "ipykernel", SimpleNamespace())  # a Jupyter kernel
    assert progress.shows(None)


def test_tqdm_disable_and_the_package_switch_hide_every_bar(capsys, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert _bar_text(capsys, progress=True) == ""
    monkeypatch.delenv("TQDM_DISABLE")
    monkeypatch.setenv(progress.DISABLE_ENV_VAR, "1")
    assert progress.are_progress_bars_disabled() and _bar_text(capsys, progress=True) == ""
    progress.enable_progress_bars()  # the function wins over the environment variable
    try:
        assert "Counting" in _bar_text(capsys, progress=True)
        monkeypatch.delenv(progress.DISABLE_ENV_VAR)
        progress.disable_progress_bars()
        assert _bar_text(capsys, progress=True) == ""
    finally:
        progress._switched_off = None
    assert "Counting" in _bar_text(capsys, progress=True)


def test_tqdm_disable_set_before_the_import_hides_a_bar_in_a_fresh_process():
    script = (
        "from interpreto_anisotropy.commons.progress import progress_bar\n"
        "for _ in progress_bar(range(3), progress=True, desc='Counting'): pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    shown = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    hidden = subprocess.run(
        [sys.executable, "-c", script], env={**env, "TQDM_DISABLE": "1"}, capture_output=True, text=True, check=True
    )
    assert "Counting" in shown.stderr and hidden.stderr == ""


def test_fit_shows_a_bar_when_asked_and_the_probe_none_by_default_here(gpt_neox_mwsp, fit_texts, texts, capsys):
    tangent = ia.PCATangent(gpt_neox_mwsp, nb_concepts=4).fit(fit_texts[:6], progress=True)
    assert "Activations" in capsys.readouterr().err
    quiet = ia.PCATangent(gpt_neox_mwsp, nb_concepts=4).fit(fit_texts[:6])  # None: not interactive here
    assert capsys.readouterr().err == ""
    torch.testing.assert_close(quiet.subspace.basis, tangent.subspace.basis)  # the bar changes nothing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.DegenerateStatisticsWarning)  # few probe texts
        ia.GradientProbe(gpt_neox_mwsp).run(texts[:4], tangent, n_controls=2)
        assert capsys.readouterr().err == ""  # GradientProbe.run's default shows no bar in a batch job
        ia.GradientProbe(gpt_neox_mwsp).run(texts[:4], tangent, n_controls=2, progress=True)
    assert "Probing gradients" in capsys.readouterr().err
