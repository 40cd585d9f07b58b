# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A `TrainingProbe` in code without a source file: a script fed to `python -` or to `python` on standard input, and
typed into a REPL on a terminal.

nnsight (imported by Interpreto) replaces `Tensor.backward` with a tracer that reads the caller's source; without
one it raised ``OSError: could not get source code`` at the first `loss.backward()` (issue 39). Imported by
`python` without a script, it also runs the last line typed again, from inside the import: the first use of
`ia.TrainingProbe` failed with a circular import (a pipe: a `TypeError`). The probe's rows are checked against the
same script run from a file.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, torch, transformers, interpreto_anisotropy as ia
    config = transformers.GPTNeoXConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(config).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    probe = ia.TrainingProbe(model, 1, tangent=ia.Subspace.random(32, 4, seed=0), n_controls=3, n_bootstrap=20)
    BEFORE_ATTACHING
    rows = []
    with probe:
        for step in range(2):
            ids = torch.randint(0, 64, (2, 10))
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            rows.extend(probe.step())
    print(json.dumps([[row["step"], row["n_tokens"], row["energy_share"]] for row in rows]))
    """
)


def _run(*arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *arguments], input=stdin, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def from_file(tmp_path_factory) -> list:
    """The rows of the script run from a file."""
    path = tmp_path_factory.mktemp("stdin") / "train.py"
    path.write_text(SCRIPT.replace("BEFORE_ATTACHING", ""))
    run = _run(str(path))
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("arguments", [["-"], []], ids=["python -", "python"])
def test_a_training_probe_fed_on_standard_input_trains_as_from_a_file(from_file, arguments):
    script = SCRIPT.replace("BEFORE_ATTACHING", "")
    piped = _run(*arguments, stdin=script)
    assert piped.returncode == 0, piped.stderr
    rows = json.loads(piped.stdout.splitlines()[-1])
    assert [row[:2] for row in rows] == [[0, 18], [1, 18]]  # 2 sequences of 10 tokens: 9 targets each
    assert rows == from_file


def test_a_training_probe_typed_into_a_terminal_repl_trains_as_from_a_file(from_file):
    lines = [line for line in SCRIPT.replace("BEFORE_ATTACHING", "").splitlines() if line.strip()]
    lines[-1:-1] = [""]  # the blank line that ends the `with` block
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a REPL on the terminal
        os.execv(sys.executable, [sys.executable, "-q"])
    os.write(terminal, ("\n".join([*lines, "exit()", ""])).encode())
    output, deadline = b"", time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([terminal], [], [], 1)[0]:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # the REPL exited
                break
            if not chunk:
                break
            output += chunk
    os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    printed = [line for line in text.splitlines() if line.startswith("[[0, ")]
    assert printed and json.loads(printed[-1]) == from_file, text[-3000:]


def test_without_the_probe_nnsights_backward_still_needs_a_source():
    """The control: nnsight imported (by the probe's module), before the probe is attached, `loss.backward()` on
    standard input fails in nnsight's tracer (when it no longer does, `reading/sourceless.py` can go)."""
    backward = "model(input_ids=torch.ones(1, 4, dtype=torch.long), labels=torch.ones(1, 4, dtype=torch.long)).loss"
    script = SCRIPT.replace("BEFORE_ATTACHING", f"{backward}.backward()")
    piped = _run("-", stdin=script)
    assert piped.returncode != 0 and "could not get source code" in piped.stderr
