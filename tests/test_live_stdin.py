# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A `TrainingProbe` in code without a source file: a script fed to `python -` on standard input, as a REPL's.

nnsight (imported by Interpreto) replaces `Tensor.backward` with a tracer that reads the caller's source; without
one it raised ``OSError: could not get source code`` at the first `loss.backward()` (issue 39). The probe's rows
are checked against the same script run from a file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

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


def _run(script: str, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *arguments], input=stdin, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_training_probe_fed_on_standard_input_trains_as_from_a_file(tmp_path):
    script = SCRIPT.replace("BEFORE_ATTACHING", "")
    piped = _run(script, "-", stdin=script)
    assert piped.returncode == 0, piped.stderr
    path = tmp_path / "train.py"
    path.write_text(script)
    from_file = _run(script, str(path))
    assert from_file.returncode == 0, from_file.stderr
    rows = json.loads(piped.stdout.splitlines()[-1])
    assert [row[:2] for row in rows] == [[0, 18], [1, 18]]  # 2 sequences of 10 tokens: 9 targets each
    assert rows == json.loads(from_file.stdout.splitlines()[-1])


def test_without_the_probe_nnsights_backward_still_needs_a_source():
    """The control: nnsight imported (by the probe's module), before the probe is attached, `loss.backward()` on
    standard input fails in nnsight's tracer (when it no longer does, `reading/sourceless.py` can go)."""
    backward = "model(input_ids=torch.ones(1, 4, dtype=torch.long), labels=torch.ones(1, 4, dtype=torch.long)).loss"
    script = SCRIPT.replace("BEFORE_ATTACHING", f"{backward}.backward()")
    piped = _run(script, "-", stdin=script)
    assert piped.returncode != 0 and "could not get source code" in piped.stderr
