# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The options of a toy training run (`train_toy`), declared once and checked once: `ToyConfig`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..commons.options import check_bool, check_device, check_number, config_of
from ..errors import InvalidInputError
from ..probing.masking import MaskedLM, resolve_masking
from .corpus import check_int, parse_choice
from .toy_models import MIN_VOCAB_SIZE, Arch, check_sizes

__all__ = ["ToyConfig", "log_spaced_steps"]

#: The options of `ToyConfig` that `build_model` takes as they are.
MODEL_SIZES = ("hidden_size", "num_layers", "num_heads", "intermediate_size")


@dataclass(frozen=True, kw_only=True)
class ToyConfig:
    """The options of `train_toy`, checked once when made (before any folder is written or any text is read).

    `train_toy(out_dir, config=ToyConfig(...))` takes it, or the same names as keyword arguments (on top of
    `config` when both are given); the run folder and the training texts are data, not options.

    Attributes:
        arch: ``"gpt_neox"`` (Pythia-like), ``"llama"`` (SmolLM2-like) or ``"eurobert"`` (EuroBERT-like encoder);
            stored as an `Arch`. Default ``"gpt_neox"``.
        steps: Number of optimiser updates (default 300).
        checkpoint_steps: ``"log"`` (default) for `log_spaced_steps` (0, 1, 2, 4, ..., then every ``steps // 10``),
            or a list of steps in ``[0, steps]``; `checkpoint_step_list` resolves it.
        hidden_size: Width of the residual stream, in dimensions (default 64).
        num_layers: Number of transformer blocks (default 2).
        num_heads: Number of attention heads (default 4); ``hidden_size / num_heads`` must be an even integer.
        intermediate_size: Width of the MLP, in dimensions (None, the default: ``4 * hidden_size``).
        vocab_size: Size of the trained tokenizer's vocabulary, in tokens (default 512, at least 262).
        seq_len: Tokens per training sequence (default 64, at least 2).
        batch_size: Sequences per step (default 16).
        lr: Peak learning rate of AdamW (default 3e-3), a finite number > 0.
        warmup_steps: Steps of linear warm-up (None, the default: ``max(1, steps // 20)``; see
            `effective_warmup_steps`).
        weight_decay: AdamW weight decay (default 0.01), a number >= 0; none on biases and norms.
        mlm_probability: Share of tokens predicted by the masked LM (encoder only), in (0, 1); None (default): 0.15,
            or the rate of ``masking``. The shorthand of ``MaskedLM(rate=mlm_probability)``.
        masking: The encoder's masking rate and mask / random / keep split, a `MaskedLM` (None, the default: BERT's
            15 %, 80/10/10); see `masked_lm`.
        max_train_texts: Use at most this many training texts (None, the default: all).
        seed: Seed of the initialisation, the data order and the masking (default 0).
        device: ``"cpu"`` (default), ``"cuda"`` (an error of ours if no GPU is present), or ``None`` for a GPU if any;
            see `torch_device`.
        num_threads: CPU threads torch uses while training (restored afterwards; ``None`` keeps torch's setting).
            Default 1: so tiny a model gains nothing from more, and spinning threads slow it down on a busy machine.
        overwrite: Replace the checkpoints of a previous run in the run folder instead of raising (default False).
        progress: Show a progress bar (default True).
        live: The options of a live `TrainingProbe` to train with (None, the default: none); ``split_points``
            required, ``results_dir`` defaults to ``out_dir/live``, ``total_steps`` to ``steps``, ``reduction`` to
            ``"mean"`` (the toy's loss).

    Raises:
        InvalidInputError: If ``arch`` is unknown, ``steps < 1``, a checkpoint step is outside ``[0, steps]``, a size
            or rate is out of range, ``masking`` and ``mlm_probability`` disagree, a CUDA device is asked but absent,
            or ``live`` lacks ``split_points``; the message names the option.

    Examples:
        >>> ToyConfig(steps=20, checkpoint_steps=[20, 0]).checkpoint_step_list
        [0, 20]
        >>> ToyConfig(lr=0)
        Traceback (most recent call last):
        ...
        interpreto_anisotropy.errors.InvalidInputError: lr must be a finite number > 0, got 0.
    """

    arch: Arch | str = "gpt_neox"
    steps: int = 300
    checkpoint_steps: str | Sequence[int] = "log"
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int | None = None
    vocab_size: int = 512
    seq_len: int = 64
    batch_size: int = 16
    lr: float = 3e-3
    warmup_steps: int | None = None
    weight_decay: float = 0.01
    mlm_probability: float | None = None
    masking: MaskedLM | None = None
    max_train_texts: int | None = None
    seed: int = 0
    device: str | torch.device | None = "cpu"
    num_threads: int | None = 1
    overwrite: bool = False
    progress: bool = True
    live: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arch", parse_choice(self.arch, Arch, "toy architecture"))
        check_int("steps", self.steps)
        _resolve_checkpoint_steps(self.checkpoint_steps, self.steps)
        counts = {name: getattr(self, name) for name in (*MODEL_SIZES, "batch_size", "max_train_texts", "num_threads")}
        check_sizes(**counts, warmup_steps=self.effective_warmup_steps)
        check_int("vocab_size", self.vocab_size, minimum=MIN_VOCAB_SIZE)
        check_int("seq_len", self.seq_len, minimum=2)
        check_number("lr", self.lr, above=0)
        check_number("weight_decay", self.weight_decay, at_least=0)
        check_int("seed", self.seed, minimum=0)
        resolve_masking(self.masking, self.mlm_probability)
        _resolve_device(self.device)
        check_bool("overwrite", self.overwrite)
        check_bool("progress", self.progress)
        if self.live is not None and not (isinstance(self.live, Mapping) and "split_points" in self.live):
            raise InvalidInputError("live needs split_points, e.g. live={'split_points': 1, 'early_steps': 30}.")

    @property
    def checkpoint_step_list(self) -> list[int]:
        """The sorted, distinct steps of the checkpoints saved (``checkpoint_steps`` resolved)."""
        return _resolve_checkpoint_steps(self.checkpoint_steps, self.steps)

    @property
    def effective_warmup_steps(self) -> int:
        """``warmup_steps``, or its default ``max(1, steps // 20)`` when None."""
        return max(1, self.steps // 20) if self.warmup_steps is None else self.warmup_steps

    @property
    def masked_lm(self) -> MaskedLM:
        """The encoder's masking, from ``masking`` and / or ``mlm_probability`` (`resolve_masking`)."""
        return resolve_masking(self.masking, self.mlm_probability)

    @property
    def torch_device(self) -> torch.device:
        """``device`` as a `torch.device` (None: ``cuda`` when a GPU is present, else ``cpu``)."""
        return _resolve_device(self.device)

    @classmethod
    def of(cls, config: ToyConfig | None, options: Mapping[str, Any]) -> ToyConfig:
        """`config` (default settings if None) with `options` in place of its fields.

        Args:
            config: The settings given as a `ToyConfig`, or None.
            options: Settings given as keyword arguments, by field name.

        Returns:
            The checked settings.

        Raises:
            InvalidInputError: `config` is not a `ToyConfig`, an option that is no field (the message lists the
                fields), or a bad value.

        Examples:
            >>> settings = ToyConfig.of(ToyConfig(steps=20), {"seed": 3})
            >>> settings.steps, settings.seed
            (20, 3)
        """
        return config_of(cls, config, options, owner="train_toy", besides=", besides out_dir, texts and config")


def log_spaced_steps(steps: int, *, n_even: int = 10) -> list[int]:
    """Pythia-like checkpoint steps: ``0, 1, 2, 4, ...`` below an interval, then every interval up to ``steps``.

    The interval is ``steps // n_even`` (at least 1), as Pythia saves steps 0, 1, 2, 4, ..., 512 and then every
    1000 steps.

    Args:
        steps: Number of training steps (at least 1).
        n_even: Number of evenly spaced checkpoints after the log-spaced ones.

    Returns:
        The sorted, distinct checkpoint steps, from 0 to ``steps`` included.

    Raises:
        InvalidInputError: If ``steps`` or ``n_even`` is not a positive integer.

    Examples:
        >>> log_spaced_steps(300)
        [0, 1, 2, 4, 8, 16, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300]
    """
    check_int("steps", steps)
    check_int("n_even", n_even)
    interval = max(1, steps // n_even)
    powers = {1 << exponent for exponent in range((interval - 1).bit_length())}  # 1, 2, 4, ... below the interval
    return sorted({0, steps, *powers, *range(interval, steps + 1, interval)})


def _resolve_checkpoint_steps(checkpoint_steps: str | Sequence[int], steps: int) -> list[int]:
    if isinstance(checkpoint_steps, str) and checkpoint_steps == "log":
        return log_spaced_steps(steps)
    if isinstance(checkpoint_steps, str) or not isinstance(checkpoint_steps, Iterable):
        raise InvalidInputError(f"checkpoint_steps must be 'log' or a list of steps; got {checkpoint_steps!r}.")
    chosen = list(checkpoint_steps)
    if not chosen:
        raise InvalidInputError("checkpoint_steps is empty; give at least one step, or 'log'.")
    for step in chosen:
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= steps:
            raise InvalidInputError(f"Every checkpoint step must be an integer in [0, steps={steps}]; got {step!r}.")
    return sorted(set(chosen))


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(check_device("device", device))
    if resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise InvalidInputError(f"device={device!r} was asked but {count} CUDA GPU(s) exist; use device='cpu'.")
    return resolved
