# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The presets of the ten models the paper swept, offline: revision naming, step parsing and checking, errors that
name the option, explicit maps, and each number recomputed another way (or traced to the docs that cite it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from transformers import AutoConfig

import interpreto_anisotropy as ia
from interpreto_anisotropy.errors import InvalidInputError
from interpreto_anisotropy.probing.masking import MaskedLM
from interpreto_anisotropy.probing.objectives import ObjectiveName, objective_from_config
from interpreto_anisotropy.sweeps import checkpoints as ck
from interpreto_anisotropy.sweeps import suites
from interpreto_anisotropy.sweeps.config import SweepConfig, SweepPlan

DOCS = Path(__file__).resolve().parents[1] / "docs" / "suites.md"
PAPER_MODELS = {
    "eurobert-210m", "eurobert-610m", "moderncamembert-base", "olmo-1b", "pythia-160m", "pythia-410m", "pythia-1b",
    "gaperon-1.5b", "smollm2-360m", "smollm2-1.7b",
}  # fmt: skip


def test_the_ten_models_of_the_paper_have_a_preset():
    assert set(suites.PRESETS) == PAPER_MODELS and len(suites.PRESETS) == 10


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
def test_a_preset_is_consistent(name):
    family, size = suites.find(name)
    assert f"{family.id}-{size.size}" == name
    assert 0 < size.recommended_split_point < size.num_layers
    assert size.recommended_split_point == size.num_layers - size.num_layers // 2 - size.num_layers % 2
    assert size.model_id.count("/") == 1 and family.sources
    assert (family.masking is None) or family.objective is ObjectiveName.MASKED_LM
    # Every gap is said: no revision format, no training length or no stated masking is listed as unconfirmed.
    if family.revision_format is None or family.total_steps is None:
        assert family.unconfirmed
    if family.objective is ObjectiveName.MASKED_LM and family.masking is None:
        assert any("masking" in item for item in family.unconfirmed)


@pytest.mark.parametrize("family", list(suites.SUITES.values()), ids=list(suites.SUITES))
def test_the_objective_is_the_one_transformers_registers_for_the_architecture(family):
    config = AutoConfig.for_model(family.architecture.value)
    assert objective_from_config(config) is family.objective


@pytest.mark.parametrize("family", list(suites.SUITES.values()), ids=list(suites.SUITES))
def test_the_docs_page_cites_every_source_and_names_every_preset(family):
    page = DOCS.read_text(encoding="utf-8")
    for url in family.sources:
        assert url in page, f"docs/suites.md does not cite {url}"
    for preset in family.presets:
        assert f"`{preset}`" in page


def test_preset_names_are_case_insensitive_and_unknown_ones_are_listed():
    assert suites.find("Pythia-160M") == suites.find("pythia-160m")
    with pytest.raises(InvalidInputError, match="'bloom-560m'.*'olmo-1b'"):
        suites.find("bloom-560m")
    with pytest.raises(InvalidInputError, match=r"'70m'.*\['160m', '410m', '1b'\].*hub"):
        ck.suite("pythia-70m", steps=[0])
    with pytest.raises(InvalidInputError, match="presets"):
        suites.find(160)


# --------------------------------------------------------------------------------------------------------------------
# Pythia: revisions step{N}, the published schedule, 143000 steps


def test_pythia_preset_is_the_pythia_helper_with_its_run():
    run = ck.suite("pythia-410m", [1000, 0, 512])
    assert run == ck.pythia("410m", [0, 512, 1000])
    assert [c.revision for c in run] == ["step0", "step512", "step1000"]
    assert run.total_steps == 143_000 == 143 * 1000 == ck.PYTHIA_STEPS[-1]
    assert run.objective == "causal_lm"
    assert len(suites.PYTHIA_STEPS) == 1 + 10 + 143  # step 0, the powers of two 1..512, then 1000..143000
    # EleutherAI/pythia: "Each model saw 299,892,736,000 tokens", in steps of 2 097 152 tokens (1024 x 2048).
    assert run.total_steps * 1024 * 2048 == 299_892_736_000


@pytest.mark.parametrize("steps", [[3], [1500], [144000]])
def test_pythia_preset_refuses_unpublished_steps(steps):
    with pytest.raises(InvalidInputError, match=rf"Pythia.*\b{steps[0]}\b"):
        ck.suite("pythia-160m", steps)
    with pytest.raises(InvalidInputError, match=rf"Pythia.*\b{steps[0]}\b"):
        ck.suite("pythia-160m", revisions=[f"step{steps[0]}"])


def test_another_repository_of_the_suite():
    run = ck.suite("pythia-1b", [143000], model_id="EleutherAI/pythia-1b-deduped")
    assert run == [ck.Checkpoint(143000, "EleutherAI/pythia-1b-deduped", "step143000")]


# --------------------------------------------------------------------------------------------------------------------
# SmolLM2: revisions step-{N}, steps unchecked


def test_smollm2_preset_is_the_smollm2_helper():
    assert ck.suite("smollm2-360m", [320000, 160000]) == ck.smollm2("360M", [160000, 320000])
    run = ck.suite("smollm2-1.7b", 125000)
    assert run[0].revision == "step-125000" and run.total_steps is None and run.objective == "causal_lm"
    assert ck.suite("smollm2-1.7b", 7)[0].revision == "step-7"  # unchecked: fails at load time if not published


def test_smollm2_checkpoint_interval_is_about_250b_tokens():
    # The 1.7B card: a checkpoint every 125000 steps is ~250B tokens, at a global batch of 2 097 152 tokens.
    _, size = suites.find("smollm2-1.7b")
    assert size.checkpoint_interval * 2_097_152 == pytest.approx(250e9, rel=0.06)


# --------------------------------------------------------------------------------------------------------------------
# OLMo: step{N}-tokens{T}B names, not buildable from the step; 738020 steps


def test_olmo_takes_revision_names_and_parses_their_step():
    run = ck.suite("olmo-1b", revisions=["step20000-tokens84B", "step1000-tokens4B", "step738020-tokens3094B"])
    assert [(c.step, c.revision) for c in run] == [
        (1000, "step1000-tokens4B"), (20000, "step20000-tokens84B"), (738020, "step738020-tokens3094B"),
    ]  # fmt: skip
    assert all(c.source == "allenai/OLMo-1B-hf" for c in run)
    assert run.total_steps == 738020 and run.objective == "causal_lm"


def test_olmo_refuses_bare_steps_and_says_what_to_pass():
    with pytest.raises(InvalidInputError, match=r"tokens.*revisions="):
        ck.suite("olmo-1b", steps=[1000])


def test_olmo_training_length_matches_its_token_count():
    # OLMo-1B.yaml: 2048 sequences of 2048 tokens a step, "3.1T tokens"; the card: "3 Trillion".
    tokens = suites.SUITES["olmo"].total_steps * 2048 * 2048
    assert 3.0e12 < tokens < 3.1e12 + 0.05e12
    # The card's example revision step20000-tokens84B: 20000 steps of 4 194 304 tokens are 83.9B.
    assert round(20000 * 2048 * 2048 / 1e9) == 84


def test_a_step_after_the_end_of_training_is_refused():
    with pytest.raises(InvalidInputError, match="800000.*738020"):
        ck.suite("olmo-1b", revisions={800000: "main"})


# --------------------------------------------------------------------------------------------------------------------
# Suites whose revision naming is not confirmed: explicit maps only


@pytest.mark.parametrize("name", ["eurobert-210m", "eurobert-610m", "moderncamembert-base", "gaperon-1.5b"])
def test_unconfirmed_naming_needs_an_explicit_map(name):
    with pytest.raises(InvalidInputError, match=r"revisions=\{step: revision\}"):
        ck.suite(name, steps=[0, 1000])
    run = ck.suite(name, revisions={1000: "rev-b", 0: "rev-a"})
    assert [(c.step, c.revision) for c in run] == [(0, "rev-a"), (1000, "rev-b")]
    assert run.total_steps is None
    assert run[0].source == suites.find(name)[1].model_id


def test_encoders_carry_their_stated_masking_or_the_default():
    assert ck.suite("moderncamembert-base", revisions={0: "a"}).objective == MaskedLM(rate=0.3)
    assert suites.SUITES["moderncamembert"].masking.rate == 0.3  # the card: "30% mask rate"
    assert suites.SUITES["eurobert"].masking is None
    assert ck.suite("eurobert-610m", revisions={0: "a"}).objective == MaskedLM()  # not stated: BERT's default


# --------------------------------------------------------------------------------------------------------------------
# options refused, naming the option


def test_steps_or_revisions_exactly_once():
    with pytest.raises(InvalidInputError, match="steps=.*revisions=.*neither"):
        ck.suite("pythia-160m")
    with pytest.raises(InvalidInputError, match="steps=.*revisions=.*both"):
        ck.suite("pythia-160m", [0], revisions=["step0"])
    with pytest.raises(InvalidInputError):
        ck.suite("pythia-160m", [])
    with pytest.raises(InvalidInputError):
        ck.suite("eurobert-210m", revisions={})
    with pytest.raises(InvalidInputError, match=r"steps.*-1"):
        ck.suite("smollm2-360m", [-1])
    with pytest.raises(InvalidInputError, match="'main'"):
        ck.suite("gaperon-1.5b", revisions=["main"])


def test_revision_of_a_suite():
    assert suites.SUITES["pythia"].revision(8) == "step8"
    with pytest.raises(InvalidInputError, match=r"steps.*True"):
        suites.SUITES["pythia"].revision(True)


@pytest.mark.parametrize("name", ["step738020-tokens3094B", "step1000-tokens4B", "step-160000", "step143000"])
def test_preset_revision_names_carry_their_step(name):
    assert ck.parse_step(name) == int(re.search(r"\d+", name).group())


# --------------------------------------------------------------------------------------------------------------------
# a sweep reads the preset's run


def test_a_sweep_takes_the_training_length_of_a_preset(tmp_path):
    checkpoints = ck.suite("olmo-1b", revisions=["step1000-tokens4B", "step20000-tokens84B"])
    config = SweepConfig(split_point=8, results_dir=tmp_path, progress=False)
    settings = SweepPlan(config, checkpoints, texts=["one text here", "another text"])
    assert settings.total_steps == 738020
    assert [c.step for c in settings.early] == [1000, 20000]  # both before 0.3 x 738020


def test_the_suites_module_is_reachable_from_the_package():
    assert ia.suites.SUITES is suites.SUITES and ia.checkpoints.suite is ck.suite


def test_a_sweep_left_to_auto_probes_with_the_preset_s_own_masking_and_records_it(tmp_path):
    texts = ["one text here", "another text there"]
    config = SweepConfig(results_dir=tmp_path, split_point=1)
    camembert = ia.checkpoints.suite("moderncamembert-base", revisions={0: "first", 10: "second"})
    settings = SweepPlan(config, camembert, texts=texts)
    assert settings.objective == ia.objectives.MaskedLM(rate=0.3)
    assert settings.record()["objective"] == {
        "objective": "masked_lm",
        "rate": 0.3,
        "mask": 0.8,
        "random": 0.1,
        "keep": 0.1,
    }
    chosen = SweepPlan(SweepConfig(results_dir=tmp_path, split_point=1, objective="masked_lm"), camembert, texts=texts)
    assert chosen.record()["objective"] == "masked_lm"  # what the user chose wins
    pythia = SweepPlan(config, ia.checkpoints.pythia("160m", [0, 1000]), texts=texts)
    assert pythia.record()["objective"] == "auto"  # configs written before presets knew objectives still match
