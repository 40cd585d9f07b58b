# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Checks of the plain options users pass (sizes, seeds), each raising our error that names the option.

Examples:
    >>> check_positive_int("batch_size", 8)
    8
    >>> check_seed("seed", 3)
    3
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError

__all__ = ["MAX_SEED", "check_nonnegative_int", "check_positive_int", "check_seed"]

MAX_SEED = 2**32  # scikit-learn's random_state bound; torch accepts it too


def check_positive_int(name: str, value: Any) -> int:
    """`value` if it is an integer >= 1 (not a bool).

    Raises:
        InvalidInputError: Naming the option.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}.")
    return value


def check_nonnegative_int(name: str, value: Any) -> int:
    """`value` if it is an integer >= 0 (not a bool).

    Raises:
        InvalidInputError: Naming the option.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an integer >= 0, got {value!r}.")
    return value


def check_seed(name: str, value: Any) -> int:
    """`value` if it is an integer in [0, 2**32).

    Raises:
        InvalidInputError: Naming the option.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_SEED:
        raise InvalidInputError(f"{name} must be an integer in [0, 2**32), got {value!r}.")
    return value
