# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""nnsight in code without a source file: a plain Python REPL, `python -`, a script piped to `python`."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any


def import_as_a_script() -> None:
    """In a plain REPL or piped program (where nnsight opens a console), import nnsight as a script would."""
    if "nnsight" in sys.modules or sys.flags.interactive or not sys.argv or sys.argv[0]:
        return
    if "IPython" in sys.modules and sys.modules["IPython"].get_ipython() is not None:  # an IPython shell runs
        return
    sys.argv[0] = "-"  # what nnsight reads to tell a console (an empty name) from a script
    try:
        import nnsight  # noqa: F401
    finally:
        sys.argv[0] = ""
    tolerate_sourceless_backward()


def tolerate_sourceless_backward() -> None:
    """Let nnsight's `Tensor.backward` run the plain backward for a caller without source (idempotent)."""
    try:
        from nnsight.intervention.tracing.backwards import BackwardsTracer
        from nnsight.intervention.tracing.base import WithBlockNotFoundError
    except ImportError:
        return
    capture = BackwardsTracer.capture
    if getattr(capture, "tolerates_sourceless", False):
        return

    def capture_or_plain(self: Any, frame: FrameType | None = None) -> Any:
        frame = frame if frame is not None else caller_outside_nnsight(sys._getframe(1))
        try:
            return capture(self, frame)
        except OSError as error:  # no source for the caller: it opens no `with` block
            raise WithBlockNotFoundError(f"No source code for {frame.f_code.co_filename}: {error}") from error

    capture_or_plain.tolerates_sourceless = True
    BackwardsTracer.capture = capture_or_plain


def caller_outside_nnsight(frame: FrameType | None) -> FrameType | None:
    """The first frame from `frame` up whose module is not nnsight's (the frame nnsight's tracer reads)."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module == "nnsight" or module.startswith("nnsight.")) or module.startswith("nnsight.tests"):
            return frame
        frame = frame.f_back
    return None
