# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Shared test kit: offline mode, a small corpus, and tiny Pythia-, SmolLM2- and EuroBERT-like models.

Every fixture here is session-scoped and cheap (a few seconds in all). Models are float32, in eval mode, built
with fixed seeds on the CPU, and wrapped in Interpreto's `ModelWithSplitPoints` at ``split_point=1`` (the output
of the second transformer block) with ``batch_size=8``. They are shared by the whole session: do not train,
move or otherwise mutate them in a test; build your own with `interpreto_anisotropy.demo.build_model` instead.

Each Interpreto wrapper owns a private copy of its model (same weights as the ``*_model`` pair), so the raw
``(model, tokenizer)`` pairs are never wrapped and can be deep-copied safely. Beware: a deep copy of a model that
is already wrapped by Interpreto silently runs the *original* modules (nnsight replaces each module's
``forward`` with a closure over the original), so forward hooks registered on the copy never fire.

Fixtures:
    corpus_texts: 300 texts of the corpus's ``train`` split, on which the toy tokenizers are trained.
    texts: 32 short texts (64 to 400 characters) of the ``probe`` split.
    fit_texts: 32 short texts of the ``fit`` split (disjoint from ``texts``).
    gpt_neox_model, llama_model, eurobert_model: ``(model, tokenizer)`` pairs (causal LM, causal LM, masked LM).
    gpt_neox_mwsp, llama_mwsp, eurobert_mwsp: those models wrapped in `ModelWithSplitPoints`.
    gpt_neox_classifier_model: ``(GPTNeoXForSequenceClassification, left-padding tokenizer)``, 2 labels.
    gpt_neox_classifier_splitter: that classifier in Interpreto's `SplitterForClassification`, the splitter that
        ``ConceptEncoderExplainer.get_inputs_to_concepts_model`` requires (for Occlusion on concepts).
    gpt_neox_classifier_mwsp: the same classifier in `ModelWithSplitPoints` at ``split_point=1``.
    toy_checkpoints: a tiny `train_toy` run (GPT-NeoX, 20 steps, hidden 32), its `ToyRun` result.

Torch runs on one CPU thread during tests (set ``INTERPRETO_ANISOTROPY_TEST_THREADS`` to change it), its float32
matmul precision ``INTERPRETO_ANISOTROPY_TEST_MATMUL_PRECISION`` (default "highest").

``--device cuda`` (or ``INTERPRETO_ANISOTROPY_TEST_DEVICE=cuda``) runs the device tests (`chosen_device`:
tests/test_on_device.py, tests/test_host_sync.py) on that device; the default is the CPU.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

# Tiny models run fastest on one CPU thread; with more, spinning threads slow every op down several times over on
# a busy machine (Occlusion on the toy classifier: 5 s with 2 threads, 1 s with 1). Override with this variable.
torch.set_num_threads(int(os.environ.get("INTERPRETO_ANISOTROPY_TEST_THREADS", "1")))
# benchmarks/margins/test_margins.py reruns tests under "high" as well ("highest" is torch's default).
torch.set_float32_matmul_precision(os.environ.get("INTERPRETO_ANISOTROPY_TEST_MATMUL_PRECISION", "highest"))

TOY_VOCAB_SIZE = 512
TOY_HIDDEN_SIZE = 64
TOY_NUM_LAYERS = 2
TOY_NUM_HEADS = 4
TOY_SPLIT_POINT = 1
TOY_BATCH_SIZE = 8
TOY_SEED = 0


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default=os.environ.get("INTERPRETO_ANISOTROPY_TEST_DEVICE", "cpu"),
        help="torch device of the device tests (cpu, cuda, cuda:1; env INTERPRETO_ANISOTROPY_TEST_DEVICE); default cpu",
    )


def pytest_configure(config):
    name = config.getoption("--device")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise pytest.UsageError(
            f"--device {name!r} is not a torch device ({error}); use cpu, cuda or cuda:1"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {name}: torch {torch.__version__} sees no CUDA device here")


@pytest.fixture(scope="session")
def chosen_device(request) -> torch.device:
    """The device of the device tests: ``--device`` or ``INTERPRETO_ANISOTROPY_TEST_DEVICE``, default the CPU."""
    return torch.device(request.config.getoption("--device"))


def _short(texts: list[str], *, n: int, max_chars: int = 400) -> list[str]:
    return [t for t in texts if len(t) <= max_chars][:n]


@pytest.fixture(scope="session")
def corpus_texts() -> list[str]:
    """300 texts of the toy corpus's ``train`` split (cached harvest of the stdlib docstrings)."""
    from interpreto_anisotropy.demo.corpus import load_corpus

    return load_corpus("train", max_texts=300, progress=False)


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """32 short texts (64 to 400 characters) of the corpus's ``probe`` split."""
    from interpreto_anisotropy.demo.corpus import load_corpus

    return _short(load_corpus("probe", progress=False), n=32)


@pytest.fixture(scope="session")
def fit_texts() -> list[str]:
    """32 short texts (64 to 400 characters) of the corpus's ``fit`` split."""
    from interpreto_anisotropy.demo.corpus import load_corpus

    return _short(load_corpus("fit", progress=False), n=32)


def _toy_pair(arch: str, corpus: list[str], *, task: str = "lm"):
    from helpers.versions import skip_without

    from interpreto_anisotropy.demo import build_model, train_tokenizer

    if arch == "eurobert":
        skip_without("EuroBertForMaskedLM")
    tokenizer = train_tokenizer(corpus, arch=arch, vocab_size=TOY_VOCAB_SIZE)
    model = build_model(
        arch,
        vocab_size=len(tokenizer),
        hidden_size=TOY_HIDDEN_SIZE,
        num_layers=TOY_NUM_LAYERS,
        num_heads=TOY_NUM_HEADS,
        seed=TOY_SEED,
        tokenizer=tokenizer,
        task=task,
    )
    return model, tokenizer


def _private_copy(pair):
    """A deep copy of a never-wrapped ``(model, tokenizer)`` pair, for one Interpreto wrapper to own."""
    model, tokenizer = pair
    return copy.deepcopy(model).eval(), copy.deepcopy(tokenizer)


def _mwsp(pair):
    from interpreto import ModelWithSplitPoints

    model, tokenizer = _private_copy(pair)
    return ModelWithSplitPoints(model, split_point=TOY_SPLIT_POINT, tokenizer=tokenizer, batch_size=TOY_BATCH_SIZE)


@pytest.fixture(scope="session")
def gpt_neox_model(corpus_texts):
    """``(GPTNeoXForCausalLM, tokenizer)``: a Pythia-like decoder, hidden 64, 2 layers, vocab 512, random weights."""
    return _toy_pair("gpt_neox", corpus_texts)


@pytest.fixture(scope="session")
def gpt_neox_training_model(corpus_texts):
    """The same decoder as `gpt_neox_model`, never wrapped in an Interpreto splitter (which freezes and wraps the
    modules it is given): the live probe's tests train copies of it."""
    return _toy_pair("gpt_neox", corpus_texts)


@pytest.fixture(scope="session")
def eurobert_training_model(corpus_texts):
    """The same encoder as `eurobert_model`, never wrapped in an Interpreto splitter."""
    return _toy_pair("eurobert", corpus_texts)


@pytest.fixture(scope="session")
def llama_model(corpus_texts):
    """``(LlamaForCausalLM, tokenizer)``: a SmolLM2-like decoder, hidden 64, 2 layers, vocab 512, random weights."""
    return _toy_pair("llama", corpus_texts)


@pytest.fixture(scope="session")
def eurobert_model(corpus_texts):
    """``(EuroBertForMaskedLM, tokenizer)``: a EuroBERT-like encoder, hidden 64, 2 layers, vocab 512, with mask."""
    return _toy_pair("eurobert", corpus_texts)


@pytest.fixture(scope="session")
def gpt_neox_mwsp(gpt_neox_model):
    """The Pythia-like decoder in `ModelWithSplitPoints` (split_point=1, i.e. ``gpt_neox.layers.1``)."""
    return _mwsp(gpt_neox_model)


@pytest.fixture(scope="session")
def llama_mwsp(llama_model):
    """The SmolLM2-like decoder in `ModelWithSplitPoints` (split_point=1, i.e. ``model.layers.1``)."""
    return _mwsp(llama_model)


@pytest.fixture(scope="session")
def eurobert_mwsp(eurobert_model):
    """The EuroBERT-like encoder in `ModelWithSplitPoints` (split_point=1, i.e. ``model.layers.1``)."""
    return _mwsp(eurobert_model)


@pytest.fixture(scope="session")
def gpt_neox_classifier_model(corpus_texts):
    """``(GPTNeoXForSequenceClassification, tokenizer)`` with 2 labels; the tokenizer pads on the left.

    Left padding puts each text's last token at position -1, which is where Interpreto's
    `SplitterForClassification` reads a decoder's sequence representation.
    """
    model, tokenizer = _toy_pair("gpt_neox", corpus_texts, task="sequence_classification")
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = "left"
    return model, tokenizer


@pytest.fixture(scope="session")
def gpt_neox_classifier_splitter(gpt_neox_classifier_model):
    """The classifier in Interpreto's `SplitterForClassification` (split at the input of the ``score`` head).

    This is the splitter `ConceptEncoderExplainer.get_inputs_to_concepts_model` accepts (a `ModelWithSplitPoints`
    is refused with an ``IncompatibilityError``), so use it for Occlusion and other inputs-to-concepts attributions.
    """
    from interpreto import SplitterForClassification

    model, tokenizer = _private_copy(gpt_neox_classifier_model)
    return SplitterForClassification(model, tokenizer=tokenizer, batch_size=TOY_BATCH_SIZE)


@pytest.fixture(scope="session")
def gpt_neox_classifier_mwsp(gpt_neox_classifier_model):
    """The classifier in `ModelWithSplitPoints` at split_point=1 (token activations of a classifier)."""
    return _mwsp(gpt_neox_classifier_model)


@pytest.fixture(scope="session")
def toy_checkpoints(tmp_path_factory):
    """A tiny `train_toy` run: GPT-NeoX, 20 steps, hidden 32, checkpoints at steps 0, 1, 2, 4, 8, 20.

    Yields the `interpreto_anisotropy.demo.ToyRun` (``.checkpoints`` lists the ``checkpoint-{step}`` folders,
    ``.out_dir`` holds ``trainer_state.json``).
    """
    from interpreto_anisotropy.demo import train_toy

    out_dir = tmp_path_factory.mktemp("toy_run")
    return train_toy(
        out_dir,
        arch="gpt_neox",
        steps=20,
        checkpoint_steps=[0, 1, 2, 4, 8, 20],
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        vocab_size=384,
        seq_len=32,
        batch_size=8,
        max_train_texts=200,
        seed=TOY_SEED,
        device="cpu",
        progress=False,
    )


@pytest.fixture(autouse=True)
def _seed_everything():
    """Each test starts from the same global torch random state."""
    torch.manual_seed(TOY_SEED)


@pytest.fixture(scope="module")
def sweep_texts(fit_texts, texts):
    """The fit and probe texts of the small sweeps of test_sweep.py and test_sweep_read_once.py."""
    return {"texts": fit_texts[:16], "probe_texts": texts[:12]}
