# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The gradient probe's pass over its inputs: one forward and one backward per batch, queued on the device, and what
a shard keeps of each batch: its gradient energies in stacked subspaces, summed on the device."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Bool, Float, Int

from ..commons.accumulators import MomentAccumulator
from ..commons.host_reads import LaggedRead, to_device
from ..commons.options import check_positive_int
from ..commons.progress import progress_bar
from ..errors import InvalidInputError, NonFiniteError, ReadingWarning
from ..reading.batching import TokenBatcher
from ..reading.split_point import SplitPoint
from .breakdown import Breakdown
from .objectives import Objective
from .statistics import ProbeSums, SubspaceColumns, Tally

#: What to try when a batch gives NaN or infinity.
NONFINITE_ADVICE = (
    "Check the checkpoint's weights (NaN or infinity in them), lower the precision less (no fp16 autocast), or, if "
    "the model runs in float64 and the batch is padded (some models, e.g. Gemma2, give NaN on real tokens of padded "
    "float64 batches, a transformers bug), use batch_size=1 or load the model in float32; or pass "
    "on_nonfinite='skip' to drop such batches."
)


@dataclass
class Step:
    """One probed batch, all on the model's device except the sequence ids."""

    batch: dict[str, torch.Tensor]
    hidden: Float[torch.Tensor, "b l d"]
    gradient: Float[torch.Tensor, "b l d"]
    probed: Bool[torch.Tensor, "b l"]
    sequence_ids: Int[torch.Tensor, " b"]
    loss_sum: Float[torch.Tensor, ""]
    loss_count: Float[torch.Tensor, ""]


class GradientSteps:
    """One forward and one backward per batch of the inputs, at a split point, for an objective."""

    def __init__(self, point: SplitPoint, objective: Objective, batcher: TokenBatcher, *, on_nonfinite: str):
        self.point = point
        self.objective = objective
        self.batcher = batcher
        self.on_nonfinite = on_nonfinite
        self.forward_kwargs = objective.for_model(point.model)

    def forward_backward(
        self, batch: dict[str, torch.Tensor], sequence_ids: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, Any, torch.Tensor]:
        """One forward + one backward, queued on the device without waiting for it."""
        batch = self.objective.prepare(batch, sequence_ids=sequence_ids, tokenizer=self.point.tokenizer)
        batch = to_device(batch, self.point.device)
        hidden, gradient, terms = self.point.forward_backward(
            batch, lambda output: self.objective.loss(output, batch), **self.forward_kwargs
        )
        # Padding rows may be non-finite (a sliding window holding only padding) without touching real tokens.
        real = batch["attention_mask"].bool()[..., None]
        finite = torch.isfinite(torch.where(real, gradient, 0)).all() & torch.isfinite(terms.summed)
        return batch, hidden, gradient, terms, finite

    def nonfinite_error(self, batch_index: int, sequence_ids: torch.Tensor) -> NonFiniteError:
        """Our error for a batch with a non-finite loss or gradient, naming it and its sequences."""
        return NonFiniteError(
            f"Non-finite loss or gradients in batch {batch_index} (sequences {sequence_ids.tolist()}). {NONFINITE_ADVICE}"
        )

    def __call__(
        self,
        inputs: Any,
        labels: Any,
        *,
        max_tokens: int | None,
        progress: bool | None,
        description: str,
        tally: Tally,
        shard: tuple[int, int] = (0, 1),
        defer_nonfinite: bool = False,
    ) -> Iterator[Step]:
        """Yield one `Step` per batch of this shard (`shard=(rank, world)`), without waiting for the device."""
        if max_tokens is not None:
            check_positive_int("max_tokens", max_tokens)
        shard_rank, shard_count = shard
        n_batches, chunks = self.batcher.batches(inputs, labels)
        flags: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        seen = torch.zeros((), dtype=torch.long, device=self.point.device)
        count_reader = LaggedRead()
        for batch_index, (batch, sequence_ids) in enumerate(
            progress_bar(chunks, progress=progress, total=n_batches, desc=description, unit="batch")
        ):
            if sequence_ids.numel() == 0 or batch_index % shard_count != shard_rank:
                continue
            tally.usable_sequences += sequence_ids.numel()
            prepared, hidden, gradient, terms, finite = self.forward_backward(batch, sequence_ids)
            if not flags and not defer_nonfinite and self.on_nonfinite == "raise" and not bool(finite):
                raise self.nonfinite_error(batch_index, sequence_ids)
            flags.append((batch_index, sequence_ids, finite))
            probed = self.objective.probed_tokens(prepared) & self.point.rows(prepared) & finite
            if max_tokens is not None:
                flat = probed.flatten()
                keep = (flat.cumsum(0) + seen <= max_tokens) & flat
                probed = keep.view_as(probed)
                seen = seen + keep.sum()
            zero = torch.zeros((), dtype=torch.float64, device=gradient.device)
            loss_sum = torch.where(finite, terms.summed.double(), zero)
            loss_count = torch.where(finite, torch.as_tensor(terms.count, device=gradient.device).double(), zero)
            yield Step(prepared, hidden, gradient, probed, sequence_ids, loss_sum, loss_count)
            if max_tokens is not None:
                counted = count_reader.push(seen)
                if counted is not None and int(counted) >= max_tokens:
                    break
        self.batcher.note_truncation()  # once per probe; the batches' end says it when they are all read
        tally.skipped_sequences = self.batcher.skipped_sequences
        if flags:
            finite_flags = torch.stack([flag for _, _, flag in flags]).cpu().tolist()
            failed = [(index, ids) for (index, ids, _), ok in zip(flags, finite_flags, strict=True) if not ok]
            tally.skipped_batches = len(failed)
            tally.nonfinite_sequences = sum(ids.numel() for _, ids in failed)
            if failed:
                tally.first_nonfinite = failed[0]
                if self.on_nonfinite == "raise" and not defer_nonfinite:
                    raise self.nonfinite_error(*failed[0])

    def check_usable(self, tally: Tally) -> None:
        """Refuse (`InvalidInputError`) a pass where no sequence was long enough; warn about the skipped ones (too
        short, or in a batch dropped for non-finite values) with how many."""
        if tally.usable_sequences == 0:
            raise InvalidInputError(
                f"Every sequence is shorter than the {self.objective.min_tokens} tokens the {self.objective.name} objective needs; give longer texts."
            )
        if tally.skipped_sequences:
            warnings.warn(
                f"{tally.skipped_sequences} sequence(s) shorter than {self.objective.min_tokens} tokens were skipped.",
                ReadingWarning,
                stacklevel=3,
            )
        if tally.skipped_batches:
            warnings.warn(
                f"{tally.nonfinite_sequences} sequence(s) in {tally.skipped_batches} batch(es) with a non-finite loss or gradients were skipped (on_nonfinite='skip'; 'raise' names the first such batch): the results rest on the other sequences.",
                ReadingWarning,
                stacklevel=3,
            )


def batch_energies(
    gradient: Float[torch.Tensor, "b l d"], probed: Bool[torch.Tensor, "b l"], columns: Any | None
) -> BatchEnergies:
    """Energies of a batch's probed gradient rows in every subspace, per token and per sequence, and its rows."""
    batch_size, length, width = gradient.shape
    with torch.autocast(gradient.device.type, enabled=False):  # float32 products, even under a caller's autocast
        rows = torch.where(probed.reshape(-1)[:, None], gradient.reshape(-1, width), 0).float()
        token_energy = columns.energies(rows) if columns is not None else None
        token_total = rows.square().sum(1)
        energy = None if token_energy is None else token_energy.view(batch_size, length, -1).double().sum(1)
        total = token_total.view(batch_size, length).double().sum(1)
    return BatchEnergies(energy, total, rows, token_energy, token_total)


@dataclass
class BatchEnergies:
    """The energies of one batch."""

    energy: Float[torch.Tensor, "b S"] | None
    total: Float[torch.Tensor, " b"]
    rows: Float[torch.Tensor, "n d"]
    token_energy: Float[torch.Tensor, "n S"] | None
    token_total: Float[torch.Tensor, " n"]


class ShardSums:
    """The sums of one shard's probed batches, step by step."""

    def __init__(self, columns: SubspaceColumns, vocab_size: int, device: torch.device):
        self.columns = columns
        self.device = device
        self.per_sequence: list[tuple[torch.Tensor, ...]] = []  # (energy, total, has rows, id) of each batch
        self.moments = MomentAccumulator(next(iter(columns.tangents.values())).dim, device=device)
        self.loss_sum = self.loss_count = torch.zeros((), dtype=torch.float64, device=device)
        tangent_columns = [columns.tangent_column(name) for name in columns.tangents]
        control_columns = [columns.control_columns(name) for name in columns.tangents]
        self.breakdown = Breakdown(vocab_size, tangent_columns, control_columns, device)

    def add(self, step: Step) -> None:
        """Add one batch's energies, moments, breakdown and loss (no host synchronisation)."""
        # Zero rows where not probed (padding, past the cap, a non-finite batch).
        energies = batch_energies(step.gradient, step.probed, self.columns)
        self.per_sequence.append((energies.energy, energies.total, step.probed.any(1), step.sequence_ids))
        probed = step.probed.reshape(-1)
        self.moments.update(energies.rows, mask=probed)
        batch = step.batch
        self.breakdown.add(
            batch.get("original_input_ids", batch["input_ids"]).reshape(-1),
            (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0).reshape(-1),
            energies.token_energy,
            energies.token_total,
            probed,
        )
        self.loss_sum = self.loss_sum + step.loss_sum
        self.loss_count = self.loss_count + step.loss_count

    def finish(self, tally: Tally) -> tuple[ProbeSums, Breakdown]:
        """This shard's `ProbeSums` (its sequences with probed rows only, with the pass's `tally`) and breakdown."""
        if self.per_sequence:
            energy, total, keep, ids = (torch.cat(parts) for parts in zip(*self.per_sequence, strict=True))
            energy, total, ids = energy[keep], total[keep], ids[keep.cpu()]
        else:
            total = torch.zeros(0, dtype=torch.float64, device=self.device)
            energy, ids = total.view(0, 1).expand(0, self.columns.n_columns), torch.zeros(0, dtype=torch.long)
        sums = ProbeSums(energy, total, ids, self.moments, self.loss_sum, self.loss_count, tally)
        return sums, self.breakdown
