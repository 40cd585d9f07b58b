# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The seam's `TrainingCapture`: one read per training forward, with dL/dh equal to autograd's, whether the split
point's module runs inside a gradient checkpoint (reentrant or not, its hooks inside the checkpoint as in older
transformers) or not; forwards under no_grad are ignored.

Recomputed another way: `torch.autograd.grad` of the same loss with respect to the split point's output, taken
from a run without checkpointing.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.reading.split_point import TrainingCapture, resolve_split_point


class _Tiny(torch.nn.Module):
    """Embedding, three tanh blocks (each module's output is (b, l, d)), a summed loss; blocks optionally checkpointed."""

    def __init__(self, reentrant: bool | None):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(11, 6, dtype=torch.float64)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(6, 6, dtype=torch.float64) for _ in range(3))
        self.reentrant = reentrant
        self.outputs: list[torch.Tensor] = []

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        self.outputs = []
        for layer in self.layers:
            if self.reentrant is None:
                hidden = torch.tanh(layer(hidden))
            else:  # the module is called inside the checkpoint: its hooks fire at the recomputation too
                hidden = checkpoint(lambda x, layer=layer: torch.tanh(layer(x)), hidden, use_reentrant=self.reentrant)
            self.outputs.append(hidden)
        return (hidden**2).sum()


def _expected_gradient(ids: torch.Tensor) -> torch.Tensor:
    model = _Tiny(None)
    loss = model(ids)
    return torch.autograd.grad(loss, model.outputs[1])[0]


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")
@pytest.mark.parametrize("reentrant", [None, True, False])
def test_one_read_per_forward_with_autograds_gradient(reentrant):
    ids = torch.randint(0, 11, (2, 5))
    model = _Tiny(reentrant)
    reads = []
    capture = TrainingCapture(model, [resolve_split_point(model, 1)], reads.append).attach()
    with torch.no_grad():
        model(ids)  # evaluation: ignored
    loss = model(ids)
    torch.autograd.backward(loss)
    capture.detach()
    assert len(reads) == 1 and reads[0].path == "layers.1"
    # The hooked module is the Linear; the block's output adds tanh: dL/dz = dL/dh * (1 - h^2).
    hidden = torch.tanh(reads[0].hidden)
    assert torch.allclose(reads[0].gradient, _expected_gradient(ids) * (1 - hidden**2), rtol=1e-12, atol=1e-14)
    assert (reads[0].inputs["attention_mask"] == 1).all()


def test_resolve_split_point_refuses_unknown_layers():
    model = _Tiny(None)
    assert resolve_split_point(model, "layers.2") == "layers.2"
    with pytest.raises(InvalidInputError, match=r"\b9\b.*_Tiny"):
        resolve_split_point(model, 9)
    with pytest.raises(InvalidInputError, match=r"split.points?.*float"):
        resolve_split_point(model, 1.5)
