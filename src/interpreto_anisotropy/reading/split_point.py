# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The split-point seam: the one place where the package touches a model.

A `SplitPoint` owns what reading a model at one split point needs: the Hugging Face model inside an Interpreto
splitter, its tokenizer, the resolved module path and module, the device, the autocast dtype, the model inputs
(right-aligned batches with the position ids of the model's family) and the token policy. It offers the two
reads everything else is built on:

* `read(batch)`: the split point's hidden states, forward only, stopping at the split point (the layers above it
  and the output head never run);
* `forward_backward(batch, loss)`: the hidden states and the gradient dL/dh of a loss of the model's output, with
  the parameters frozen (autograd computes dL/dh only).

Both run the model in eval mode (no dropout) and restore each module's mode afterwards (`modes.eval_mode`).

The activation reader, tangent fitting, `GradientProbe` and `CheckpointSweep` go through it; no other module
reads a splitter's `_model` or registers a hook (a test checks this).

`TrainingCapture` is the third read, for a model the user trains: it watches the user's own forwards and backwards
and hands each split point's hidden states and dL/dh to a callback (`live.TrainingProbe` uses it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from interpreto.concepts.splitters.splitting_utils import get_layer_by_idx, walk_modules
from jaxtyping import Bool, Float

from ..errors import InvalidInputError, SplitPointError
from .batching import TokenBatcher, autocast, special_token_ids, token_rows
from .batching import autocast_dtype as autocast_dtype_from
from .modes import eval_mode
from .placement import execution_device, input_device, is_dispatched
from .positions import PositionConvention, PositionScheme
from .token_cache import TokenCache

__all__ = [
    "SplitPoint",
    "HiddenStateCapture",
    "check_call",
    "call_index",
    "refuse_internal_padding",
    "TrainingCapture",
    "TrainingRead",
    "resolve_split_point",
    "StopForward",
    "embedding_rows",
    "splitter_model",
    "split_point_module",
]

Batch = dict[str, torch.Tensor]


def splitter_model(splitter: Any) -> torch.nn.Module:
    """The Hugging Face model inside an Interpreto splitter, its weights loaded.

    A `ModelWithSplitPoints` built from a model id or a folder holds meta tensors until its first use (nnsight's
    lazy dispatch); it is dispatched here, so the package can read it before Interpreto has.

    Args:
        splitter: An Interpreto `ModelWithSplitPoints` or other `BaseSplitter`.

    Returns:
        Its `_model`, with real weights.
    """
    if getattr(splitter, "dispatched", True) is False and callable(getattr(splitter, "dispatch", None)):
        splitter.dispatch()
    return splitter._model


def split_point_module(model: torch.nn.Module, split_point: str) -> torch.nn.Module:
    """The module at a split point path.

    Args:
        model: The Hugging Face model.
        split_point: A dotted module path, e.g. "gpt_neox.layers.3".

    Returns:
        The module.

    Raises:
        SplitPointError: If the path names no module of the model.
    """
    try:
        return model.get_submodule(split_point)
    except AttributeError as error:
        raise SplitPointError(
            f"Split point '{split_point}' is not a module of this {type(model).__name__}; "
            "give a layer index or a path such as 'gpt_neox.layers.3'."
        ) from error


def resolve_split_point(model: torch.nn.Module, split_point: int | str) -> str:
    """The module path of a split point, resolved as Interpreto's `ModelWithSplitPoints` resolves it.

    Args:
        model: The Hugging Face model.
        split_point: A layer index (the module whose path ends in ".{index}", e.g. 3 -> "gpt_neox.layers.3") or a
            dotted module path.

    Returns:
        The dotted module path.

    Raises:
        SplitPointError: An index that matches no module or several, or a path that names no module.
    """
    if isinstance(split_point, int) and not isinstance(split_point, bool):
        try:
            path = get_layer_by_idx(split_point, model_paths=list(walk_modules(model)))
        except Exception as error:  # noqa: BLE001  (Interpreto's ModelPathError, a ValueError or not)
            raise SplitPointError(
                f"Split point {split_point} matches no single layer of this {type(model).__name__} ({error}); give a "
                "module path such as 'gpt_neox.layers.3'."
            ) from error
    elif isinstance(split_point, str):
        path = split_point
    else:
        raise SplitPointError(f"A split point is a layer index or a module path, got {type(split_point).__name__}.")
    split_point_module(model, path)
    return path


def embedding_rows(model: torch.nn.Module) -> int | None:
    """The number of rows of a model's input embedding: token ids must lie below it.

    Args:
        model: The Hugging Face model.

    Returns:
        `get_input_embeddings().num_embeddings`, or None for a model that does not expose one.
    """
    try:
        embedding = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    rows = getattr(embedding, "num_embeddings", None)
    return rows if isinstance(rows, int) else None


def check_call(call: Any) -> str | int | None:
    """The `call` option (which call of a split-point module that runs several times per forward), if valid.

    Args:
        call: None (the module must run once per forward), "first", "last", or a call index: 0, 1, ... from the
            first call, -1, -2, ... from the last.

    Returns:
        `call`.

    Raises:
        InvalidInputError: Anything else, naming the option.

    Examples:
        >>> check_call("last"), check_call(2), check_call(None)
        ('last', 2, None)
    """
    if call is None or call in ("first", "last") or (isinstance(call, int) and not isinstance(call, bool)):
        return call
    raise InvalidInputError(
        f"call must be 'first', 'last' or the index of a call of the split-point module (an int, -1 the last), "
        f"got {call!r}."
    )


def call_index(call: str | int | None, calls: int, path: str, model_name: str) -> int:
    """The 0-based index of the chosen call among the `calls` calls of the split-point module in one forward.

    Args:
        call: The `call` option (`check_call`).
        calls: How many times the module ran in one forward.
        path: The split point's module path, for the messages.
        model_name: The model's class name, for the messages.

    Returns:
        The index, in [0, calls).

    Raises:
        SplitPointError: The module did not run; it ran several times and `call` is None; or `call` is an index
            beyond the calls.

    Examples:
        >>> call_index("last", 4, "albert.encoder.albert_layer_groups.0.albert_layers.0", "AlbertModel")
        3
    """
    if calls == 0:
        raise SplitPointError(f"Split point '{path}' was not run by the forward pass.")
    choose = (
        f"Say which call to read and probe with call='first', call='last' or call=i (0 <= i < {calls}), the same "
        "for the activation reader (ia.token_activations(..., call=...), tangent.fit(texts, call=...)) and for "
        "GradientProbe(..., call=...)."
    )
    if call is None:
        if calls > 1:
            raise SplitPointError(
                f"Split point '{path}' runs {calls} times in one forward of {model_name} (a module shared by "
                f"several layers, as ALBERT's): its hidden state differs from one call to the next. {choose}"
            )
        return 0
    if isinstance(call, str):
        index = 0 if call == "first" else calls - 1
    else:
        index = call + calls if call < 0 else call
    if not 0 <= index < calls:
        raise SplitPointError(
            f"call={call!r} names no call of split point '{path}', which runs {calls} time(s) in one forward of "
            f"{model_name}. {choose}"
        )
    return index


def refuse_internal_padding(model: torch.nn.Module) -> None:
    """Refuse the models that pad their inputs inside their forward, whose rows cannot be lined up with tokens.

    Longformer (and LED) pads every input to a multiple of its attention window; BigBird (and BigBird-Pegasus)
    with block-sparse attention pads to a multiple of its block size and attends to the last, padded block as a
    global one, so that a text is not read in a padded batch as it is alone. BigBird with full attention
    (`attention_type="original_full"`) pads nothing and is accepted.

    Args:
        model: The Hugging Face model.

    Raises:
        SplitPointError: For Longformer and LED, and BigBird with block-sparse attention, saying what to do.
    """
    config = getattr(model, "config", None)
    kind, name = getattr(config, "model_type", None), type(model).__name__
    if kind in ("longformer", "led"):
        raise SplitPointError(
            f"{name} pads its inputs to a multiple of its attention window (attention_window="
            f"{getattr(config, 'attention_window', '?')}) inside its forward, so its hidden states have more "
            "positions than the batch has tokens and a padded text is not read as it is alone. The package does "
            "not read Longformer models; docs/architectures.md lists the architectures it checks."
        )
    sparse = [module for module in model.modules() if getattr(module, "attention_type", None) == "block_sparse"]
    if kind in ("big_bird", "bigbird_pegasus") and sparse:
        raise SplitPointError(
            f"{name} has block-sparse attention, which pads its inputs to a multiple of its block size inside its "
            "forward and attends to the last, padded block as a global block: a text in a padded batch is not "
            "read as it is alone. Switch to full attention: model.set_attention_type('original_full') on the "
            "BigBird model (e.g. model.bert for BigBirdForMaskedLM), or build it with "
            "attention_type='original_full' in its config."
        )


class StopForward(Exception):
    """Raised by a `HiddenStateCapture(stop=True)` once it holds the hidden state: the layers above are skipped."""


class HiddenStateCapture:
    """Forward hook that records the split point's (batch, length, d) hidden state at one call of the module.

    A module may run several times in one forward (ALBERT's shared layer runs once per layer): the hook counts the
    calls (`calls`) and records the output of call number `call` only (0-based; the other calls pass untouched),
    or, with `call=None`, of every call (`outputs`, for a first read that does not yet know how many there are).
    With `as_leaf=True` the recorded hidden state is swapped for a detached leaf that requires grad, so that
    `torch.autograd.grad(loss, capture.hidden)` gives dL/dh without recording the graph below the split point.
    With `stop=True` the hook raises `StopForward` after recording, so a reader that needs only the split point's
    activations does not run the layers above it nor the output head; the caller catches it.

    Args:
        split_point: The split point's path, for error messages.
        as_leaf: Swap the output for a leaf tensor requiring grad.
        stop: Raise `StopForward` once the hidden state is recorded.
        call: Which call of the module to record (0-based), or None for every call (then neither swapped nor
            stopped).
    """

    def __init__(self, split_point: str, *, as_leaf: bool = False, stop: bool = False, call: int | None = 0):
        self.split_point = split_point
        self.as_leaf = as_leaf and call is not None
        self.stop = stop and call is not None
        self.call = call
        self.calls = 0
        self.outputs: list[torch.Tensor] = []
        self.hidden: torch.Tensor | None = None

    def __call__(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        number, self.calls = self.calls, self.calls + 1
        if self.call is None:
            hidden = _hidden_of(output)
            if hidden is None:
                raise self._no_hidden_state()
            self.outputs.append(hidden.detach())
            return None
        if number != self.call:
            return None
        if isinstance(output, torch.Tensor) and output.dim() == 3:
            self.hidden = self._keep(output)
            return self._finish(self.hidden if self.as_leaf else None)
        if isinstance(output, tuple):
            for index, candidate in enumerate(output):
                if isinstance(candidate, torch.Tensor) and candidate.dim() == 3:
                    self.hidden = self._keep(candidate)
                    return self._finish(
                        output[:index] + (self.hidden,) + output[index + 1 :] if self.as_leaf else None
                    )
        raise self._no_hidden_state()

    def _no_hidden_state(self) -> SplitPointError:
        return SplitPointError(
            f"The output of split point '{self.split_point}' holds no (batch, length, d) hidden state; "
            "choose a transformer block or a layer norm as split point."
        )

    def _finish(self, replacement: Any) -> Any:
        if self.stop:
            raise StopForward
        return replacement

    def _keep(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden.detach().requires_grad_(True) if self.as_leaf else hidden.detach()


class SplitPoint:
    """One split point of one model: model inputs, token policy, and the reads at the split point.

    Args:
        splitter: Interpreto `ModelWithSplitPoints` (or another `BaseSplitter` with a `split_point` path).
        autocast_dtype: "bf16" / "fp16" (or the torch dtype): run forwards and backwards under `torch.autocast`.
        include_special: Keep special tokens (BOS, CLS, SEP, ...) as rows (`rows`).
        call: Which call of the split-point module to read, for a module that runs several times in one forward
            (ALBERT's shared layer runs once per layer): "first", "last", or an index (0, 1, ... from the first call,
            -1, ... from the last). None (the default): the module must run once; the first read counts its calls
            (`calls`) and raises `SplitPointError` naming the module, the count and this option when it runs more
            than once. The reader and the probe must be given the same `call`.

    Raises:
        InvalidInputError: Not an Interpreto splitter, an unknown autocast dtype, or a `call` of another type.
        SplitPointError: A split point that names no module of the model, or a model that pads its inputs inside
            its forward (`refuse_internal_padding`: Longformer, BigBird with block-sparse attention).

    Examples:
        >>> point = SplitPoint(mwsp)  # doctest: +SKIP
        >>> n_batches, batches = point.batcher(batch_size=8).batches(texts)  # doctest: +SKIP
        >>> hidden = point.read(next(batches)[0])  # (b, l, d)  # doctest: +SKIP
    """

    def __init__(
        self,
        splitter: BaseSplitter,
        *,
        autocast_dtype: str | torch.dtype | None = None,
        include_special: bool = False,
        call: str | int | None = None,
    ):
        if not isinstance(splitter, BaseSplitter):
            raise InvalidInputError(
                f"Expected an Interpreto ModelWithSplitPoints, got {type(splitter).__name__}. Wrap your model: "
                "ModelWithSplitPoints(model, split_point=..., tokenizer=tokenizer)."
            )
        self.call = check_call(call)
        self.calls: int | None = None  # calls of the split-point module in one forward, counted at the first read
        self.splitter = splitter
        self.path: str = splitter.split_point
        self.model = splitter_model(splitter)
        refuse_internal_padding(self.model)
        self.tokenizer = splitter.tokenizer
        self.module = split_point_module(self.model, self.path)
        self.positions = PositionScheme.of(self.model)
        self.autocast_dtype = autocast_dtype_from(autocast_dtype)
        self.include_special = include_special
        self.special_ids = special_token_ids(self.tokenizer)
        self.vocab_size = embedding_rows(self.model)
        self.dispatched = is_dispatched(self.model)  # by accelerate: layers on several devices, or offloaded
        # (the split point's device, the inputs' device) of a dispatched model, whose hooks stay where they are
        self.placed = (execution_device(self.model, self.path), input_device(self.model)) if self.dispatched else None

    @property
    def device(self) -> torch.device:
        """The device that runs the split point's module, where its hidden states and their gradients live (the
        model's device, unless accelerate dispatched the model over several: `placement.execution_device`)."""
        if self.placed is None:
            return next(self.model.parameters()).device
        return self.placed[0]

    @property
    def input_device(self) -> torch.device:
        """Where the model's inputs go: the device that runs its input embedding (`placement.input_device`)."""
        return self.device if self.placed is None else self.placed[1]

    @property
    def max_length(self) -> int:
        """The longest sequence the model takes: its position table (less the RoBERTa offset) and the tokenizer's."""
        positions = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        if isinstance(positions, int) and self.positions.convention is PositionConvention.AFTER_PADDING_IDX:
            positions -= self.positions.padding_idx + 1  # RoBERTa: 514 position embeddings hold 512 tokens
        limits = [positions, getattr(self.tokenizer, "model_max_length", None)]
        finite = [int(limit) for limit in limits if isinstance(limit, int) and 0 < limit < 10**7]
        return min(finite) if finite else 512

    def batcher(
        self,
        *,
        batch_size: int | None = None,
        max_length: int | None = None,
        min_tokens: int = 1,
        token_cache: TokenCache | None = None,
    ) -> TokenBatcher:
        """Right-aligned token batches for this model.

        `batch_size` defaults to the splitter's (else 8), `max_length` to `self.max_length`; the batcher checks both,
        and refuses token ids beyond the model's input embedding (`TokenizerError` naming both sizes). With a
        `token_cache`, texts its tokenizer has tokenised before are not tokenised again.

        Raises:
            InvalidInputError: A batch size or maximum length that is not a positive integer, or a maximum length
                beyond what the model takes.
        """
        limit = self.max_length
        if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length > limit:
            raise InvalidInputError(
                f"max_length={max_length} exceeds what {type(self.model).__name__} takes ({limit} tokens: its "
                f"position table or its tokenizer's model_max_length). Use max_length <= {limit}, or leave it to "
                "the default."
            )
        if batch_size is None:
            batch_size = getattr(self.splitter, "batch_size", None) or 8
        return TokenBatcher(
            self.tokenizer,
            batch_size=batch_size,
            max_length=limit if max_length is None else max_length,
            min_tokens=min_tokens,
            vocab_size=self.vocab_size,
            token_cache=token_cache,
        )

    def model_inputs(self, batch: Batch) -> Batch:
        """The keyword arguments of the model's forward for a right-aligned batch.

        Args:
            batch: `input_ids` and `attention_mask`, (b, l) each (other keys are not passed to the model).

        Returns:
            `input_ids`, `attention_mask` and, unless the model numbers positions itself, `position_ids` in the
            model family's convention (`positions.PositionScheme`), on `input_device`.
        """
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        position_ids = self.positions.position_ids(batch["attention_mask"])
        if position_ids is not None:
            inputs["position_ids"] = position_ids
        if self.dispatched:  # the batch is on the split point's device; the model reads it where its embedding runs
            inputs = {key: value.to(self.input_device) for key, value in inputs.items()}
        return inputs

    def rows(self, batch: Batch) -> Bool[torch.Tensor, "b l"]:
        """The token policy's rows of a batch (`batching.token_rows`), on the batch's device.

        Uses `original_input_ids` when the batch has them (a masked-LM batch), so masking never changes the rows.
        """
        input_ids = batch.get("original_input_ids", batch["input_ids"])
        if self.special_ids.device != input_ids.device:  # copied once, not once per batch
            self.special_ids = self.special_ids.to(input_ids.device)
        return token_rows(input_ids, batch["attention_mask"], self.special_ids, include_special=self.include_special)

    @contextmanager
    def _hooked(self, capture: HiddenStateCapture) -> Iterator[HiddenStateCapture]:
        handle = self.module.register_forward_hook(capture)
        try:
            yield capture
        finally:
            handle.remove()

    def read(self, batch: Batch) -> Float[torch.Tensor, "b l d"]:
        """The split point's hidden states of a batch on the model's device, forward only, stopping there.

        The first read runs the forward up to the output head and counts the split-point module's calls (`calls`);
        the next ones stop at the chosen call (`call`).
        The model runs in eval mode (no dropout), each module's mode restored afterwards (`modes.eval_mode`).

        Raises:
            SplitPointError: The forward pass did not run the split point, ran it several times without `call`,
                or changed the sequence length.
        """
        if self.calls is None:
            capture = self._counting_forward(batch)
            return self._checked(capture.outputs[self._index()], batch)
        capture = self._forward_only(batch, HiddenStateCapture(self.path, stop=True, call=self._index()))
        return self._checked(capture.hidden, batch)

    def _counting_forward(self, batch: Batch) -> HiddenStateCapture:
        """A forward without grad that counts the module's calls (`_count`) and keeps every call's output.

        It stops before the output head (the model's output embedding, the costly vocabulary projection) once the
        module has run, since the layers all run before the head.
        """
        capture = HiddenStateCapture(self.path, call=None)
        head = _output_head(self.model)
        handle = None
        if head is not None and head is not self.module:

            def stop_at_head(module: torch.nn.Module, args: Any) -> None:
                if capture.calls:
                    raise StopForward

            handle = head.register_forward_pre_hook(stop_at_head)
        try:
            self._forward_only(batch, capture)
        finally:
            if handle is not None:
                handle.remove()
        self._count(capture.calls)
        return capture

    def _forward_only(self, batch: Batch, capture: HiddenStateCapture) -> HiddenStateCapture:
        """A forward without grad with `capture` hooked (stopped where it stops); returns the capture."""
        with self._hooked(capture), eval_mode(self.model):
            try:
                with torch.no_grad(), autocast(self.device, self.autocast_dtype):
                    self.model(**self.model_inputs(batch))
            except StopForward:
                pass
        return capture

    def _count(self, calls: int) -> None:
        """Record how many times the module ran in one forward, once `call` is checked against it."""
        call_index(self.call, calls, self.path, type(self.model).__name__)
        self.calls = calls

    def _index(self) -> int:
        """The 0-based index of the chosen call (`calls` must be counted, except for a call counted from 0)."""
        if self.calls is None:
            return 0 if self.call in (None, "first") else int(self.call)
        return call_index(self.call, self.calls, self.path, type(self.model).__name__)

    def _checked(self, hidden: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        """`hidden`, once it is known to hold one (b, l, d) row per token of the batch."""
        if hidden is None:
            raise SplitPointError(f"Split point '{self.path}' was not run by the forward pass.")
        if tuple(hidden.shape[:2]) != tuple(batch["input_ids"].shape):
            raise SplitPointError(
                f"Split point '{self.path}' gives hidden states of {tuple(hidden.shape[:2])} positions for a batch "
                f"of {tuple(batch['input_ids'].shape)} tokens: {type(self.model).__name__} pads or pools its inputs "
                "inside its forward, so its rows cannot be lined up with the tokens. Choose a split point that keeps "
                "one position per token; docs/architectures.md lists the architectures the package checks."
            )
        return hidden

    def forward_backward(
        self, batch: Batch, loss: Callable[[Any], Any], **forward_kwargs: Any
    ) -> tuple[Float[torch.Tensor, "b l d"], Float[torch.Tensor, "b l d"], Any]:
        """One forward and one backward: hidden states h, dL/dh, and what `loss(output)` returned.

        Parameters are frozen and the model is in eval mode during the call (restored afterwards), and the hidden
        state is swapped for a leaf, so autograd computes dL/dh only, without recording the graph below the split
        point. The leaf is the output of the chosen call of the module (`call`), the call `read` reads; a call
        counted from the last needs the calls counted first (one forward without grad, on the first batch).

        Args:
            batch: The batch, on the model's device.
            loss: Maps the model's output to an object whose `.total` is the scalar to differentiate.
            **forward_kwargs: Extra keyword arguments of the model's forward (e.g. `output_router_logits=True`).

        Returns:
            (hidden (b, l, d), gradient (b, l, d), the loss object).

        Raises:
            SplitPointError: The split point was not run, ran several times without `call`, changed the sequence
                length, or the loss does not depend on it.
        """
        if self.calls is None and (self.call == "last" or (isinstance(self.call, int) and self.call < 0)):
            self._counting_forward(batch)
        flags = [(parameter, parameter.requires_grad) for parameter in self.model.parameters()]
        with (
            self._hooked(HiddenStateCapture(self.path, as_leaf=True, call=self._index())) as capture,
            eval_mode(self.model),
        ):
            try:
                for parameter, _ in flags:
                    parameter.requires_grad_(False)
                with autocast(self.device, self.autocast_dtype):
                    output = self.model(**self.model_inputs(batch), **forward_kwargs)
                    self._count(capture.calls)
                    hidden = self._checked(capture.hidden, batch)
                    if self.dispatched:  # the output where the batch and the split point are, for the loss
                        from accelerate.utils import send_to_device

                        output = send_to_device(output, self.device)
                    terms = loss(output)
                    if not terms.total.requires_grad:
                        raise SplitPointError(f"The loss does not depend on split point '{self.path}'.")
                    (gradient,) = torch.autograd.grad(terms.total, hidden, allow_unused=True)
            finally:
                for parameter, flag in flags:
                    parameter.requires_grad_(flag)
        if gradient is None:
            raise SplitPointError(f"The loss does not depend on split point '{self.path}'.")
        return hidden.detach(), gradient, terms

    def width(self) -> int | None:
        """The width d of the split point's output, from a 2-token forward stopping there (None if it fails)."""
        ids = torch.zeros(1, 2, dtype=torch.long, device=self.device)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        try:  # the first call: every call of a module that runs several times has the same width
            hidden = self._forward_only(batch, HiddenStateCapture(self.path, stop=True, call=0)).hidden
        except Exception:  # noqa: BLE001  (a model that needs other inputs: the caller asks Interpreto)
            return None
        return None if hidden is None else int(hidden.shape[-1])


def _output_head(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's output embedding (its vocabulary head), unless it has none or it is the input embedding."""
    try:
        head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    return head if isinstance(head, torch.nn.Module) and head is not embedding else None


def _hidden_of(output: Any) -> torch.Tensor | None:
    """The (batch, length, d) hidden state in a module's output (a tensor, or the first 3-dim one of a tuple)."""
    if isinstance(output, torch.Tensor):
        return output if output.dim() == 3 else None
    if isinstance(output, tuple):
        return next((item for item in output if isinstance(item, torch.Tensor) and item.dim() == 3), None)
    return None


def _in_backward() -> bool:
    """Whether autograd is running a backward pass now (a checkpointed layer being recomputed)."""
    return torch._C._current_graph_task_id() != -1


@dataclass
class TrainingRead:
    """What one training forward and backward gave at one split point.

    Attributes:
        path: The split point's module path.
        hidden: Its hidden states h, (b, l, d), detached.
        gradient: dL/dh as the backward computed it, (b, l, d) (scaled like the loss that was differentiated).
        inputs: The forward's `input_ids`, `attention_mask` (ones when not given) and `labels` (when given), (b, l).
        output_loss: The `loss` the model's output carried, detached (None without one).
        forward_index: Which training forward this is (0, 1, ... since attached).
    """

    path: str
    hidden: Float[torch.Tensor, "b l d"]
    gradient: Float[torch.Tensor, "b l d"]
    inputs: dict[str, torch.Tensor]
    output_loss: torch.Tensor | None
    forward_index: int


@dataclass
class _Forward:
    """One training forward of the whole model: its inputs and what each split point has done with it."""

    index: int
    inputs: dict[str, torch.Tensor]
    output_loss: torch.Tensor | None = None
    ran: set[str] = field(default_factory=set)  # the split points this forward ran
    awaiting_recompute: set[str] = field(default_factory=set)
    outputs: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # each split point's calls, in order


class TrainingCapture:
    """Watches a model's training forwards and backwards and reports (h, dL/dh) at split points to a callback.

    A training forward is a call of the model under grad mode (forwards under `torch.no_grad` or
    `torch.inference_mode`, such as evaluation, are ignored). At each split point the output hidden state gets a
    tensor hook, so the backward the user runs hands dL/dh to `on_read` once per forward. Gradient checkpointing is
    handled both ways: when the split point's module runs inside a checkpoint, the recomputed forward in the
    backward is the one hooked (reentrant) or ignored (non-reentrant, whose first forward was hooked), so a
    forward is never read twice. A forward whose backward never comes is simply never reported.

    A split-point module that runs several times in one forward (ALBERT's shared layer) is read at the call `call`
    chooses, as `SplitPoint` reads it: its calls' outputs are kept until the model's forward ends, when the chosen
    one gets the tensor hook.

    Args:
        model: The Hugging Face model being trained.
        paths: The split points' module paths (`resolve_split_point`).
        on_read: Called as `on_read(read)` with a `TrainingRead`, inside the backward.
        call: Which call of a split-point module that runs several times per forward to read: "first", "last" or
            an index (`check_call`); None: the module must run once per forward.

    Raises:
        InvalidInputError: A `call` of another type.
        SplitPointError: Raised by a training forward that ran a split point several times without `call`, or
            fewer times than `call` names (`call_index`), or ran it several times inside a reentrant checkpoint.

    Examples:
        >>> capture = TrainingCapture(model, ["gpt_neox.layers.1"], reads.append).attach()  # doctest: +SKIP
        >>> model(**batch).loss.backward()  # doctest: +SKIP
        >>> capture.detach()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        paths: Sequence[str],
        on_read: Callable[[TrainingRead], None],
        *,
        call: str | int | None = None,
    ):
        self.model = model
        self.call = check_call(call)
        self.paths = list(paths)
        self.modules = {path: split_point_module(model, path) for path in self.paths}
        self.on_read = on_read
        self.forwards = 0
        self.unhooked: dict[str, int] = dict.fromkeys(self.paths, 0)  # training forwards whose h needs no grad
        self.runs: dict[str, int] = dict.fromkeys(self.paths, 0)  # training forwards that ran each split point
        self._current: _Forward | None = None  # the forward running now (None: not a training forward)
        self._last: _Forward | None = None  # the last training forward, whose checkpointed modules may be recomputed
        self._handles: list[Any] = []

    @property
    def attached(self) -> bool:
        """Whether the hooks are in place."""
        return bool(self._handles)

    def attach(self) -> TrainingCapture:
        """Install the hooks (the model's forward pre- and post-hooks, one forward hook per split point)."""
        self._handles = [
            self.model.register_forward_pre_hook(self._model_starts, with_kwargs=True),
            self.model.register_forward_hook(self._model_ends),
            *(module.register_forward_hook(self._split_point_hook(path)) for path, module in self.modules.items()),
        ]
        return self

    def detach(self) -> None:
        """Remove the hooks; forwards already hooked still report when their backward runs."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._current = self._last = None

    def _model_starts(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if not torch.is_grad_enabled() or _in_backward():
            self._current = None
            return
        input_ids = kwargs.get("input_ids", args[0] if args and isinstance(args[0], torch.Tensor) else None)
        inputs: dict[str, torch.Tensor] = {}
        if isinstance(input_ids, torch.Tensor):
            inputs["input_ids"] = input_ids.detach()
            mask = kwargs.get("attention_mask")
            inputs["attention_mask"] = torch.ones_like(input_ids) if mask is None else mask.detach()
            if isinstance(kwargs.get("labels"), torch.Tensor):
                inputs["labels"] = kwargs["labels"].detach()
        self._current = self._last = _Forward(self.forwards, inputs)
        self.forwards += 1

    def _model_ends(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        forward = self._current
        loss = getattr(output, "loss", None) if forward is not None else None
        if forward is not None and isinstance(loss, torch.Tensor):
            forward.output_loss = loss.detach()
        if forward is not None:
            outputs, forward.outputs = forward.outputs, {}
            for path, calls in outputs.items():
                self._hook_call(path, calls, forward)

    def _hook_call(self, path: str, calls: list[torch.Tensor], forward: _Forward) -> None:
        """Hook the gradient of the chosen call's output (or await its recompute in a reentrant checkpoint)."""
        hidden = calls[call_index(self.call, len(calls), path, type(self.model).__name__)]
        if hidden.requires_grad:
            self._hook_gradient(path, hidden, forward)
            return
        if len(calls) > 1:
            raise SplitPointError(
                f"Split point '{path}' runs {len(calls)} times in one forward, and the output of the call read "
                f"(call={self.call!r}) needs no gradient: it runs inside a reentrant gradient checkpoint, whose "
                "recomputed calls cannot be told apart, or every layer below it is frozen. Use non-reentrant "
                "checkpointing (gradient_checkpointing_kwargs={'use_reentrant': False}) or none, or choose a split "
                "point the loss depends on."
            )
        forward.awaiting_recompute.add(path)  # inside a reentrant checkpoint, or frozen below the split point
        self.unhooked[path] += 1

    def _split_point_hook(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            recomputed = _in_backward()  # a checkpointed module: hooked again only if its first forward could not be
            forward = self._last if recomputed else self._current
            hidden = _hidden_of(output)
            if forward is None or hidden is None:
                return
            if recomputed:
                if path in forward.awaiting_recompute and hidden.requires_grad:
                    forward.awaiting_recompute.discard(path)
                    self.unhooked[path] -= 1
                    self._hook_gradient(path, hidden, forward)
                return
            if path not in forward.ran:
                forward.ran.add(path)
                self.runs[path] += 1
            forward.outputs.setdefault(path, []).append(hidden)  # hooked when the model's forward ends

        return hook

    def _hook_gradient(self, path: str, hidden: torch.Tensor, forward: _Forward) -> None:
        kept = hidden.detach()

        def on_gradient(gradient: torch.Tensor) -> None:
            self.on_read(
                TrainingRead(path, kept, gradient.detach(), forward.inputs, forward.output_loss, forward.index)
            )

        hidden.register_hook(on_gradient)
