# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checks of the plain options users pass (sizes, seeds), each raising our error that names the option."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

#: Seeds are below this.
MAX_SEED = 2**32  # scikit-learn's random_state bound; torch accepts it too


def check_folder(name: str, value: Any) -> Path:
    """A folder option: a non-empty `str` or `os.PathLike` without NUL bytes (never "": the working directory)."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        shown = repr(value) if len(repr(value)) <= 80 else f"a {type(value).__name__}"
        raise InvalidInputError(
            f"{name} must be a folder: a non-empty str or path without NUL bytes, got {shown}. Give the folder, "
            "e.g. 'runs/toy' ('.' for the working directory)."
        )
    return Path(text)


def check_device(name: str, device: Any) -> Any:
    """A device torch parses that can hold data (a name, an index or a `torch.device`; not "meta"), else our error."""
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError, ValueError):
        kind = None
    if kind is None or isinstance(device, bool):
        raise InvalidInputError(f"{name} must be a torch device such as 'cpu', 'cuda' or 'cuda:0', got {device!r}.")
    if kind == "meta":
        raise InvalidInputError(
            f"{name}='meta' holds no data, so no activation can be read or fitted on it: give 'cpu', 'cuda' or "
            "'cuda:N'."
        )
    return device


def check_number(
    name: str,
    value: Any,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
) -> float:
    """`value` as a float if it is a finite real number (not a bool, not NaN nor infinity) within the bounds given."""
    limits = ((">", above, float.__gt__), (">=", at_least, float.__ge__), ("<=", at_most, float.__le__))
    limits += (("<", below, float.__lt__),)
    given = [(sign, limit, holds) for sign, limit, holds in limits if limit is not None]
    wanted = " and ".join(f"{sign} {limit}" for sign, limit, _ in given)
    expected = "a finite number" + (f" {wanted}" if wanted else "")
    bound = Bound(float, expected, lambda number: all(holds(float(number), float(limit)) for _, limit, holds in given))
    return float(bound.check(name, value))


@dataclass(frozen=True)
class Bound:
    """The values a number option takes, said once for Python (`check`) and for the command line (`parse`)."""

    kind: type
    expected: str
    accepts: Callable[[Any], bool]

    def holds(self, value: Any) -> bool:
        """Whether `value` is a number of the bound's kind inside it."""
        if isinstance(value, bool) or not isinstance(value, (int, float) if self.kind is float else int):
            return False
        return (self.kind is int or math.isfinite(value)) and self.accepts(value)

    def check(self, name: str, value: Any) -> Any:
        """`value` as given, if the bound holds it."""
        if not self.holds(value):
            raise InvalidInputError(f"{name} must be {self.expected}, got {value!r}.")
        return value

    def parse(self, text: str) -> Any:
        """A command line's `text` as a number of the bound's kind inside it, for argparse `type=`."""
        try:
            number = self.kind(text)
        except ValueError:
            number = None
        if number is None or not self.holds(number):
            raise argparse.ArgumentTypeError(f"must be {self.expected}, got {text!r}")
        return number


# the bounds the options share (each `expected` says what it holds), and their checks: `value`, else our error
POSITIVE_INT = Bound(int, "a positive integer", lambda number: number >= 1)
NONNEGATIVE_INT = Bound(int, "an integer >= 0", lambda number: number >= 0)
SEED = Bound(int, "an integer in [0, 2**32)", lambda number: 0 <= number < MAX_SEED)
check_positive_int = POSITIVE_INT.check
check_nonnegative_int = NONNEGATIVE_INT.check
check_seed = SEED.check
FRACTION = Bound(float, "a number in (0, 1]", lambda number: 0 < number <= 1)
LEVEL = Bound(float, "a number in (0, 1) (a significance level)", lambda number: 0 < number < 1)
UNIT_INTERVAL = Bound(float, "a number in [0, 1]", lambda number: 0 <= number <= 1)
POSITIVE_NUMBER = Bound(float, "a number above 0", lambda number: number > 0)


def check_bool(name: str, value: Any) -> bool:
    """`value` if it is True or False."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be True or False, got {value!r}.")
    return value


def byte_size(count: int) -> str:
    """A number of bytes as a person reads it: bytes, KiB, MiB or GiB, three significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def config_of(cls: type, config: Any, options: Mapping[str, Any], *, owner: str, besides: str = "") -> Any:
    """A settings dataclass `cls` from `config` (None: the defaults) with `options` replacing its fields."""
    if config is not None and not isinstance(config, cls):
        raise InvalidInputError(f"config must be a {cls.__name__} or None, got {type(config).__name__}.")
    names = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise InvalidInputError(
            f"Unknown {owner} option(s) {', '.join(unknown)}: the options are {', '.join(sorted(names))} "
            f"(see {cls.__name__}){besides}."
        )
    return dataclasses.replace(config, **options) if config is not None else cls(**options)
