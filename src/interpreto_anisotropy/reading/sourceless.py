# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""nnsight in code without a source file: a plain Python REPL, `python -`, a script piped to `python`."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any


def plain_interpreter() -> bool:
    """Whether Python runs without a script or `-c` (a REPL, or a program piped in), not with `-i` nor IPython,
    and nnsight is not imported yet: where nnsight would open its own console when imported."""
    if "nnsight" in sys.modules or sys.flags.interactive or not sys.argv or sys.argv[0]:
        return False
    # IPython is imported by whoever runs a shell; never by us
    return "IPython" not in sys.modules or sys.modules["IPython"].get_ipython() is None


def import_as_a_script() -> None:
    """Import nnsight as a script would, and let its backward run without a source (`plain_interpreter` only)."""
    if not plain_interpreter():
        return
    sys.argv[0] = "-"  # what nnsight reads to tell a console (an empty name) from a script
    try:
        import nnsight  # noqa: F401
    finally:
        sys.argv[0] = ""
    tolerate_sourceless_backward()


def tolerate_sourceless_backward() -> bool:
    """Let nnsight's `Tensor.backward` run the plain backward for a caller without source (idempotent)."""
    try:
        from nnsight.intervention.tracing.backwards import BackwardsTracer
        from nnsight.intervention.tracing.base import WithBlockNotFoundError
    except ImportError:
        return False
    capture = BackwardsTracer.capture
    if getattr(capture, "tolerates_sourceless", False):
        return True

    def capture_or_plain(self: Any, frame: FrameType | None = None) -> Any:
        frame = frame if frame is not None else caller_outside_nnsight(sys._getframe(1))
        try:
            return capture(self, frame)
        except OSError as error:  # no source for the caller: it opens no `with` block
            raise WithBlockNotFoundError(f"No source code for {frame.f_code.co_filename}: {error}") from error

    capture_or_plain.tolerates_sourceless = True
    BackwardsTracer.capture = capture_or_plain
    return True


def caller_outside_nnsight(frame: FrameType | None) -> FrameType | None:
    """The first frame from `frame` up whose module is not nnsight's (the frame nnsight's tracer reads)."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module == "nnsight" or module.startswith("nnsight.")) or module.startswith("nnsight.tests"):
            return frame
        frame = frame.f_back
    return None
