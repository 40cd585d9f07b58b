# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`loss.backward()` in code without a source file (`python -`, a script piped to the interpreter).

nnsight, which Interpreto imports, replaces `torch.Tensor.backward` with a tracer that reads the caller's source to
tell whether the call opens a ``with loss.backward():`` block of an nnsight trace; when it finds none, it runs the
plain backward. Code read from standard input has no source to read, and the tracer raises
``OSError: could not get source code`` instead of running it. `tolerate_sourceless_backward` makes that case what it
is, no ``with`` block, so that the plain backward runs; code with a source is traced as before, from the same frame.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

__all__ = ["tolerate_sourceless_backward"]


def tolerate_sourceless_backward() -> bool:
    """Let nnsight's `Tensor.backward` run the plain backward for a caller without source (idempotent).

    Returns:
        Whether nnsight's backward tracer is (now) patched; False when the installed nnsight has none.
    """
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
