# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The gradient probe: dL/dh of the training loss at a split point, one forward and backward per batch, projected
onto tangent and control subspaces (docs/statistics.md)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from jaxtyping import Bool, Float, Int

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator
from ..commons.options import check_bool, check_number, check_positive_int, check_seed
from ..commons.progress import progress_bar
from ..commons.tensors import LaggedRead, to_device
from ..errors import InvalidInputError, NonFiniteError, ReadingWarning
from ..metrics.isotropy import DEFAULT_ZETA
from ..reading.batching import TokenBatcher, TokenCache
from ..reading.split_point import SplitPoint, refuse_ignored_aux_loss, refuse_other_call
from ..tangents.subspace import Subspace
from .anisotropy import IsoScoreConvention, IsoScoreSettings, IsoScoreTarget
from .masking import MaskedLM
from .objectives import Objective, make_objective
from .result import ProbeResult
from .statistics import FREQUENCY_EDGES, Breakdown, ProbeSums, SubspaceColumns, Tally, build_results

__all__ = ["GradientProbe", "TokenGradients", "ProbeResult"]

_NOTHING_PROBED = "No token was probed: every batch was skipped or empty."


@dataclass
class TokenGradients:
    """Per-token activations and loss gradients at the split point, one row per probed token.

    Attributes:
        activations: Hidden states h, (n, d); `gradients`: dL/dh, (n, d).
        sequence_ids: Index of each row's sequence in the inputs, (n,).
        positions: Position of each row's token in its (unpadded) sequence, (n,).
        input_ids: Token id of each row (before masking, for masked LM), (n,).
        masked: For masked LM, whether the row's token was selected for prediction, (n,); else None.
        loss_sum: Sum of the loss terms; `loss_count`: their number.

    Examples:
        >>> raw = ia.GradientProbe(mwsp).gradients(texts)  # doctest: +SKIP
        >>> raw.gradients.shape == raw.activations.shape  # doctest: +SKIP
        True
    """

    activations: Float[torch.Tensor, "n d"]
    gradients: Float[torch.Tensor, "n d"]
    sequence_ids: Int[torch.Tensor, " n"]
    positions: Int[torch.Tensor, " n"]
    input_ids: Int[torch.Tensor, " n"]
    masked: Bool[torch.Tensor, " n"] | None
    loss_sum: float
    loss_count: int


class GradientProbe:
    """Per-token gradients of the model's training loss at the split point of a `ModelWithSplitPoints`.

    Args:
        splitter: Interpreto `ModelWithSplitPoints` whose `split_point` is the layer to probe.
        objective: "auto" (default: from the model's head), a name, a `MaskedLM`, an `Objective` or a callable
            `fn(output, batch) -> loss` (`objectives.make_objective`); one not fitting the model's head is refused.
        mlm_probability: Masking rate for "masked_lm" (None: 0.15).
        reduction: "sum" (default) or "mean" over loss terms.
        seed: Seed of the masked-LM mask (drawn from the seed and each sequence's index).
        batch_size: Sequences per forward/backward; defaults to the splitter's `batch_size`.
        max_length: Truncation length in tokens (default: the model's and tokenizer's limit).
        on_nonfinite: "raise" (error naming the batch) or "skip" (drop the batch and count it).
        autocast_dtype: torch.bfloat16 / torch.float16 ("bf16" / "fp16") for `torch.autocast`; None: the model's.
        distributed: Shard `run`'s batches over a torch.distributed group; None (default): when several ranks run.
        include_special: Probe special tokens (BOS, CLS, SEP, ...) too, as the tangent's fit must.
        call: Which call of a module run several times per forward (`SplitPoint`); fit with the same `call`.
        token_cache: A `TokenCache` shared across reads (a sweep's checkpoints); None: tokenise at each `run`.

    Raises:
        InvalidInputError: An unknown objective, reduction, `on_nonfinite` or autocast dtype, an objective that does
            not fit the model's head, a tokenizer with neither pad nor eos token, or a model padding in its forward.

    Examples:
        >>> probe = ia.GradientProbe(mwsp, objective="causal_lm")
        >>> result = probe.run(texts, tangent, n_controls=20, seed=0)
        >>> print(result)
    """

    def __init__(
        self,
        splitter: BaseSplitter,
        *,
        objective: str | MaskedLM | Objective | Callable[..., torch.Tensor] = "auto",
        mlm_probability: float | None = None,
        reduction: str = "sum",
        seed: int = 0,
        batch_size: int | None = None,
        max_length: int | None = None,
        on_nonfinite: str = "raise",
        autocast_dtype: torch.dtype | str | None = None,
        distributed: bool | None = None,
        include_special: bool = False,
        call: str | int | None = None,
        token_cache: TokenCache | None = None,
    ):
        if on_nonfinite not in ("raise", "skip"):
            raise InvalidInputError(f"on_nonfinite must be 'raise' or 'skip', got {on_nonfinite!r}.")
        check_bool("include_special", include_special)
        self.distributed = distributed if distributed is None else check_bool("distributed", distributed)
        self.splitter = splitter
        self.point = SplitPoint(splitter, autocast_dtype=autocast_dtype, include_special=include_special, call=call)
        refuse_ignored_aux_loss(self.point.model)
        self.objective = make_objective(
            objective, mlm_probability=mlm_probability, seed=seed, reduction=reduction, model=self.point.model
        )
        check_seed("seed", seed)
        self.batcher = self.point.batcher(
            batch_size=batch_size, max_length=max_length, min_tokens=self.objective.min_tokens, token_cache=token_cache
        )
        self.steps = GradientSteps(self.point, self.objective, self.batcher, on_nonfinite=on_nonfinite)
        self.on_nonfinite = on_nonfinite
        self.max_length = self.batcher.max_length

    @property
    def device(self) -> torch.device:
        """The model's device (where gradients and accumulators live)."""
        return self.point.device

    def gradients(
        self, inputs: Any, *, labels: Any = None, max_tokens: int | None = None, progress: bool = False
    ) -> TokenGradients:
        """The raw per-token activations and gradients at the split point.

        Args:
            inputs: As in `run`.
            labels: As in `run`.
            max_tokens: As in `run`.
            progress: Show a progress bar.

        Returns:
            `TokenGradients` with (n, d) activations and gradients, on the model's device.

        Raises:
            InvalidInputError: No texts, or every sequence too short for the objective.
            NonFiniteError: Non-finite gradients (unless `on_nonfinite="skip"`).
        """
        parts: dict[str, list[torch.Tensor]] = {key: [] for key in ("h", "g", "seq", "pos", "ids", "masked")}
        loss_sum = loss_count = torch.zeros((), dtype=torch.float64, device=self.device)
        tally = Tally()
        steps = self.steps(
            inputs, labels, max_tokens=max_tokens, progress=progress, description="Gradients", tally=tally
        )
        for step in steps:
            batch, probed = step.batch, step.probed
            positions = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
            original = batch.get("original_input_ids", batch["input_ids"])
            sequences = step.sequence_ids.to(probed.device)[:, None].expand_as(probed)
            for key, values in zip(parts, (step.hidden, step.gradient, sequences, positions, original), strict=False):
                parts[key].append(values[probed])
            if "labels" in batch and batch["labels"].dim() == 2:
                parts["masked"].append((batch["labels"] != -100)[probed])
            loss_sum = loss_sum + step.loss_sum
            loss_count = loss_count + step.loss_count
        self.steps.check_usable(tally)
        if sum(part.shape[0] for part in parts["g"]) == 0:
            raise InvalidInputError(_NOTHING_PROBED)
        masked = torch.cat(parts["masked"]) if parts["masked"] else None
        rows = (torch.cat(parts[key]) for key in ("h", "g", "seq", "pos", "ids"))  # TokenGradients' order
        return TokenGradients(*rows, masked=masked, loss_sum=float(loss_sum), loss_count=int(loss_count))

    def run(
        self,
        inputs: Any,
        subspaces: Any,
        *,
        labels: Any = None,
        n_controls: int = 20,
        n_random: int | None = None,
        seed: int = 0,
        draw_seeds: Mapping[str, int] | None = None,
        max_tokens: int | None = None,
        n_bootstrap: int = 1000,
        confidence: float = 0.95,
        isoscore_convention: str | IsoScoreConvention = IsoScoreConvention.COMPLEMENT,
        isoscore_zeta: float = DEFAULT_ZETA,
        isoscore_c0: str | IsoScoreTarget | torch.Tensor = IsoScoreTarget.SCALED_IDENTITY,
        token_counts: Any = None,
        frequency_edges: Sequence[float] = FREQUENCY_EDGES,
        progress: bool | None = None,
    ) -> ProbeResult | dict[str, ProbeResult]:
        """Probe the gradients and compare the energy each tangent holds with normal controls and random subspaces.

        Args:
            inputs: List of texts, or a dict / BatchEncoding with `input_ids` and `attention_mask`.
            subspaces: A `TangentExplainer`, a `Subspace`, or a dict name -> either (several tangents side by side).
            labels: Sequence labels for the "sequence_classification" objective.
            n_controls: Number R of matched-rank normal controls per tangent.
            n_random: Number R' of random subspaces for the exact p-values; None (default): `n_controls`.
            seed: Seed of the controls, of the random subspaces and of the bootstrap.
            draw_seeds: {tangent name: seed} of each tangent's draws; None: `seed` for all.
            max_tokens: Stop after this many probed tokens.
            n_bootstrap: Bootstrap resamples of sequences for the confidence interval of the energy share.
            confidence: Confidence level of the interval.
            isoscore_convention: `IsoScoreConvention`: "complement" (default) or "ambient".
            isoscore_zeta: IsoScore* shrinkage zeta in [0, 1]; 0.2 by default.
            isoscore_c0: IsoScore* shrinkage target: an `IsoScoreTarget` name or a (d, d) covariance.
            token_counts: Occurrences of each token id (V,) for the frequency buckets; None: the probed tokens'.
            frequency_edges: Cumulated shares of occurrences where the frequency buckets are cut.
            progress: A progress bar; None (default) in interactive sessions only.

        Returns:
            A `ProbeResult`, or a dict of them (same keys) when `subspaces` is a dict.

        Raises:
            InvalidInputError: No texts, sequences all too short, a subspace (or `isoscore_c0`) of another d or fitted
                at another split point or `call`, 2k >= d, or bad counts, `max_tokens`, labels or IsoScore* options.
            NonFiniteError: Non-finite gradients (unless `on_nonfinite="skip"`), or an `isoscore_c0` matrix with NaN.

        Warns:
            DegenerateStatisticsWarning: Fewer than 20 probed sequences: the interval covers less than it says.
            ReadingWarning: Sequences too short for the objective were skipped.
            ReadingWarning: Texts over `max_length` were truncated.
        """
        named = self._named_subspaces(subspaces)
        check_number("confidence", confidence, above=0, below=1)
        n_controls = check_positive_int("n_controls", n_controls)
        n_random = n_controls if n_random is None else check_positive_int("n_random", n_random)
        iso = IsoScoreSettings.make(convention=isoscore_convention, zeta=isoscore_zeta, c0=isoscore_c0)
        iso.check_dim(next(iter(named.values())).dim)
        tangents = {name: subspace.to(device=self.device, dtype=torch.float32) for name, subspace in named.items()}
        draws = check_seed("seed", seed)
        if draw_seeds is not None:
            draws = {name: check_seed("draw_seeds", value) for name, value in draw_seeds.items()}
        columns = SubspaceColumns.draw(tangents, n_controls=n_controls, n_random=n_random, seed=draws)
        sharded = distributed.is_distributed() if self.distributed is None else self.distributed
        sums, breakdown = self._accumulate(inputs, labels, columns, max_tokens, progress, sharded)
        sums = self._reduce(sums, sharded)  # every rank's sums (this process's alone when not sharded)
        if sharded:
            breakdown.reduce(distributed.all_reduce_sum)
        split_point = self.splitter.split_point
        built = build_results(sums, columns, seed, n_bootstrap, confidence, self.objective, split_point, iso)
        results = {
            name: replace(result, **breakdown.fields(index, token_counts, frequency_edges))
            for index, (name, result) in enumerate(built.items())
        }
        return results if isinstance(subspaces, Mapping) else next(iter(results.values()))

    def _named_subspaces(self, subspaces: Any) -> dict[str, Subspace]:
        """A tangent explainer, a Subspace or a dict of them as {name: Subspace}, all fitted where the probe reads."""
        items = subspaces.items() if isinstance(subspaces, Mapping) else [("tangent", subspaces)]
        here = self.splitter.split_point
        named: dict[str, Subspace] = {}
        for name, item in items:
            subspace = item if isinstance(item, Subspace) else getattr(item, "subspace", None)
            if not isinstance(subspace, Subspace):
                raise InvalidInputError(
                    f"subspaces must be a TangentExplainer, a Subspace or a dict of them; {name!r} is {type(item).__name__}."
                )
            if str(name) in named:
                raise InvalidInputError(
                    f"Two subspaces are named {str(name)!r} (keys {[k for k, _ in items if str(k) == str(name)]}), whose rows would share one name: give each tangent its own name."
                )
            named[str(name)] = subspace
        if not named:
            raise InvalidInputError("No subspace to probe: pass a TangentExplainer, a Subspace or a non-empty dict.")
        dims = {subspace.dim for subspace in named.values()}
        if len(dims) > 1:
            raise InvalidInputError(f"The subspaces live in spaces of different dimensions: {sorted(dims)}.")
        for name, subspace in named.items():
            fitted = subspace.split_point
            if fitted is not None and fitted != here:
                raise InvalidInputError(
                    f"Subspace {name!r} was fitted at split point '{fitted}' but this probe reads '{here}': probe at '{fitted}' (ModelWithSplitPoints(..., split_point='{fitted}')) or fit the tangent at '{here}'."
                )
            refuse_other_call(subspace.call, self.point.call, f"Subspace {name!r}", "GradientProbe(..., call=...)")
        return named

    def _accumulate(
        self,
        inputs: Any,
        labels: Any,
        columns: SubspaceColumns,
        max_tokens: int | None,
        progress: bool | None,
        sharded: bool,
    ) -> tuple[ProbeSums, Breakdown]:
        """This shard's `ProbeSums` (of its sequences with probed rows) and `Breakdown`, summed on the device."""
        dim = columns.bases.shape[0]
        shard = (distributed.rank(), distributed.world_size()) if sharded else (0, 1)
        if sharded and max_tokens is not None:
            max_tokens = math.ceil(max_tokens / shard[1])  # a per-rank cap
        tally = Tally()
        per_sequence: list[tuple[torch.Tensor, ...]] = []  # (energy, total, has rows, id) of each batch
        moments = MomentAccumulator(dim, device=self.device)
        loss_sum = loss_count = torch.zeros((), dtype=torch.float64, device=self.device)
        breakdown = Breakdown(
            self.point.vocab_size or len(self.splitter.tokenizer),  # the embedding's rows, else the tokenizer's
            [columns.tangent_column(name) for name in columns.tangents],
            [columns.control_columns(name) for name in columns.tangents],
            self.device,
        )
        for step in self.steps(
            inputs,
            labels,
            max_tokens=max_tokens,
            progress=progress if distributed.is_main_process() else False,
            description="Probing gradients",
            tally=tally,
            shard=shard,
            defer_nonfinite=sharded,
        ):
            width = step.gradient.shape[-1]
            if width != dim:
                fitted_at = sorted(
                    {tangent.split_point or "an unknown split point" for tangent in columns.tangents.values()}
                )
                raise InvalidInputError(
                    f"The split point '{self.splitter.split_point}' has d={width} but the subspaces live in R^{dim} (fitted at {', '.join(repr(point) for point in fitted_at)}), another layer or model: fit them on this model at this split point."
                )
            # no host synchronisation: rows not probed (padding, past the cap, a non-finite batch) are zeros
            energies = batch_energies(step.gradient, step.probed, columns)
            per_sequence.append((energies.energy, energies.total, step.probed.any(1), step.sequence_ids))
            probed = step.probed.reshape(-1)
            moments.update(energies.rows, mask=probed)
            batch = step.batch
            breakdown.add(
                batch.get("original_input_ids", batch["input_ids"]).reshape(-1),
                (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0).reshape(-1),
                energies.token_energy,
                energies.token_total,
                probed,
            )
            loss_sum = loss_sum + step.loss_sum
            loss_count = loss_count + step.loss_count
        if per_sequence:
            energy, total, keep, ids = (torch.cat(parts) for parts in zip(*per_sequence, strict=True))
            energy, total, ids = energy[keep], total[keep], ids[keep.cpu()]
        else:
            total = torch.zeros(0, dtype=torch.float64, device=self.device)
            energy, ids = total.view(0, 1).expand(0, len(columns.widths)), torch.zeros(0, dtype=torch.long)
        return ProbeSums(energy, total, ids, moments, loss_sum, loss_count, tally), breakdown

    def _reduce(self, sums: ProbeSums, sharded: bool) -> ProbeSums:
        """Every rank's sums (all-reduced and gathered when sharded); our errors for what no rank could probe."""
        tally = sums.tally
        counted = ("usable_sequences", "skipped_sequences", "skipped_batches", "nonfinite_sequences")
        counts = [sums.sequence_id.numel(), *(getattr(tally, name) for name in counted)]
        counts = torch.tensor(counts, dtype=torch.float64, device=self.device)
        counters = torch.cat([torch.stack([sums.loss_sum, sums.loss_count]), counts])
        moments = sums.moments
        if sharded:
            counters = distributed.all_reduce_sum(counters)
            moments = distributed.all_reduce_moments(moments)
        loss_sum, loss_count, n_sequences, *summed = counters.tolist()
        totals = replace(tally, **{name: int(value) for name, value in zip(counted, summed, strict=True)})
        if sharded and totals.skipped_batches and self.on_nonfinite == "raise":  # every rank raises, none waits
            if tally.first_nonfinite is not None:
                raise self.steps.nonfinite_error(*tally.first_nonfinite)
            raise NonFiniteError(
                f"Non-finite loss or gradients in a batch of another rank (its error names it). {NONFINITE_ADVICE}"
            )
        self.steps.check_usable(totals)
        if moments.count == 0:
            raise InvalidInputError(_NOTHING_PROBED)
        energy, total, ids = sums.sequence_energy, sums.sequence_total, sums.sequence_id
        if sharded:  # every rank's sequences, in sequence order
            parts = distributed.all_gather_objects((ids.cpu(), energy.cpu(), total.cpu()))
            ids, energy, total = (torch.cat(part) for part in zip(*parts, strict=True))
            order = torch.argsort(ids)
            ids, energy, total = ids[order], energy[order].to(self.device), total[order].to(self.device)
        return ProbeSums(energy, total, ids, moments, loss_sum, loss_count, totals, int(n_sequences))


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
        """Refuse a pass where no sequence was long enough; warn how many were skipped (too short, or non-finite)."""
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
