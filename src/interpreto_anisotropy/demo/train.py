# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Toy training runs with Pythia-like checkpoints, for demos and tests, on the CPU in well under a minute."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from ..commons.files import give_default_modes, write_atomically
from ..commons.options import check_folder
from ..commons.progress import progress_bar, quiet_transformers
from ..errors import CheckpointError, InvalidInputError
from ..probing.masking import MaskedLM, special_tokens_mask
from .corpus import load_corpus
from .options import MODEL_SIZES, ToyConfig
from .toy_models import ENCODER_ARCHS, Arch, build_model, train_tokenizer

TRAINER_STATE_NAME = "trainer_state.json"
"""File name of the training log, in the run folder and in each checkpoint folder."""


@dataclass(frozen=True)
class ToyRun:
    """What `train_toy` produced.

    Attributes:
        out_dir: The run folder; it holds the checkpoint folders and ``trainer_state.json``.
        arch: The architecture trained (``"gpt_neox"``, ``"llama"`` or ``"eurobert"``).
        objective: ``"causal_lm"`` for the decoders, ``"masked_lm"`` for the encoder.
        checkpoints: The ``checkpoint-{step}`` folders, by increasing step.
        checkpoint_steps: The step of each checkpoint (the number of optimiser updates before it was saved).
        losses: The training loss of each step, ``losses[i]`` being that of step ``i + 1``.
        live_results: The live probe's results directory, when the run was trained with one (`train_toy(live=...)`).

    Examples:
        >>> run = train_toy("runs/toy", steps=20, checkpoint_steps=[0, 20], progress=False)
        >>> run.checkpoint_steps, run.objective, run.automodel.__name__
        ([0, 20], 'causal_lm', 'AutoModelForCausalLM')
        >>> [path.name for path in run]
        ['checkpoint-0', 'checkpoint-20']
    """

    out_dir: Path
    arch: str
    objective: str
    checkpoints: list[Path] = field(default_factory=list)
    checkpoint_steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    live_results: Path | None = None

    @property
    def automodel(self) -> type:
        """The ``transformers`` auto class that reloads the checkpoints (``AutoModelForCausalLM`` or ...MaskedLM)."""
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

        return AutoModelForMaskedLM if self.objective == "masked_lm" else AutoModelForCausalLM

    def to_dict(self) -> dict:
        """The run as JSON-ready plain types (paths as strings)."""
        return json.loads(json.dumps(asdict(self), default=str))

    def __len__(self) -> int:
        return len(self.checkpoints)

    def __iter__(self):
        return iter(self.checkpoints)


def _prepare_out_dir(out_dir: str | os.PathLike, *, overwrite: bool) -> Path:
    path = check_folder("out_dir", out_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"out_dir {str(path)!r} exists and is not a folder.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as error:
        raise CheckpointError(f"out_dir {str(path)!r} is not writable ({error}); choose another folder.") from None
    previous = [p for p in path.iterdir() if re.fullmatch(r"checkpoint-\d+", p.name)]
    if previous or (path / TRAINER_STATE_NAME).exists():
        if not overwrite:
            raise CheckpointError(
                f"out_dir {str(path)!r} already holds a run; pass overwrite=True to replace it, or choose another folder."
            )
        for stale in previous:
            shutil.rmtree(stale)
        (path / TRAINER_STATE_NAME).unlink(missing_ok=True)
    return path


def _token_blocks(texts: list[str], tokenizer: PreTrainedTokenizerFast, *, arch: Arch, seq_len: int) -> torch.Tensor:
    """Packs the tokenised texts into one stream (Pythia-style, eos between texts) cut into ``seq_len`` blocks."""
    encoder = arch in ENCODER_ARCHS  # <bos> text <eos>; a decoder's: text <eos>
    encoded = tokenizer(texts, add_special_tokens=encoder, verbose=False)["input_ids"]
    stream = [token for ids in encoded for token in (ids if encoder else [*ids, tokenizer.eos_token_id])]
    n_blocks = len(stream) // seq_len
    if n_blocks == 0:
        raise InvalidInputError(f"The training texts hold fewer than seq_len={seq_len} tokens; add texts.")
    return torch.tensor(stream[: n_blocks * seq_len], dtype=torch.long).view(n_blocks, seq_len)


def _mask_tokens(
    input_ids: torch.Tensor, tokenizer: PreTrainedTokenizerFast, *, masking: MaskedLM, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks a batch as `masking` says (the probe's scheme): the ids the model reads, and the labels (-100 elsewhere)."""
    candidates = ~special_tokens_mask(input_ids, tokenizer.all_special_ids)
    chosen = masking.select(candidates, generator)
    labels = input_ids.clone()
    labels[~chosen] = -100
    vocabulary = {"vocab_size": len(tokenizer), "mask_token_id": tokenizer.mask_token_id}
    return masking.corrupt(input_ids, chosen, generator, **vocabulary), labels


def train_toy(
    out_dir: str | os.PathLike, *, texts: Sequence[str] | None = None, config: ToyConfig | None = None, **options: Any
) -> ToyRun:
    """Trains a tiny model on the toy corpus and saves Pythia-like ``checkpoint-{step}`` folders.

    A byte-level BPE tokenizer (`train_tokenizer`) and a model (`build_model`) are trained on the ``train`` split
    of `load_corpus` (or on ``texts``), packed Pythia-style into blocks of ``seq_len`` tokens shuffled by ``seed``:
    causal language modelling for the decoders, masked for the encoder (`ToyConfig.masking`, by default BERT's).
    AdamW with linear warm-up and cosine decay, gradients clipped at norm 1; the same options give identical
    weights on the same machine. Each checkpoint folder holds the model, the tokenizer and ``trainer_state.json``
    up to that step (``checkpoint-0``: the initialisation); ``out_dir/trainer_state.json`` holds the whole run
    (``log_history``: ``{"step", "loss", "learning_rate"}`` per step, ``checkpoint_steps``, the configuration).
    Reload one with ``ModelWithSplitPoints(path, automodel=run.automodel, split_point=...)``.

    Args:
        out_dir: Folder of the run (created if needed).
        texts: Training texts; default: the corpus's ``train`` split.
        config: The options, a `ToyConfig` (None: its defaults).
        **options: Any `ToyConfig` field by name (``arch``, ``steps``, ``checkpoint_steps``, ``hidden_size``,
            ``seed``, ``live``, ...), in place of the one of `config`.

    Returns:
        A `ToyRun` with the checkpoint folders, their steps and the loss curve.

    Raises:
        InvalidInputError: If an option is no `ToyConfig` field or a bad value (see `ToyConfig`), ``texts`` is a
            single string, or the training texts hold fewer than ``seq_len`` tokens.
        CheckpointError: If ``out_dir`` is not writable, or already holds a run and ``overwrite`` is false.

    Examples:
        >>> run = train_toy("runs/toy", steps=300, progress=False)  # about 20 s on 2 CPU cores
        >>> run.checkpoints[-1].name, run.losses[0] > run.losses[-1]
        ('checkpoint-300', True)
    """
    settings = ToyConfig.of(config, options)
    arch, device, chosen_steps = settings.arch, settings.torch_device, settings.checkpoint_step_list
    path = _prepare_out_dir(out_dir, overwrite=settings.overwrite)
    previous_threads = torch.get_num_threads()  # restored afterwards
    if device.type == "cpu" and settings.num_threads is not None:
        torch.set_num_threads(settings.num_threads)
    try:
        if isinstance(texts, str):
            raise InvalidInputError("texts must be a list of strings, not a single string.")
        if texts is None:
            train_texts = load_corpus("train", max_texts=settings.max_train_texts, progress=settings.progress)
        else:  # the non-empty strings, capped
            train_texts = [text for text in texts if isinstance(text, str) and text][: settings.max_train_texts]
        if not train_texts:
            raise InvalidInputError("No training texts.")
        max_position = max(settings.seq_len, 512)
        tokenizer = train_tokenizer(
            train_texts, arch=arch, vocab_size=settings.vocab_size, model_max_length=max_position
        )
        blocks = _token_blocks(train_texts, tokenizer, arch=arch, seq_len=settings.seq_len)
        sizes = {name: getattr(settings, name) for name in (*MODEL_SIZES, "seed")}
        model = build_model(
            arch, vocab_size=len(tokenizer), max_position=max_position, tokenizer=tokenizer, **sizes
        ).to(device)
        record = _toy_config(settings, model, tokenizer, len(train_texts), blocks, device)
        run = _Run(path, model, tokenizer, record, chosen_steps)
        batches = _batches(blocks, batch_size=settings.batch_size, seed=settings.seed)
        probe = _train_steps(run, batches, settings.masked_lm, live=settings.live, progress=settings.progress)
        model.eval()
        write_atomically(path / TRAINER_STATE_NAME, json.dumps(run.state(settings.steps), indent=2))
    finally:
        torch.set_num_threads(previous_threads)
    losses = [entry["loss"] for entry in run.log_history]
    live_results = None if probe is None else Path(probe.results_dir)
    return ToyRun(path, arch.value, record["objective"], run.checkpoints, chosen_steps, losses, live_results)


def _toy_config(settings: ToyConfig, model: PreTrainedModel, tokenizer: Any, *data: Any) -> dict[str, Any]:
    """The run's ``toy_config``: `settings` with the sizes the model, the tokenizer and the `data` came out with."""
    n_texts, blocks, device = data
    objective = "masked_lm" if settings.arch in ENCODER_ARCHS else "causal_lm"
    masking = settings.masked_lm
    config = {
        "arch": settings.arch.value,
        "objective": objective,
        **{name: getattr(settings, name) for name in ("steps", "hidden_size", "num_layers", "num_heads")},
        "intermediate_size": model.config.intermediate_size,
        "vocab_size": len(tokenizer),
        **{name: getattr(settings, name) for name in ("seq_len", "batch_size", "lr")},
        "warmup_steps": settings.effective_warmup_steps,
        "weight_decay": settings.weight_decay,
        "mlm_probability": masking.rate if objective == "masked_lm" else None,
        "n_train_texts": n_texts,
        "n_train_blocks": int(blocks.shape[0]),
        "seed": settings.seed,
        "device": str(device),
    }
    if objective == "masked_lm" and not masking.is_bert_split:  # absent for BERT's split, as in older runs
        config["mlm_split"] = {"mask": masking.mask, "random": masking.random, "keep": masking.keep}
    return config


def _train_steps(
    run: _Run, batches: Iterator[torch.Tensor], masking: MaskedLM, *, live: dict[str, Any] | None, progress: bool
) -> Any:
    """Train `run.model` for its steps, logging each loss and saving the checkpoints due; returns the live probe."""
    model, tokenizer, config = run.model, run.tokenizer, run.config
    steps, lr, warmup_steps = config["steps"], config["lr"], config["warmup_steps"]
    mask_generator = torch.Generator().manual_seed(config["seed"] + 1)
    decay, no_decay = [], []  # AdamW with no weight decay on biases and norms
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": config["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    run.save_if_due(0)
    probe = None
    if live is not None:
        from ..live.probe import TrainingProbe

        options = {"results_dir": run.path / "live", "total_steps": steps, "reduction": "mean", "overwrite": True}
        probe = TrainingProbe(model, tokenizer=tokenizer, **{**options, **live}).attach()
    device = next(model.parameters()).device
    try:
        bar = progress_bar(range(1, steps + 1), progress=progress, desc=f"Training toy {config['arch']}")
        for step in bar:
            batch = next(batches)
            if config["objective"] == "masked_lm":
                input_ids, labels = _mask_tokens(batch, tokenizer, masking=masking, generator=mask_generator)
            else:
                input_ids, labels = batch, batch
            # linear warm-up to lr, then cosine decay to 0.1 lr at the last step
            learning_rate = lr * step / warmup_steps
            if step > warmup_steps:
                done = (step - warmup_steps) / max(1, steps - warmup_steps)
                learning_rate = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))
            for group in optimizer.param_groups:
                group["lr"] = learning_rate
            model.train()
            ids = input_ids.to(device)
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels.to(device)).loss
            if not torch.isfinite(loss):
                raise InvalidInputError(f"The training loss became {loss.item()} at step {step}; lower lr (now {lr}).")
            optimizer.zero_grad(set_to_none=True)
            # torch.autograd.backward, not loss.backward(): nnsight (imported by Interpreto) patches Tensor.backward
            # with a tracer that reads the caller's source code at every call, which would double the step time.
            torch.autograd.backward(loss)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            loss_value = float(loss.detach())
            if probe is not None:
                probe.step()
            run.log_history.append({"step": step, "loss": loss_value, "learning_rate": learning_rate})
            bar.set_postfix(loss=f"{loss_value:.3f}")
            run.save_if_due(step)
    finally:
        if probe is not None:
            probe.detach()
    return probe


class _Run:
    """The run being written: its log, its trainer state, and the checkpoints saved at the chosen steps."""

    def __init__(self, path: Path, model: torch.nn.Module, tokenizer: Any, config: dict, steps: list[int]):
        self.path, self.model, self.tokenizer, self.config = (path, model, tokenizer, config)
        self.checkpoint_steps = steps
        self.log_history, self.checkpoints = [], []

    def state(self, step: int) -> dict:
        """The ``trainer_state.json`` content at `step`."""
        return {
            "global_step": step,
            "max_steps": self.config["steps"],
            "checkpoint_steps": self.checkpoint_steps,
            "log_history": list(self.log_history),
            "toy_config": self.config,
        }

    def save_if_due(self, step: int) -> None:
        """Save ``checkpoint-{step}`` when `step` is a chosen step."""
        if step in self.checkpoint_steps:
            folder = self.path / f"checkpoint-{step}"
            self.model.eval()
            with quiet_transformers():  # no "Writing model shards" bar
                self.model.save_pretrained(folder)
                self.tokenizer.save_pretrained(folder)
            give_default_modes(folder)
            write_atomically(folder / TRAINER_STATE_NAME, json.dumps(self.state(step), indent=2))
            self.checkpoints.append(folder)


def _batches(blocks: torch.Tensor, *, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Batches of blocks in a seeded random order, reshuffled each time they run out (never wrapping around)."""
    generator = torch.Generator().manual_seed(seed)
    order, cursor = torch.randperm(blocks.shape[0], generator=generator), 0
    while True:
        if cursor + batch_size > len(order):
            order, cursor = torch.randperm(blocks.shape[0], generator=generator), 0
        yield blocks[order[cursor : cursor + batch_size]]
        cursor += batch_size
