# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The tangent a live probe scores at one split point: given, fitted on the early steps, or refitted.

A fitted tangent is `TangentExplainer(method="pca")`'s streamed PCA (`OrthonormalConceptModel`) of the training
forwards' activations at the gradient rows. Each window draws its own controls (`LivePoint._drawn`), so a post-hoc
probe with `draw_seeds={name: row["draw_seed"]}` uses the same ones.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator
from ..errors import DimensionMismatchError, SplitPointError
from ..probing.statistics import SubspaceColumns
from ..reading.split_point import refuse_other_call
from ..tangents.controls import check_control_room
from ..tangents.explainers import OrthonormalConceptModel
from ..tangents.subspace import Subspace
from .options import LiveTangent

__all__ = ["TangentSchedule"]


class TangentSchedule:
    """When the tangent of one split point exists, what it is, and the activation moments it is fitted on.

    Args:
        kind: `LiveTangent.EARLY`, `GIVEN` or `REFIT`; `given` is the GIVEN subspace.
        path: The split point's module path (for messages and the fitted subspaces).
        nb_concepts: Rank k of a fitted tangent; `n_controls` and `seed` those of its controls, `n_random` (default:
            `n_controls`) its random subspaces' R' (`options.window_n_random`).
        fit_until: EARLY: the step count after which the tangent is fitted; REFIT: the refit period in steps.
        call: The call of the split-point module the probe reads (`LiveConfig.call`), recorded in fitted tangents.

    Raises:
        SplitPointError: A given subspace fitted at another split point, or at another call of it.
    """

    def __init__(
        self,
        kind: LiveTangent,
        path: str,
        *,
        nb_concepts: int,
        n_controls: int,
        seed: int,
        fit_until: int | None = None,
        given: Subspace | None = None,
        call: str | int | None = None,
        n_random: int | None = None,
    ):
        self.kind, self.path = kind, path
        self.nb_concepts, self.n_controls, self.seed = nb_concepts, n_controls, seed
        self.n_random = n_controls if n_random is None else n_random
        self.fit_until, self.call = fit_until, call
        self.activations: MomentAccumulator | None = None
        self.tangent: Subspace | None = None
        self.bases: SubspaceColumns | None = None  # the tangent, its controls and the random subspaces
        self.fitted_at: int | None = None
        self._given = given
        if given is not None and given.split_point is not None and given.split_point != path:
            raise SplitPointError(
                f"The given tangent was fitted at split point '{given.split_point}' but the live probe reads '{path}'. "
                f"Give a tangent fitted at '{path}', or attach the probe at '{given.split_point}'."
            )
        if given is not None:
            refuse_other_call(given.call, call, "The given tangent", "TrainingProbe(..., call=...)")

    def start(self, dim: int, device: torch.device) -> None:
        """Prepare for a split point of width d on `device` (the first gradient's); checks a given tangent's width.

        Raises:
            DimensionMismatchError: A given tangent whose width is not d.
            InvalidInputError: A tangent to fit with 2 nb_concepts >= d (no room for normal controls), said at the
                first micro-batch rather than when the tangent is fitted.
        """
        if self._given is not None and self.tangent is None:
            if self._given.dim != dim:
                raise DimensionMismatchError(
                    f"The {self.kind.value} tangent lives in R^{self._given.dim} but split point '{self.path}' has "
                    f"d={dim}: it was fitted on another layer or model. Fit it at this split point of this model."
                )
            self._use(self._given, device)
        if self.fitting and self.activations is None:
            check_control_room(self.nb_concepts, dim)
            self.activations = MomentAccumulator(dim, device=device)

    def resume(self, subspace: Subspace) -> None:
        """Take up the tangent a stopped run fitted (a resumed run scores its first window against it)."""
        self._given, self.fitted_at = subspace, subspace.step

    @property
    def fitting(self) -> bool:
        """Whether training activations are being pooled for a fit now."""
        return self.kind is LiveTangent.REFIT or (self.kind is LiveTangent.EARLY and self.tangent is None)

    def add_activations(self, hidden: Float[torch.Tensor, "b l d"], rows: Bool[torch.Tensor, "b l"]) -> None:
        """Pool the activation rows of one micro-batch for the next fit."""
        if self.fitting and self.activations is not None:
            self.activations.update(hidden.reshape(-1, hidden.shape[-1]).float(), mask=rows.reshape(-1))

    def due(self, steps_done: int) -> bool:
        """Whether a fit is due once `steps_done` optimizer steps are done."""
        if not self.fitting or self.activations is None:
            return False
        since = steps_done - (self.fitted_at or 0)
        return steps_done >= self.fit_until if self.kind is LiveTangent.EARLY else since >= self.fit_until

    def fit(self, steps_done: int, device: torch.device, *, sharded: bool) -> Subspace | None:
        """Fit the tangent on the rows pooled (over every rank when `sharded`); None when no row was pooled yet.

        A refit starts pooling afresh; an early tangent stops pooling.
        """
        moments = distributed.all_reduce_moments(self.activations) if sharded else self.activations
        if moments.count == 0:
            return None
        model = OrthonormalConceptModel(self.nb_concepts, moments.dim, center=True, device=str(moments.device))
        model.merge(lambda _: moments)
        subspace = model.get_subspace().replace(
            name=self.kind.value,
            method="pca",
            split_point=self.path,
            call=self.call,
            step=steps_done,
            info={"fitted_on_steps": [self.fitted_at or 0, steps_done], "rows": moments.count},
        )
        self.fitted_at = steps_done
        self._use(subspace, device)
        self.activations = MomentAccumulator(moments.dim, device=moments.device) if self.fitting else None
        return subspace

    def _use(self, subspace: Subspace, device: torch.device) -> None:
        tangent = subspace.to(device=device, dtype=torch.float32)
        self.tangent = tangent
        self.bases = SubspaceColumns.draw(
            {self.kind.value: tangent}, n_controls=self.n_controls, n_random=self.n_random, seed=self.seed
        )
