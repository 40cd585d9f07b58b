# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tangent subspaces as Interpreto concept explainers: any concept method's dictionary, orthonormalised (docs/concepts.md)."""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from interpreto import ModelWithSplitPoints, concepts
from interpreto._vendor.overcomplete.base import BaseDictionaryLearning
from interpreto.concepts.base import ConceptAutoEncoderExplainer
from interpreto.concepts.methods.sklearn_wrappers import SkLearnWrapperExplainer
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from jaxtyping import Float

from .. import errors
from ..commons import distributed
from ..commons.accumulators import MomentAccumulator, top_eigenvectors
from ..commons.options import check_device, check_number, check_positive_int, check_seed
from ..commons.tensors import as_float_tensor
from ..errors import AnisotropyError, DegenerateStatisticsWarning, InvalidInputError, OutOfOrderError, ReadingWarning
from ..reading.activations import NONFINITE_READ_ADVICE, iter_token_activations
from ..reading.positions import uses_absolute_positions
from ..reading.split_point import SplitPoint, refuse_unsupported_kernels, splitter_model
from . import sharing
from .controls import check_control_room
from .sharing import FitRecord
from .subspace import Subspace

__all__ = [
    "TangentExplainer",
    "PCATangent",
    "SklearnPCATangent",
    "SemiNMFTangent",
    "NMFTangent",
    "ICATangent",
    "SVDTangent",
    "TopKSAETangent",
    "OrthonormalConceptModel",
    "accepted_method_kwargs",
    "check_method_kwargs",
    "method_streams",
    "tangent_method_names",
]


# Eigenvalues of the activation covariance below this fraction of the largest count as zero: float32 rows leave a
# rounding floor near 1e-8 of it, and the spectra of real activations stay far above.
_RANK_RTOL = 1e-6

# A total variance below this fraction of the rows' mean squared norm is float32 rounding, not spread.
_ZERO_SPREAD_RTOL = torch.finfo(torch.float32).eps ** 2

_MORE_ROWS = "more fit texts (a larger max_tokens in fit, max_fit_tokens in a sweep)"


def _refuse_undefined_subspace(n_rows: int, spread: float, scale: float, *, centred: bool) -> None:
    """Refuse rows that define no direction: fewer than 2 or identical rows when centred, all-zero rows when not."""
    if centred and n_rows < 2:
        raise InvalidInputError(f"Centring needs at least 2 activation rows, got {n_rows}: give {_MORE_ROWS}.")
    if not spread > _ZERO_SPREAD_RTOL * scale:
        what = "identical (zero variance once centred)" if centred else "all zero"
        raise InvalidInputError(f"The {n_rows} activation rows are {what}: fit on texts whose activations differ.")


def _warn_if_rank_below(nb_concepts: int, n_rows: int, rank: int, *, centred: bool) -> None:
    """Warn (`DegenerateStatisticsWarning`) when the rows span fewer than k dimensions (`rank`), or number <= k."""
    if rank < nb_concepts:
        found = f"the {n_rows} activation rows the tangent is fitted on span only {rank} dimension(s)"
        found, lower = found + " once centred" * centred, rank
    elif n_rows <= nb_concepts:
        found = f"the tangent is fitted on only {n_rows} activation rows: a rank-{nb_concepts} fit needs more"
        lower = n_rows - 1
    else:
        return
    advice = f", or use nb_concepts <= {lower}" if lower > 0 else ""
    message = f"nb_concepts={nb_concepts} but {found}: give {_MORE_ROWS}{advice}."
    warnings.warn(message, DegenerateStatisticsWarning, stacklevel=5)  # the user's call of fit, finalize, .subspace


def _numerical_rank(values: Float[torch.Tensor, " k"]) -> int:
    """How many of the top eigenvalues (k,), largest first, exceed `_RANK_RTOL` times the largest."""
    return int((values > _RANK_RTOL * values[0]).sum()) if values[0] > 0 else 0


class OrthonormalConceptModel(BaseDictionaryLearning):
    """Concepts as coordinates in an orthonormal basis Q (d, k); the streamed PCA's moments, Q recomputed lazily."""

    def __init__(self, nb_concepts: int, input_size: int, *, center: bool = True, device: str = "cpu"):
        super().__init__(nb_concepts, device=device)
        self.input_size, self.center, self._stale = input_size, center, False
        self.register_buffer("basis", torch.zeros(input_size, nb_concepts, device=device))
        self.register_buffer("mean", torch.zeros(input_size, device=device))
        self.moments: MomentAccumulator | None = None
        self.subspace: Subspace | None = None

    def partial_fit(self, x: Float[torch.Tensor, "n d"]) -> OrthonormalConceptModel:
        """Accumulate float64 moments of a batch; the basis is recomputed when next used."""
        self.merge(lambda moments: moments.update(x), device=x.device)
        return self

    def merge(self, reduce: Any, device: Any = None) -> None:
        """Replace the moments by `reduce(moments)` (e.g. an all-reduce over ranks); an empty shard takes part."""
        if self.moments is None:
            self.moments = MomentAccumulator(self.input_size, device=self.basis.device if device is None else device)
        self.moments, self._stale = reduce(self.moments), True

    def _refresh(self) -> None:
        """Recompute the basis from the moments: refuse rows that define no direction, warn when rank < k."""
        if not self._stale:
            return
        moments, n_rows = self.moments, self.moments.count
        matrix = moments.covariance() if self.center else moments.second_moment()
        spread = float(torch.trace(matrix))
        scale = spread + float(moments.mean.square().sum()) if self.center else spread
        _refuse_undefined_subspace(n_rows, spread, scale, centred=self.center)
        values, vectors = top_eigenvectors(matrix, self.nb_concepts)
        rank = min(n_rows - int(self.center), _numerical_rank(values))
        _warn_if_rank_below(self.nb_concepts, n_rows, rank, centred=self.center)
        self.set_subspace(Subspace(vectors.float(), mean=moments.mean.float() if self.center else None, method="pca"))

    def set_subspace(self, subspace: Subspace) -> None:
        """Use a fitted subspace as the concept basis."""
        self.basis = subspace.basis.detach().to(device=self.basis.device, dtype=torch.float32)
        mean = torch.zeros_like(self.mean) if subspace.mean is None else subspace.mean.detach()
        self.mean = mean.to(device=self.mean.device, dtype=torch.float32)
        self.nb_concepts, self.subspace, self._stale, self.fitted = subspace.rank, subspace, False, True

    def get_subspace(self) -> Subspace:
        """The fitted Subspace (refreshed from the moments if new batches came in)."""
        self._refresh()
        if self.subspace is None:
            raise OutOfOrderError("This tangent is not fitted yet: call .fit(activations) first.")
        return self.subspace

    def fit(self, x: Float[torch.Tensor, "n d"]) -> OrthonormalConceptModel:
        """Fit by streamed PCA on one batch (use `partial_fit` for several)."""
        self.moments = None
        return self.partial_fit(x)

    def encode(self, x: Float[torch.Tensor, "n d"]) -> Float[torch.Tensor, "n k"]:
        """Coordinates (x - mean) Q, shape (n, k)."""
        self._refresh()
        x = x.to(self.basis.device)
        return (x - self.mean.to(x.dtype)) @ self.basis.to(x.dtype)

    def decode(self, z: Float[torch.Tensor, "n k"]) -> Float[torch.Tensor, "n d"]:
        """Points z Q^T + mean, shape (n, d)."""
        self._refresh()
        z = z.to(self.basis.device)
        return z @ self.basis.to(z.dtype).T + self.mean.to(z.dtype)

    def get_dictionary(self) -> Float[torch.Tensor, "k d"]:
        """The basis as rows, Q^T, shape (k, d)."""
        self._refresh()
        return self.basis.T


#: The named tangent classes by method name ("pca", "semi_nmf", ...), filled as each is declared.
_NAMED_TANGENTS: dict[str, type[TangentExplainer]] = {}


def _resolve_method(method: str | type) -> tuple[str, type[ConceptAutoEncoderExplainer] | None]:
    """The method's name and the Interpreto explainer class that fits it (None for the streamed PCA)."""
    if isinstance(method, type) and issubclass(method, ConceptAutoEncoderExplainer):
        return method.__name__, method
    if isinstance(method, str) and method in _NAMED_TANGENTS:
        return method, _NAMED_TANGENTS[method].concept_class
    names = ", ".join(map(repr, _NAMED_TANGENTS))
    raise InvalidInputError(f"Unknown tangent method {method!r}: give one of {names} or an Interpreto concept class.")


#: Arguments the explainer classes pass themselves: never the user's.
_PASSED_BY_US = frozenset({"self", "splitter", "nb_concepts", "input_size", "input_shape", "device"})


def accepted_method_kwargs(concept_class: type | None) -> set[str] | None:
    """The keywords of an Interpreto class's `__init__` (and its concept model's); None when `**kwargs` hides them."""
    if concept_class is None:
        return set()
    built = inspect.getattr_static(concept_class, "concept_model_class", None)
    with contextlib.suppress(Exception):  # a property that needs its instance stays one: the class cannot say
        built = built.fget(None) if isinstance(built, property) else built
    accepted: set[str] = set()
    for signed in (concept_class, built):
        if not isinstance(signed, type):
            return None
        parameters = inspect.signature(signed.__init__).parameters.values()
        accepted |= {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return accepted - _PASSED_BY_US
    return None


def check_method_kwargs(method: str | type, method_kwargs: dict[str, Any]) -> tuple[str, type | None]:
    """The method's name and class (`_resolve_method`); refuses a keyword neither we nor the method's class take."""
    name, concept_class = _resolve_method(method)
    accepted = accepted_method_kwargs(concept_class)
    own = set(inspect.signature(TangentExplainer.__init__).parameters)
    unknown = sorted(set(method_kwargs) - own - accepted) if accepted is not None else []
    if unknown:
        takes = ", ".join(sorted(accepted)) if accepted else "no other keyword"
        owner = "the streamed PCA" if concept_class is None else concept_class.__name__
        raise InvalidInputError(
            f"Tangent method {name!r} does not take {', '.join(map(repr, unknown))}: {owner} takes {takes} (and ours)."
        )
    return name, concept_class


def tangent_method_names() -> list[str]:
    """The method names a tangent can be fitted with, one per named tangent class, in declaration order.

    Examples:
        >>> tangent_method_names()
        ['pca', 'pca_sklearn', 'semi_nmf', 'nmf', 'ica', 'svd', 'topk_sae']
    """
    return list(_NAMED_TANGENTS)


def method_streams(method: str | type) -> bool:
    """Whether a tangent method (a name or an Interpreto class) fits batch by batch (`partial_fit`): "pca" only."""
    return _resolve_method(method)[1] is None


def _check_splitter(splitter: Any) -> None:
    """Refuse a splitter that is not an Interpreto `BaseSplitter`."""
    if not isinstance(splitter, BaseSplitter):
        raise InvalidInputError(f"splitter must be an Interpreto ModelWithSplitPoints, got {type(splitter).__name__}.")


def _latent_dim(splitter: BaseSplitter) -> int:
    """The split point's width d: a 2-token forward (ms), else nnsight's `get_latent_shape` (~1 s), else `hidden_size`."""
    # other splitters (e.g. SplitterForClassification) define their own latent space
    if isinstance(splitter, ModelWithSplitPoints) and isinstance(getattr(splitter, "split_point", None), str):
        refuse_unsupported_kernels(splitter_model(splitter))  # a refusal, not a width to look up elsewhere
        with contextlib.suppress(InvalidInputError):  # no such module, or a model that pads inside its forward
            if (width := SplitPoint(splitter).width()) is not None:
                return width
    try:
        return int(splitter.get_latent_shape()[-1])
    except Exception:  # noqa: BLE001  (nnsight's scan fails on some architectures; the config knows d)
        if getattr(getattr(splitter_model(splitter), "config", None), "hidden_size", None):
            return int(splitter_model(splitter).config.hidden_size)
        raise


def _check_batch(activations: Any, name: str, input_size: int, splitter: BaseSplitter) -> torch.Tensor:
    """`activations` as a finite float (n, d) tensor, refused when d is not the split point's `input_size`."""
    batch = as_float_tensor(activations, name=name)
    if batch.shape[1] != input_size:
        raise InvalidInputError(f"{name} have d={batch.shape[1]} but '{splitter.split_point}' has d={input_size}.")
    return batch


def _are_texts(inputs: Any) -> bool:
    """Whether `inputs` is a text or a non-empty list / tuple of texts (rather than activations)."""
    listed = isinstance(inputs, (list, tuple)) and bool(inputs) and all(isinstance(text, str) for text in inputs)
    return isinstance(inputs, str) or listed


def _check_pooled_rows(pooled: Float[torch.Tensor, "n d"], nb_concepts: int, *, centred: bool, sklearn: bool) -> None:
    """Refuse rows that define no direction (or too few for scikit-learn's PCA); warn when n - 1 < k centred."""
    n_rows = pooled.shape[0]
    scale = float(pooled.square().sum(1).mean())
    spread = float(pooled.var(0, correction=0).sum()) if centred else scale  # identical rows give exactly 0
    _refuse_undefined_subspace(n_rows, spread, scale, centred=centred)
    if sklearn and n_rows < nb_concepts:
        raise InvalidInputError(
            f"scikit-learn's PCA cannot fit nb_concepts={nb_concepts} components from {n_rows} activation rows: use method='pca'."
        )
    _warn_if_rank_below(nb_concepts, n_rows, n_rows - int(centred), centred=centred)


def _batches(splitter: BaseSplitter, input_size: int, activations: Any, **reader: Any) -> Iterator[torch.Tensor]:
    """Texts read lazily at the split point, or the (n, d) activations given (one or an iterable), checked."""
    if _are_texts(activations):
        activations = (_finite_read(rows) for rows, _ in iter_token_activations(splitter, activations, **reader))
    else:  # Interpreto's `get_activations` reads left-padded texts at shifted learned absolute positions
        left = getattr(getattr(splitter, "tokenizer", None), "padding_side", "right") == "left"
        if left and uses_absolute_positions(model := splitter_model(splitter)):
            message = f"{type(model).__name__} has learned absolute positions and pads left: use tangent.fit(texts)."
            warnings.warn(f"{message} (get_activations reads shifted positions).", ReadingWarning, stacklevel=3)
        if isinstance(activations, torch.Tensor) or hasattr(activations, "__array__"):
            activations = [activations]
        elif not isinstance(activations, Iterable):
            raise InvalidInputError(f"activations must be texts or (n, d) tensors, got {type(activations)}.")
    return (
        _check_batch(part, f"activations[{index}]", input_size, splitter) for index, part in enumerate(activations)
    )


def _finite_read(rows: torch.Tensor) -> torch.Tensor:
    """Rows read from texts, refused with what to try (not "clean them") when they hold NaN or infinity."""
    if not torch.isfinite(rows).all():
        raise errors.NonFiniteError(f"The rows read from the texts hold NaN or infinity. {NONFINITE_READ_ADVICE}")
    return rows


class TangentExplainer(sharing.SharedTangent, ConceptAutoEncoderExplainer):
    """Tangent proxy of the activation manifold at a split point, as an Interpreto concept explainer.

    The method's atoms are orthonormalised into the basis Q (d, k); concepts are the coordinates (h - mean) Q.
    "pca" is a streamed exact PCA; the others fit Interpreto's explainers on the pooled rows (docs/concepts.md).

    Args:
        splitter: Interpreto `ModelWithSplitPoints` (or any `BaseSplitter`) at the split point of interest.
        nb_concepts: Requested rank k. Needs 2k < d, so that the normal controls fit in the complement.
        method: One of `tangent_method_names()` or an Interpreto `ConceptAutoEncoderExplainer` class (default: the
            named class's own, "pca" for `TangentExplainer`).
        center: Centre activations before fitting; the subspace keeps the mean for `coords`/`project`.
        device: Device of the concept model.
        rtol: Relative singular-value threshold of the rank-revealing orthonormalisation.
        seed: Seed of the iterative methods (torch draws and scikit-learn's `random_state`).
        **method_kwargs: For the Interpreto explainer (e.g. `top_k` for "topk_sae"), checked here.

    Raises:
        InvalidInputError: Unknown method, 2k >= d, or a keyword the method's Interpreto class does not take.

    Examples:
        >>> tangent = ia.PCATangent(mwsp, nb_concepts=16).fit(texts)  # doctest: +SKIP
        >>> tangent.subspace.basis.shape  # doctest: +SKIP
        torch.Size([64, 16])
    """

    has_differentiable_concept_encoder = True
    has_differentiable_concept_decoder = True
    default_method = "pca"
    concept_class: type[ConceptAutoEncoderExplainer] | None = None  # None: the streamed PCA

    def __init_subclass__(cls, *, method: str | None = None, concept_class: type | None = None, **kwargs: Any):
        """Register a named tangent (`class ICATangent(TangentExplainer, method="ica", concept_class=ICAConcepts)`)."""
        super().__init_subclass__(**kwargs)
        if method is not None:
            cls.default_method, cls.concept_class, _NAMED_TANGENTS[method] = method, concept_class, cls
            # its own summary, then TangentExplainer's Args, Raises and Examples
            shared = (TangentExplainer.__doc__ or "").replace("ia.PCATangent(", f"ia.{cls.__name__}(")
            uses = "the streamed PCA" if concept_class is None else f"Interpreto's `{concept_class.__name__}`"
            same = f'Same as `TangentExplainer(..., method="{method}")`: {uses}.'
            cls.__doc__ = f"{(cls.__doc__ or '').strip()}\n\n    {same}\n\n{shared[shared.find('    Args:') :]}"

    def __init__(
        self,
        splitter: BaseSplitter,
        *,
        nb_concepts: int,
        method: str | type | None = None,
        center: bool = True,
        device: torch.device | str = "cpu",
        rtol: float = 1e-3,
        seed: int = 0,
        **method_kwargs: Any,
    ):
        _check_splitter(splitter)
        self.method_name, self.concept_class = check_method_kwargs(method or self.default_method, method_kwargs)
        self.input_size = _latent_dim(splitter)
        check_positive_int("nb_concepts", nb_concepts)
        check_control_room(nb_concepts, self.input_size)
        self.nb_concepts, self.center, self.rtol = nb_concepts, center, check_number("rtol", rtol, at_least=0)
        check_device("device", device)
        self.seed, self.method_kwargs = check_seed("seed", seed), method_kwargs
        concept_model = OrthonormalConceptModel(nb_concepts, self.input_size, center=center, device=str(device))
        super().__init__(splitter, concept_model)
        self.inner_explainer: ConceptAutoEncoderExplainer | None = None
        # what fit / partial_fit were given (saved by save_pretrained), and the `call` its texts were read at
        self.fit_record, self.fitted_call = None, None

    @classmethod
    def from_interpreto(
        cls,
        explainer: ConceptAutoEncoderExplainer,
        *,
        mean: Float[torch.Tensor, " d"] | None = None,
        rtol: float = 1e-3,
    ) -> TangentExplainer:
        """The tangent spanned by the (k, d) dictionary of any fitted Interpreto explainer (kept as `inner_explainer`).

        Args:
            explainer: A fitted Interpreto concept explainer; its splitter is the tangent's.
            mean: Centre (d,) of the activations, for the concepts, `coords` and `project` (never energy shares).
            rtol: Relative singular-value threshold of the orthonormalisation.

        Returns:
            A fitted tangent; its `.subspace.method` is the explainer's class name.

        Raises:
            InvalidInputError: Not a `ConceptAutoEncoderExplainer`, 2k >= d, or a dictionary or mean of another d.
            OutOfOrderError: An explainer not fitted yet.
            NonFiniteError: A dictionary holding NaN or infinity.

        Examples:
            >>> explainer = interpreto.concepts.ConvexNMFConcepts(mwsp, nb_concepts=8)  # doctest: +SKIP
            >>> explainer.fit(activations)  # doctest: +SKIP
            >>> ia.TangentExplainer.from_interpreto(explainer).subspace.method  # doctest: +SKIP
            'ConvexNMFConcepts'
        """
        name = type(explainer).__name__
        if not isinstance(explainer, ConceptAutoEncoderExplainer):
            raise InvalidInputError(
                f"from_interpreto takes a fitted Interpreto ConceptAutoEncoderExplainer, got {name}."
            )
        if not explainer.is_fitted:
            raise OutOfOrderError(f"This {name} is not fitted: call its fit(activations) first.")
        dictionary = as_float_tensor(explainer.get_dictionary().detach(), name=f"{name}.get_dictionary()")
        check_control_room(dictionary.shape[0], dictionary.shape[1], option=f"{name}'s nb_concepts")  # 2k < d
        options = {"method": type(explainer), "center": mean is not None, "device": dictionary.device, "rtol": rtol}
        tangent = cls(explainer.splitter, nb_concepts=dictionary.shape[0], **options)
        _check_batch(dictionary, f"{name}'s dictionary atoms", tangent.input_size, tangent.splitter)
        tangent._adopt(explainer, dictionary, mean)
        return tangent

    @property
    def streams(self) -> bool:
        """Whether the method fits batch by batch (`partial_fit`, `merge_across_ranks`, `finalize`): "pca" only."""
        return self.concept_class is None

    def merge_across_ranks(self) -> TangentExplainer:
        """All-reduce the streamed PCA's moments over a torch.distributed group (call on every rank; no group: no-op)."""
        if not self.streams:
            raise InvalidInputError(f"Method {self.method_name!r} does not stream: fit it on pooled activations.")
        self.concept_model.merge(distributed.all_reduce_moments)
        return self

    def finalize(self) -> TangentExplainer:
        """Compute the streamed PCA's basis from the moments so far (as `.subspace` does; refused rows keep them)."""
        if self.streams and self.concept_model.moments is None:
            raise OutOfOrderError(f"{type(self).__name__} has no moments yet: call partial_fit(...) first.")
        self.concept_model.get_subspace()
        return self

    def fit(
        self,
        activations: Any,
        *,
        include_special: bool = False,
        max_tokens: int | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
        call: str | int | None = None,
        progress: bool | None = None,
        **fit_kwargs: Any,
    ) -> TangentExplainer:
        """Fit the tangent subspace, on texts (read here, the recommended way) or on activations.

        Args:
            activations: Texts, read at the split point as `ia.token_activations` does (the rows `GradientProbe`
                probes), or one (n, d) tensor, or a list / iterable of them pooled (streamed for "pca").
            include_special: With texts: fit on special tokens (BOS, CLS, SEP, ...) too.
            max_tokens: With texts: stop reading after this many rows.
            batch_size: With texts: sequences per forward (default: the splitter's `batch_size`).
            max_length: With texts: truncation length in tokens (default: the model's and tokenizer's limit).
            call: With texts: which call of a module run several times per forward, "first", "last" or an index.
            progress: With texts: a progress bar; None (default) in interactive sessions only.
            **fit_kwargs: Passed to the Interpreto explainer's `fit` (e.g. `nb_epochs` for SAEs).

        Returns:
            self, with `.subspace` set.

        Raises:
            InvalidInputError: Activations not (n, d) at the split point's d, no row (one, when centred), identical
                rows when centred, all-zero rows when not, or fewer rows than `nb_concepts` for "pca_sklearn".
            NonFiniteError: NaN or infinite activations.

        Warns:
            DegenerateStatisticsWarning: Fewer than k + 1 rows, or rows spanning fewer than `nb_concepts` dimensions.
            ReadingWarning: Activations (not texts) on an absolute-position model whose tokenizer pads left.
        """
        reader = {"include_special": include_special, "max_tokens": max_tokens, "batch_size": batch_size}
        reader.update(max_length=max_length, call=call, progress=progress)
        batches = _batches(self.splitter, self.input_size, activations, **reader)
        if self.streams:
            self.concept_model.moments = None
            try:
                self._stream(batches).concept_model.get_subspace()  # the basis now: fit itself refuses degenerate rows
            except AnisotropyError:
                self.concept_model.moments, self.concept_model._stale = None, False  # unfitted, not half-fitted
                raise
        else:
            self._fit_pooled(batches, **fit_kwargs)
        self.fit_record = FitRecord().add(activations if _are_texts(activations) else None, reader)
        self.fitted_call = call if _are_texts(activations) else None
        return self

    def _fit_pooled(self, batches: Iterable[torch.Tensor], **fit_kwargs: Any) -> None:
        """Fit a new explainer of the method's class on the pooled rows under the seed, and adopt its dictionary."""
        batches = list(batches)
        if sum(batch.shape[0] for batch in batches) == 0:
            raise InvalidInputError("No activations to fit on: pass at least one (n, d) tensor with n > 0.")
        pooled = torch.cat([batch.float() for batch in batches]).to(self.device)
        kind = self.concept_class
        centred = self.center and kind is not concepts.NMFConcepts  # NMF needs non-negative inputs
        _check_pooled_rows(pooled, self.nb_concepts, centred=centred, sklearn=kind is concepts.PCAConcepts)
        mean = pooled.mean(0)
        training_data = pooled - mean if centred else pooled
        kwargs = {"force_relu": True} if kind is concepts.NMFConcepts else {}
        if issubclass(kind, SkLearnWrapperExplainer):
            kwargs["random_state"] = self.seed
        kwargs |= self.method_kwargs
        inner = kind(self.splitter, nb_concepts=self.nb_concepts, device=str(self.device), **kwargs)
        devices = [training_data.device] if training_data.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # torch-based methods draw from the seed, not the global state
            torch.manual_seed(self.seed)
            inner.fit(training_data, **fit_kwargs)
        self._adopt(inner, inner.get_dictionary().detach(), mean if self.center else None)

    def partial_fit(self, activations: Any, **reader: Any) -> TangentExplainer:
        """Add texts or activation batches to the streamed PCA ("pca" only; degenerate rows are checked at `finalize`).

        Args:
            activations: Texts, an (n, d) tensor, or a list / iterable of them (see `fit`).
            **reader: With texts: `fit`'s reading options.
        """
        if not self.streams:
            raise InvalidInputError(f"partial_fit streams PCA only; method {self.method_name!r} needs fit().")
        if self.concept_model.moments is None or self.fit_record is None:  # a new stream of moments
            self.fit_record = FitRecord()
            self.fitted_call = reader.get("call") if _are_texts(activations) else None
        self._stream(_batches(self.splitter, self.input_size, activations, **reader))
        self.fit_record.add(activations if _are_texts(activations) else None, reader)
        return self

    def _stream(self, batches: Iterable[torch.Tensor]) -> TangentExplainer:
        """Add checked (n, d) batches to the streamed PCA's moments."""
        for batch in batches:
            self.concept_model.partial_fit(batch.to(self.device))
        if self.concept_model.moments is None or self.concept_model.moments.count == 0:
            self.concept_model.moments, self.concept_model._stale = None, False  # stay unfitted, not half-fitted
            raise InvalidInputError("No activations to fit on: pass at least one (n, d) tensor with n > 0.")
        return self

    def _adopt(self, explainer: ConceptAutoEncoderExplainer, dictionary: torch.Tensor, mean: Any) -> None:
        """Take the span of a fitted explainer's (k, d) dictionary, orthonormalised, as the basis; keep the explainer."""
        subspace = Subspace.from_dictionary(dictionary, mean=mean, rtol=self.rtol, method=self.method_name)
        self.inner_explainer = explainer
        self.concept_model.set_subspace(subspace)

    @property
    def subspace(self) -> Subspace:
        """The fitted tangent `Subspace` (basis (d, k), mean (d,) or None).

        Raises:
            OutOfOrderError: Before `fit`.
            InvalidInputError: A streamed PCA of one row or identical rows when centred, of all-zero rows when not.

        Warns:
            DegenerateStatisticsWarning: Rows spanning fewer than `nb_concepts` dimensions.
        """
        fitted = self.concept_model.get_subspace()  # refuses an unfitted tangent
        where = {"split_point": self.splitter.split_point, "call": self.fitted_call}
        return fitted.replace(name=fitted.name or "tangent", method=self.method_name, **where)

    @property
    def is_fitted(self) -> bool:
        """Whether `fit` (or `partial_fit`) has given the tangent a basis."""
        return bool(self.concept_model.fitted or self.concept_model._stale)

    @classmethod
    def from_pretrained(
        cls,
        source: str | Path,
        splitter: BaseSplitter,
        *,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
        local_files_only: bool = False,
        device: torch.device | str = "cpu",
        hub_timeout: float | None = None,
    ) -> TangentExplainer:
        """A tangent saved by `save_pretrained` or `push_to_hub`, bit for bit, as the saved method's class.

        Args:
            source: The folder, or a Hub repository id ("user/name"), downloaded with `snapshot_download`.
            splitter: Interpreto `ModelWithSplitPoints` at the split point the tangent was fitted at.
            revision: The repository's branch, tag or commit (Hub repositories only).
            token: Hub token, for a private repository.
            cache_dir: Hub cache folder.
            local_files_only: Only the Hub cache, no download.
            device: Device of the basis.
            hub_timeout: Seconds each Hub request may wait (None: the sweep's default, 10 s); failures are retried.

        Returns:
            The fitted tangent, with its `fit_record`.

        Raises:
            InvalidInputError: A `source` that is no str or path, a splitter not Interpreto's or of another split
                point or width d, or a class not the saved method's.
            ResultsStoreError: No such folder or repository, a failed (or timed-out) download, or a damaged folder.
        """
        _check_splitter(splitter)
        download = {"revision": revision, "token": token, "cache_dir": cache_dir, "local_files_only": local_files_only}
        folder, record, subspace = sharing.read_saved(source, device=device, hub_timeout=hub_timeout, **download)
        tangent_class, method = _saved_class(cls, record, folder)
        if (split_point := getattr(splitter, "split_point", None)) != record.split_point:
            raise InvalidInputError(
                f"The tangent saved in {folder} was fitted at split point {record.split_point!r}, not {split_point!r}: load it onto ModelWithSplitPoints(..., split_point={record.split_point!r})."
            )
        if (width := _latent_dim(splitter)) != record.dim:
            raise InvalidInputError(
                f"The tangent saved in {folder} has width d={record.dim} (model {record.model_id or 'unknown'}), but split point {split_point!r} has d={width}: load it onto the model it came from."
            )
        options = {"center": record.center, "rtol": record.rtol, "seed": record.seed, **record.method_kwargs}
        tangent = tangent_class(splitter, nb_concepts=record.nb_concepts, method=method, device=device, **options)
        tangent.concept_model.set_subspace(subspace)
        tangent.fit_record = (
            None if record.fit is None else FitRecord.from_dict(record.fit, folder / sharing.TANGENT_FILE)
        )
        tangent.fitted_call = record.call
        return tangent

    def __repr__(self) -> str:
        state = "unfitted"
        with contextlib.suppress(AnisotropyError):  # streamed rows that define no subspace yet
            state = f"rank={self.subspace.rank}" if self.is_fitted else state
        where = f"split_point={self.splitter.split_point!r}, nb_concepts={self.nb_concepts}"
        return f"{type(self).__name__}({where}, method={self.method_name!r}, {state})"


def _saved_class(cls: type[TangentExplainer], record: sharing.SavedTangent, folder: Path) -> tuple[type, Any]:
    """The class to build a saved tangent with (its method's, `cls` below it, or `TangentExplainer`), its `method=`."""
    if record.method in _NAMED_TANGENTS:
        found, method = _NAMED_TANGENTS[record.method], record.method
    else:  # one of Interpreto's concept classes or our named tangents': nothing named in the file is imported
        classes = [*vars(concepts).values(), *(tangent.concept_class for tangent in _NAMED_TANGENTS.values())]
        kinds = [kind for kind in classes if isinstance(kind, type) and issubclass(kind, ConceptAutoEncoderExplainer)]
        allowed = {f"{kind.__module__}:{kind.__qualname__}": kind for kind in kinds}
        if record.concept_class not in allowed:
            raise errors.ResultsStoreError(
                f"{folder / sharing.TANGENT_FILE} names method {record.method!r} ({str(record.concept_class)[:200]!r}), neither a method of ours nor one of Interpreto's concept classes: nothing was imported."
            )
        method, found = allowed[record.concept_class], TangentExplainer
    if issubclass(found, cls) or issubclass(cls, found):
        return (found if issubclass(found, cls) else cls), method
    raise InvalidInputError(
        f"{folder} holds a {record.method!r} tangent ({found.__name__}), not a {cls.__name__}: load it with ia.{found.__name__}.from_pretrained or ia.TangentExplainer.from_pretrained."
    )


class PCATangent(TangentExplainer, method="pca"):
    """Tangent from a streamed, exact PCA (top-k eigenvectors of the activation covariance, float64 moments)."""


class SklearnPCATangent(TangentExplainer, method="pca_sklearn", concept_class=concepts.PCAConcepts):
    """Tangent spanned by the components of Interpreto's scikit-learn PCA (all rows in memory)."""


class SemiNMFTangent(TangentExplainer, method="semi_nmf", concept_class=concepts.SemiNMFConcepts):
    """Tangent spanned by Interpreto's semi-NMF dictionary, orthonormalised."""


class NMFTangent(TangentExplainer, method="nmf", concept_class=concepts.NMFConcepts):
    """Tangent spanned by Interpreto's NMF dictionary (fitted on ReLU'd raw activations), orthonormalised."""


class ICATangent(TangentExplainer, method="ica", concept_class=concepts.ICAConcepts):
    """Tangent spanned by Interpreto's ICA mixing matrix, orthonormalised."""


class SVDTangent(TangentExplainer, method="svd", concept_class=concepts.SVDConcepts):
    """Tangent spanned by Interpreto's truncated-SVD components (centred unless `center=False`)."""


class TopKSAETangent(TangentExplainer, method="topk_sae", concept_class=concepts.TopKSAEConcepts):
    """Tangent spanned by the decoder atoms of Interpreto's top-k SAE, orthonormalised (dead atoms dropped)."""
