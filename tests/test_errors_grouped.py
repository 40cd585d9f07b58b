# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The 0.1 error and warning classes, grouped in 0.2 (issue 41), still import: each is the class that replaced it,
with a `FutureWarning` naming that class, and it still derives from the built-in exception it derived from, so that
an ``except`` written for the 0.1 name catches what the package raises now.

The former names and their built-in bases are listed here as 0.1's errors.py defined them, not read from the
package's mapping.
"""

from __future__ import annotations

import importlib
import warnings

import pytest

from interpreto_anisotropy import errors

#: 0.1 name -> (the class a caller catches now, the built-in class the 0.1 class derived from).
FORMER = {
    "EmptyInputError": ("InvalidInputError", ValueError),
    "DimensionMismatchError": ("InvalidInputError", ValueError),
    "ObjectiveError": ("InvalidInputError", ValueError),
    "SplitPointError": ("InvalidInputError", ValueError),
    "TokenizerError": ("InvalidInputError", ValueError),
    "ConfigMismatchError": ("InvalidInputError", ValueError),
    "TangentMismatchError": ("InvalidInputError", ValueError),
    "NotFittedError": ("OutOfOrderError", RuntimeError),
    "TrainingProbeError": ("OutOfOrderError", RuntimeError),
    "StaleResultsError": ("ResultsStoreError", OSError),
    "SavedTangentError": ("ResultsStoreError", OSError),
    "ShortSequencesWarning": ("ReadingWarning", UserWarning),
    "SkippedBatchesWarning": ("ReadingWarning", UserWarning),
    "TruncationWarning": ("ReadingWarning", UserWarning),
    "PadTokenWarning": ("ReadingWarning", UserWarning),
    "LeftPaddingWarning": ("ReadingWarning", UserWarning),
    "DroppedAtomsWarning": ("DegenerateStatisticsWarning", UserWarning),
    "SkippedFoldersWarning": ("CheckpointWarning", UserWarning),
    "SkippedCheckpointWarning": ("CheckpointWarning", UserWarning),
    "UnusedWeightsWarning": ("CheckpointWarning", UserWarning),
    "RandomWeightsWarning": ("CheckpointWarning", UserWarning),
    "NonFiniteWeightsWarning": ("CheckpointWarning", UserWarning),
    "IncompleteRowWarning": ("ResultsFileWarning", UserWarning),
    "AlteredFileWarning": ("ResultsFileWarning", UserWarning),
    "MissingDriftWarning": ("ResultsFileWarning", UserWarning),
    "LiveResumeWarning": ("LiveProbeWarning", UserWarning),
    "EmptyWindowWarning": ("LiveProbeWarning", UserWarning),
    "PendingRowsWarning": ("LiveProbeWarning", UserWarning),
    "LossScaleWarning": ("LiveProbeWarning", UserWarning),
    "HubAccessWarning": ("EnvironmentWarning", UserWarning),
    "CacheWarning": ("EnvironmentWarning", UserWarning),
}
#: The classes 0.1's errors.py kept, under the same name.
KEPT = [
    "AnisotropyError",
    "InvalidInputError",
    "NonFiniteError",
    "CheckpointError",
    "ResultsStoreError",
    "SweepLockedError",
    "AnisotropyWarning",
    "DegenerateStatisticsWarning",
]


@pytest.mark.parametrize("former", sorted(FORMER))
def test_a_former_name_imports_with_a_future_warning_as_the_class_that_replaced_it(former):
    new, builtin = FORMER[former]
    with pytest.warns(FutureWarning, match=rf"errors\.{former}\b.*interpreto_anisotropy\.errors\.{new}\b"):
        namespace: dict = {}
        exec(f"from interpreto_anisotropy.errors import {former}", namespace)  # the import statement itself
    alias, replacement = namespace[former], vars(errors)[new]
    assert issubclass(alias, replacement) and issubclass(alias, builtin)
    base = errors.AnisotropyError if former.endswith("Error") else errors.AnisotropyWarning
    assert issubclass(alias, base)
    with pytest.raises(alias):  # an except written for the 0.1 name catches what the package raises now
        raise replacement(f"raised as {new}")


def test_an_attribute_use_of_a_former_name_warns_too():
    with pytest.warns(FutureWarning, match=r"SavedTangentError\b.*interpreto_anisotropy\.errors\.ResultsStoreError"):
        assert importlib.import_module("interpreto_anisotropy").errors.SavedTangentError is errors.ResultsStoreError


def test_the_grouped_classes_import_without_a_warning_and_are_all_that_is_exported():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grouped = {name: getattr(errors, name) for name in errors.__all__}
    assert set(KEPT) <= set(grouped)
    assert not set(FORMER) & set(grouped)  # a former name is no class of its own any more
    replacements = {new for new, _ in FORMER.values()}
    assert replacements <= set(grouped)
    with pytest.raises(AttributeError, match="NoSuchError"):
        errors.NoSuchError  # noqa: B018
