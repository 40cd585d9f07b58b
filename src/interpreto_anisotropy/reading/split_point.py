# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The split-point seam, the one place the package touches a model (docs/architecture.md; a test checks it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from interpreto.concepts.splitters.base_splitter import BaseSplitter
from interpreto.concepts.splitters.splitting_utils import get_layer_by_idx, walk_modules
from jaxtyping import Bool, Float

from ..commons.options import check_bool
from ..errors import InvalidInputError
from .batching import TokenBatcher, TokenCache, autocast, special_token_ids, token_rows
from .batching import autocast_dtype as autocast_dtype_from
from .positions import PositionConvention, PositionScheme

Batch = dict[str, torch.Tensor]


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the body with `model` in eval mode, then restore the `training` flag of each of its modules."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, flag in flags:
            module.training = flag


def is_dispatched(model: torch.nn.Module) -> bool:
    """Whether accelerate dispatched the model: a `hf_device_map`, or a hook of accelerate on one of its modules."""
    return getattr(model, "hf_device_map", None) is not None or any(
        hasattr(module, "_hf_hook") for module in model.modules()
    )


def execution_device(model: torch.nn.Module, path: str) -> torch.device:
    """The device that runs the module at `path`, where its outputs and their gradients live."""
    parts = path.split(".") if path else []
    module = model.get_submodule(path)
    ancestors = [model.get_submodule(".".join(parts[:depth])) for depth in range(len(parts) - 1, -1, -1)]
    for candidate in [module, *ancestors, *module.modules()]:  # `cpu_offload` hooks only the modules with weights
        hook: Any = getattr(candidate, "_hf_hook", None)
        for inner in [hook, *getattr(hook, "hooks", ())]:  # accelerate's hook, or one of a `SequentialHook`'s
            device = getattr(inner, "execution_device", None)
            if device is not None:
                return torch.device(device)
    weights = [*module.parameters(), *module.buffers()]  # else its own weights' device, else the model's
    own = next((tensor.device for tensor in weights if tensor.device.type != "meta"), None)
    return own if own is not None else next(model.parameters()).device


def _embedding(model: torch.nn.Module, which: str = "input") -> Any:
    """The model's input (or output) embedding, None when it exposes none."""
    try:
        return getattr(model, f"get_{which}_embeddings")()
    except (AttributeError, NotImplementedError):
        return None


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: the device that runs its input embedding (its first parameter's without one)."""
    embedding = _embedding(model)
    path = next((name for name, module in model.named_modules() if module is embedding), None)
    return next(model.parameters()).device if path is None else execution_device(model, path)


def splitter_model(splitter: Any) -> torch.nn.Module:
    """The Hugging Face model inside an Interpreto splitter, dispatched first if nnsight left it on meta tensors."""
    if getattr(splitter, "dispatched", True) is False and callable(getattr(splitter, "dispatch", None)):
        splitter.dispatch()
    return splitter._model


def split_point_module(model: torch.nn.Module, split_point: str) -> torch.nn.Module:
    """The module at a dotted split point path (e.g. "gpt_neox.layers.3"), else an `InvalidInputError`."""
    try:
        return model.get_submodule(split_point)
    except AttributeError as error:
        raise InvalidInputError(
            f"Split point '{split_point}' is not a module of this {type(model).__name__}; give a layer index or a path such as 'gpt_neox.layers.3'."
        ) from error


def resolve_split_point(model: torch.nn.Module, split_point: int | str) -> str:
    """The module path of a layer index (3 -> "gpt_neox.layers.3") or path, as Interpreto resolves it."""
    if isinstance(split_point, int) and not isinstance(split_point, bool):
        try:
            path = get_layer_by_idx(split_point, model_paths=list(walk_modules(model)))
        except Exception as error:  # noqa: BLE001  (Interpreto's ModelPathError, a ValueError or not)
            raise InvalidInputError(
                f"Split point {split_point} matches no single layer of this {type(model).__name__} ({error}); give a module path such as 'gpt_neox.layers.3'."
            ) from error
    elif isinstance(split_point, str):
        path = split_point
    else:
        raise InvalidInputError(f"A split point is a layer index or a module path, got {type(split_point).__name__}.")
    split_point_module(model, path)
    return path


def check_call(call: Any) -> str | int | None:
    """The `call` option (None, "first", "last" or a call index, -1 the last), else an `InvalidInputError`."""
    if call is None or call in ("first", "last") or (isinstance(call, int) and not isinstance(call, bool)):
        return call
    raise InvalidInputError(
        f"call must be 'first', 'last' or the index of a call of the split-point module (an int, -1 the last), got {call!r}."
    )


def refuse_other_call(fitted: str | int | None, probed: str | int | None, what: str, advice: str) -> None:
    """Refuse (`InvalidInputError`) a subspace fitted at another call of the split-point module than the one read now."""
    aliases = {"first": 0, "last": -1}
    if fitted is None or probed is None or aliases.get(fitted, fitted) == aliases.get(probed, probed):
        return
    raise InvalidInputError(
        f"{what} was fitted at call={fitted!r} of its split point but this probe reads call={probed!r} (a module run several times per forward has another hidden state at each call): probe with call={fitted!r} ({advice}) or fit the tangent at call={probed!r}."
    )


def call_index(call: str | int | None, calls: int, path: str, model_name: str) -> int:
    """The 0-based index in [0, calls) of the chosen call among the module's `calls` calls in one forward."""
    if calls == 0:
        raise InvalidInputError(f"Split point '{path}' was not run by the forward pass.")
    choose = f"say which call to read and probe with call='first', call='last' or call=i (0 <= i < {calls}), the same for the activation reader (ia.token_activations(..., call=...), tangent.fit(texts, call=...)) and for GradientProbe(..., call=...)."
    if call is None and calls > 1:
        raise InvalidInputError(
            f"Split point '{path}' runs {calls} times in one forward of {model_name} (a shared module, as ALBERT's, has another hidden state at each call): {choose}"
        )
    index = 0 if call in (None, "first") else calls - 1 if call == "last" else call + calls if call < 0 else call
    if not 0 <= index < calls:
        raise InvalidInputError(
            f"call={call!r} names no call of split point '{path}', which runs {calls} time(s) in one forward of {model_name}: {choose}"
        )
    return index


def refuse_internal_padding(model: torch.nn.Module) -> None:
    """Refuse (`InvalidInputError`) models that pad inside their forward: Longformer, LED, block-sparse BigBird."""
    config = getattr(model, "config", None)
    kind, name = getattr(config, "model_type", None), type(model).__name__
    if kind in ("longformer", "led"):
        raise InvalidInputError(
            f"{name} pads its inputs to a multiple of its attention window (attention_window={getattr(config, 'attention_window', '?')}) inside its forward, so a padded text is not read as it is alone: the package does not read Longformer models (docs/architectures.md lists those it checks)."
        )
    sparse = [module for module in model.modules() if getattr(module, "attention_type", None) == "block_sparse"]
    if kind in ("big_bird", "bigbird_pegasus") and sparse:
        raise InvalidInputError(
            f"{name} has block-sparse attention, which pads its inputs inside its forward, so a padded text is not read as it is alone: switch to full attention with model.set_attention_type('original_full') on the BigBird model (e.g. model.bert for BigBirdForMaskedLM), or attention_type='original_full' in its config."
        )


def refuse_unsupported_kernels(model: torch.nn.Module) -> None:
    """Refuse (`InvalidInputError`) a float64 mixture of experts whose experts run the `grouped_mm` kernel."""
    config = getattr(model, "config", None)
    kernel = getattr(config, "_experts_implementation", None)
    if kernel != "grouped_mm" or not any(p.dtype == torch.float64 for p in model.parameters()):
        return
    raise InvalidInputError(
        f"{type(model).__name__} runs in float64, but its experts use the '{kernel}' kernel (its experts_implementation), which takes float32, bfloat16 or float16 only: call model.set_experts_implementation('eager') (or load it with experts_implementation='eager'), or load the model in float32."
    )


def refuse_ignored_aux_loss(model: torch.nn.Module) -> None:
    """Refuse (`InvalidInputError`) a mixture of experts set to train with its router's auxiliary loss."""
    config = getattr(model, "config", None)
    coefficient = getattr(config, "router_aux_loss_coef", 0) or 0
    if not getattr(config, "output_router_logits", False) or not coefficient:
        return
    raise InvalidInputError(
        f"{type(model).__name__} is set to train with its router's auxiliary load-balancing loss (output_router_logits=True, router_aux_loss_coef={coefficient}), which the probe's objective (the task loss, from the logits) leaves out: set model.config.output_router_logits = False to probe the task loss alone."
    )


class StopForward(Exception):
    """Raised by a `HiddenStateCapture` (not `as_leaf`) holding the hidden state: the layers above are skipped."""


class HiddenStateCapture:
    """Forward hook: the split point's (b, l, d) hidden state at one call, then a stop (or, `as_leaf`, a leaf)."""

    def __init__(self, split_point: str, *, as_leaf: bool = False, call: int | None = 0):
        self.split_point = split_point
        self.as_leaf = as_leaf
        self.call = call
        self.calls = 0
        self.outputs: list[torch.Tensor] = []
        self.hidden: torch.Tensor | None = None

    def __call__(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        number, self.calls = self.calls, self.calls + 1
        if self.call is not None and number != self.call:
            return None
        index = _hidden_index(output)
        if index is None:
            raise InvalidInputError(
                f"The output of split point '{self.split_point}' holds no (batch, length, d) hidden state; choose a transformer block or a layer norm as split point."
            )
        hidden = output if index < 0 else output[index]
        if self.call is None:
            self.outputs.append(hidden.detach())
            return None
        self.hidden = hidden.detach().requires_grad_(True) if self.as_leaf else hidden.detach()
        if not self.as_leaf:
            raise StopForward
        return self.hidden if index < 0 else (*output[:index], self.hidden, *output[index + 1 :])


class SplitPoint:
    """One split point of one model: model inputs, token policy, and the reads at the split point."""

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
                f"Expected an Interpreto ModelWithSplitPoints, got {type(splitter).__name__}; wrap your model: ModelWithSplitPoints(model, split_point=..., tokenizer=tokenizer)."
            )
        self.call = check_call(call)
        self.calls: int | None = None  # calls of the split-point module in one forward, counted at the first read
        self.splitter = splitter
        self.path: str = splitter.split_point
        self.model = splitter_model(splitter)
        refuse_internal_padding(self.model)
        refuse_unsupported_kernels(self.model)
        self.tokenizer = splitter.tokenizer
        self.module = split_point_module(self.model, self.path)
        self.positions = PositionScheme.of(self.model)
        self.autocast_dtype = autocast_dtype_from(autocast_dtype)
        self.include_special = check_bool("include_special", include_special)
        self.special_ids = special_token_ids(self.tokenizer)
        rows = getattr(_embedding(self.model), "num_embeddings", None)  # token ids must lie below
        self.vocab_size = rows if isinstance(rows, int) else None
        self.placed = None  # (the split point's device, the inputs' device) of a model accelerate dispatched
        if is_dispatched(self.model):  # over devices, or offloaded: its hooks stay where they are
            self.placed = (execution_device(self.model, self.path), input_device(self.model))

    @property
    def device(self) -> torch.device:
        """The device that runs the split point's module (`execution_device` when dispatched)."""
        return next(self.model.parameters()).device if self.placed is None else self.placed[0]

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
        """Right-aligned token batches for this model (`batch_size` defaults to the splitter's, else 8)."""
        limit = self.max_length
        if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length > limit:
            raise InvalidInputError(
                f"max_length={max_length} exceeds what {type(self.model).__name__} takes ({limit} tokens: its position table or its tokenizer's model_max_length); use max_length <= {limit}, or leave it to the default."
            )
        batch_size = batch_size if batch_size is not None else getattr(self.splitter, "batch_size", None) or 8
        return TokenBatcher(
            self.tokenizer,
            batch_size=batch_size,
            max_length=limit if max_length is None else max_length,
            min_tokens=min_tokens,
            vocab_size=self.vocab_size,
            token_cache=token_cache,
        )

    def model_inputs(self, batch: Batch) -> Batch:
        """The forward's keywords for a batch, with `position_ids` in the model family's convention, on `input_device`."""
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        position_ids = self.positions.position_ids(batch["attention_mask"])
        if position_ids is not None:
            inputs["position_ids"] = position_ids
        if self.placed is not None:  # from the split point's device to where the model's embedding runs
            inputs = {key: value.to(self.placed[1]) for key, value in inputs.items()}
        return inputs

    def rows(self, batch: Batch) -> Bool[torch.Tensor, "b l"]:
        """The token policy's rows (b, l) of a batch (`batching.token_rows`), from `original_input_ids` if masked."""
        input_ids = batch.get("original_input_ids", batch["input_ids"])
        if self.special_ids.device != input_ids.device:  # copied once, not once per batch
            self.special_ids = self.special_ids.to(input_ids.device)
        return token_rows(input_ids, batch["attention_mask"], self.special_ids, include_special=self.include_special)

    def read(self, batch: Batch) -> Float[torch.Tensor, "b l d"]:
        """The split point's hidden states (b, l, d), forward only in eval mode, stopping there (or first counting calls)."""
        if self.calls is None:
            capture = self._counting_forward(batch)
            return self._checked(capture.outputs[self._index()], batch)
        capture = self._forward_only(batch, HiddenStateCapture(self.path, call=self._index()))
        return self._checked(capture.hidden, batch)

    def _counting_forward(self, batch: Batch) -> HiddenStateCapture:
        """A forward without grad that counts the module's calls and keeps their outputs, stopped at the output head."""
        capture, head = HiddenStateCapture(self.path, call=None), _embedding(self.model, "output")
        stops = isinstance(head, torch.nn.Module) and head is not _embedding(self.model) and head is not self.module

        def stop_at_head(module: torch.nn.Module, args: Any) -> None:
            if capture.calls:
                raise StopForward

        with head.register_forward_pre_hook(stop_at_head) if stops else nullcontext():
            self._forward_only(batch, capture)
        self._index(capture.calls)
        return capture

    def _forward_only(self, batch: Batch, capture: HiddenStateCapture) -> HiddenStateCapture:
        """A forward without grad with `capture` hooked (stopped where it stops); returns the capture."""
        with self.module.register_forward_hook(capture), eval_mode(self.model):
            try:
                with torch.no_grad(), autocast(self.device, self.autocast_dtype):
                    self.model(**self.model_inputs(batch))
            except StopForward:
                pass
        return capture

    def _index(self, calls: int | None = None) -> int:
        """The 0-based index of the chosen call among `calls` (kept) or the calls counted (needed for `call` < 0)."""
        self.calls = self.calls if calls is None else calls
        if self.calls is None:
            return 0 if self.call in (None, "first") else int(self.call)
        return call_index(self.call, self.calls, self.path, type(self.model).__name__)

    def _checked(self, hidden: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        """`hidden`, once it is known to hold one (b, l, d) row per token of the batch."""
        if hidden is None:
            raise InvalidInputError(f"Split point '{self.path}' was not run by the forward pass.")
        if tuple(hidden.shape[:2]) != tuple(batch["input_ids"].shape):
            raise InvalidInputError(
                f"Split point '{self.path}' gives hidden states of {tuple(hidden.shape[:2])} positions for a batch of {tuple(batch['input_ids'].shape)} tokens ({type(self.model).__name__} pads or pools its inputs inside its forward): choose a split point that keeps one position per token (docs/architectures.md lists the architectures the package checks)."
            )
        return hidden

    def forward_backward(
        self, batch: Batch, loss: Callable[[Any], Any], **forward_kwargs: Any
    ) -> tuple[Float[torch.Tensor, "b l d"], Float[torch.Tensor, "b l d"], Any]:
        """One forward and one backward: hidden states h, dL/dh, and what `loss(output)` returned."""
        if self.calls is None and (self.call == "last" or (isinstance(self.call, int) and self.call < 0)):
            self._counting_forward(batch)
        flags = [(parameter, parameter.requires_grad) for parameter in self.model.parameters()]
        capture = HiddenStateCapture(self.path, as_leaf=True, call=self._index())
        with self.module.register_forward_hook(capture), eval_mode(self.model):
            try:
                for parameter, _ in flags:
                    parameter.requires_grad_(False)
                with autocast(self.device, self.autocast_dtype):
                    output = self.model(**self.model_inputs(batch), **forward_kwargs)
                    self._index(capture.calls)
                    hidden = self._checked(capture.hidden, batch)
                    if self.placed is not None:  # the output where the batch and the split point are, for the loss
                        from accelerate.utils import send_to_device

                        output = send_to_device(output, self.device)
                    terms = loss(output)
                    depends = terms.total.requires_grad
                    (gradient,) = torch.autograd.grad(terms.total, hidden, allow_unused=True) if depends else (None,)
            finally:
                for parameter, flag in flags:
                    parameter.requires_grad_(flag)
        if gradient is None:
            raise InvalidInputError(f"The loss does not depend on split point '{self.path}'.")
        return hidden.detach(), gradient, terms

    def width(self) -> int | None:
        """The width d of the split point's output, from a 2-token forward stopping there (None if it fails)."""
        ids = torch.zeros(1, 2, dtype=torch.long, device=self.device)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        try:  # the first call: every call of a module that runs several times has the same width
            hidden = self._forward_only(batch, HiddenStateCapture(self.path, call=0)).hidden
        except Exception:  # noqa: BLE001  (a model that needs other inputs: the caller asks Interpreto)
            return None
        return None if hidden is None else int(hidden.shape[-1])


def _hidden_index(output: Any) -> int | None:
    """Where a module's output holds its (batch, length, d) hidden state: -1 (the output), a tuple index, or None."""
    if isinstance(output, torch.Tensor):
        return -1 if output.dim() == 3 else None
    if isinstance(output, tuple):
        return next((i for i, item in enumerate(output) if isinstance(item, torch.Tensor) and item.dim() == 3), None)
    return None


def _in_backward() -> bool:
    """Whether autograd is running a backward pass now (a checkpointed layer being recomputed)."""
    return torch._C._current_graph_task_id() != -1


@dataclass
class TrainingRead:
    """What one training forward and backward gave at one split point."""

    path: str
    hidden: Float[torch.Tensor, "b l d"]
    gradient: Float[torch.Tensor, "b l d"]
    inputs: dict[str, torch.Tensor]
    output_loss: torch.Tensor | None


@dataclass
class _Forward:
    """One training forward of the whole model: its inputs and what each split point has done with it."""

    inputs: dict[str, torch.Tensor]
    output_loss: torch.Tensor | None = None
    awaiting_recompute: set[str] = field(default_factory=set)
    outputs: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # each split point's calls, in order


class TrainingCapture:
    """Watches a model's training forwards and backwards and reports (h, dL/dh) at split points to a callback."""

    def __init__(
        self,
        model: torch.nn.Module,
        paths: Sequence[str],
        on_read: Callable[[TrainingRead], None],
        *,
        call: str | int | None = None,
        on_logits: Callable[[dict[str, torch.Tensor], torch.Tensor], Callable[[torch.Tensor], None] | None]
        | None = None,
    ):
        self.model = model
        self.call = call  # checked by `LiveConfig`
        self.on_logits = on_logits
        self.modules = {path: split_point_module(model, path) for path in paths}
        self.on_read = on_read
        self.forwards = 0
        self.runs: dict[str, int] = dict.fromkeys(self.modules, 0)  # training forwards that ran each split point
        self._current: _Forward | None = None  # the forward running now (None: not a training forward)
        self._last: _Forward | None = None  # the last training forward, whose checkpointed modules may be recomputed
        self._handles: list[Any] = []

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
        self._current = self._last = _Forward(inputs)
        self.forwards += 1

    def _model_ends(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        forward, self._current = self._current, None  # a split point run after it is not this forward's
        if forward is None:
            return
        if isinstance(loss := getattr(output, "loss", None), torch.Tensor):
            forward.output_loss = loss.detach()
        logits = getattr(output, "logits", None)
        if self.on_logits is not None and isinstance(logits, torch.Tensor) and logits.requires_grad:
            on_gradient = self.on_logits(forward.inputs, logits.detach())
            if on_gradient is not None:
                logits.register_hook(lambda gradient: on_gradient(gradient.detach()))
        outputs, forward.outputs = forward.outputs, {}
        for path, calls in outputs.items():  # hook the gradient of the chosen call's output
            hidden = calls[call_index(self.call, len(calls), path, type(self.model).__name__)]
            if hidden.requires_grad:
                self._hook_gradient(path, hidden, forward)
            elif len(calls) > 1:
                raise InvalidInputError(
                    f"Split point '{path}' runs {len(calls)} times in one forward and the call read (call={self.call!r}) needs no gradient (inside a reentrant gradient checkpoint, whose recomputed calls cannot be told apart, or frozen below): use non-reentrant checkpointing (gradient_checkpointing_kwargs={{'use_reentrant': False}}) or none, or a split point the loss depends on."
                )
            else:  # inside a reentrant checkpoint (hooked at its recompute), or frozen below the split point
                forward.awaiting_recompute.add(path)

    def _split_point_hook(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            recomputed = _in_backward()  # a checkpointed module: hooked again only if its first forward could not be
            forward = self._last if recomputed else self._current
            index = _hidden_index(output)
            hidden = None if index is None else output if index < 0 else output[index]
            if forward is None or hidden is None:
                return
            if recomputed:
                if path in forward.awaiting_recompute and hidden.requires_grad:
                    forward.awaiting_recompute.discard(path)
                    self._hook_gradient(path, hidden, forward)
                return
            if path not in forward.outputs:
                self.runs[path] += 1
            forward.outputs.setdefault(path, []).append(hidden)  # hooked when the model's forward ends

        return hook

    def _hook_gradient(self, path: str, hidden: torch.Tensor, forward: _Forward) -> None:
        kept = hidden.detach()

        def on_gradient(gradient: torch.Tensor) -> None:
            self.on_read(TrainingRead(path, kept, gradient.detach(), forward.inputs, forward.output_loss))

        hidden.register_hook(on_gradient)
