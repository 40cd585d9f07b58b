# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's reference tangents: given, saved by an earlier run, or fitted on the early checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..commons import distributed
from ..commons.progress import progress_bar
from ..errors import DimensionMismatchError, ResultsStoreError
from ..tangents.subspace import Subspace
from .checkpoints import Checkpoint
from .early_pool import EarlyPool
from .settings import ReferenceKind, SweepSettings

if TYPE_CHECKING:
    from .runner import CheckpointSweep

__all__ = ["ReferenceTangents", "saved_reference"]


def saved_reference(path: Path, settings: SweepSettings) -> Subspace:
    """A reference tangent saved by an earlier run, checked against the settings' rank.

    Args:
        path: Its safetensors file (`SweepStore.reference_path`).
        settings: The sweep's settings (its `nb_concepts`, `streams` and `device`).

    Returns:
        The saved `Subspace`, on `settings.device`.

    Raises:
        ResultsStoreError: It was fitted with another rank than the settings ask for.
    """
    reference = Subspace.load(path, device=settings.device)
    if reference.rank > settings.nb_concepts or (settings.streams and reference.rank != settings.nb_concepts):
        raise ResultsStoreError(
            f"{path} holds a rank-{reference.rank} reference but the sweep asks for nb_concepts="
            f"{settings.nb_concepts}: it was fitted with other settings. Delete it to refit, or rerun with "
            "overwrite=True."
        )
    return reference


class ReferenceTangents:
    """The reference tangents of a sweep's split points, fitted on its early checkpoints where none is saved.

    Args:
        sweep: The sweep whose checkpoints are loaded and read (its pipeline, splitters and fit-text reads).
    """

    def __init__(self, sweep: CheckpointSweep):
        self.sweep = sweep
        self.settings = sweep.settings
        self.store = sweep.store

    def missing(self) -> list[int | str]:
        """The split points whose reference tangent is fitted on the early checkpoints and not saved yet."""
        if self.settings.given_reference or self.settings.reference is ReferenceKind.EACH:
            return []
        return [layer for layer in self.settings.layers if not self.store.reference_path(layer).exists()]

    def fits_here(self) -> bool:
        """Whether this rank reads the early checkpoints when references are fitted (all ranks when the method
        streams; rank 0 otherwise)."""
        return self.settings.streams or distributed.is_main_process()

    def early_to_load(self) -> list[Checkpoint]:
        """The early checkpoints this rank loads to fit the missing references, in order (none if none is missing)."""
        return self.settings.early if self.missing() and self.fits_here() else []

    def by_layer(self) -> dict[int | str, Subspace]:
        """The reference tangent of each split point: given, loaded from results_dir, or fitted on early checkpoints
        (only for the split points without a saved one); empty when every checkpoint takes its own."""
        if self.settings.given_reference:
            return self.settings.given_reference
        if self.settings.reference is ReferenceKind.EACH:
            return {}
        paths = {layer: self.store.reference_path(layer) for layer in self.settings.layers}
        saved = {layer: path for layer, path in paths.items() if path.exists()}
        missing = self.missing()
        if missing and self.fits_here():
            fitted = self._fit(missing)
            if distributed.is_main_process():
                for layer, subspace in fitted.items():
                    self.store.save_reference(layer, subspace)
        if missing and not self.settings.streams:
            distributed.barrier()  # rank 0 fits and saves; the others read its files
            saved = paths
        references = {layer: saved_reference(path, self.settings) for layer, path in saved.items()}
        if missing and self.settings.streams:
            references.update(fitted)
        return {layer: references[layer] for layer in self.settings.layers}

    def _fit(self, layers: list[int | str]) -> dict[int | str, Subspace]:
        """Fit the reference tangent of some split points on the activations pooled over the early checkpoints; in
        one process, keep each early checkpoint's fit read for its own rows."""
        sweep, early = self.sweep, self.settings.early
        streamed = self.settings.streams
        pools = {layer: EarlyPool(streamed=streamed, centering=self.settings.early_centering) for layer in layers}
        references: dict[int | str, Subspace] = {}
        bar = progress_bar(early, progress=sweep._shows(), desc="Reference tangent (early checkpoints)", unit="ckpt")
        for index, checkpoint in enumerate(bar):
            with sweep._load(checkpoint) as (model, tokenizer, _):
                sweep._fingerprints.of(checkpoint)  # taken while its files are cached (a budget evicts them after)
                for layer in layers:
                    splitter = sweep._splitter(model, tokenizer, layer, checkpoint)
                    pool = pools[layer]
                    pool.start_checkpoint(lambda splitter=splitter: sweep._new_tangent(splitter))
                    if pool.dim != model.config.hidden_size and index > 0:
                        raise DimensionMismatchError(
                            f"Checkpoint {checkpoint.name} has hidden size {model.config.hidden_size} but the "
                            f"earlier checkpoints have {pool.dim}."
                        )
                    own = sweep._fit_reader(splitter) if checkpoint.step in sweep._kept_steps else None
                    for rows, ids, locations in sweep._activation_batches(splitter, sharded=streamed):
                        pool.add(rows)
                        if own is not None:
                            own.add_or_defer(rows, ids, locations)
                    pool.end_checkpoint()
                    if own is not None:  # its rows, in the main loop, take this read
                        sweep._kept_reads[(checkpoint.step, layer)] = own.kept()
                    if index == len(early) - 1:
                        references[layer] = self._named(pool.fit(), early)
            sweep._pipeline.done(checkpoint)
        return references

    def _named(self, subspace: Subspace, early: list[Checkpoint]) -> Subspace:
        """A fitted reference named "early", its info saying which early checkpoints (and content) it pools."""
        info = {
            "early_steps": [c.step for c in early],
            "early_fingerprints": {str(c.step): self.sweep._fingerprints.of(c) for c in early},
        }
        return subspace.replace(name="early", call=self.settings.call, info={**subspace.info, **info})
