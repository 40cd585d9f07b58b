# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's warnings said once each, with the checkpoints they concern (not once per checkpoint).

Examples:
    >>> import warnings
    >>> said = SaidOnce()
    >>> for name in ("step-0", "step-10"):
    ...     with said.about(name):
    ...         warnings.warn("few probe texts", UserWarning)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     said.say()
    >>> [str(warning.message) for warning in caught]
    ['few probe texts [said once for: step-0, step-10]']
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SaidOnce"]


class SaidOnce:
    """Collects the warnings raised about each checkpoint; `say` warns each distinct one once, naming them."""

    def __init__(self) -> None:
        self._said: dict[tuple[type[Warning], str], tuple[warnings.WarningMessage, list[str]]] = {}

    @contextmanager
    def about(self, name: str) -> Iterator[None]:
        """Record the warnings raised inside (the filters in force decide which) as concerning `name`."""
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                yield
        finally:
            for record in caught:
                _, names = self._said.setdefault((record.category, str(record.message)), (record, []))
                if name not in names:
                    names.append(name)

    def say(self) -> None:
        """Warn each distinct warning recorded once, at its first place, with the checkpoints it concerns."""
        said, self._said = self._said, {}
        for (category, text), (record, names) in said.items():
            warnings.warn_explicit(
                f"{text} [said once for: {', '.join(names)}]", category, record.filename, record.lineno
            )
