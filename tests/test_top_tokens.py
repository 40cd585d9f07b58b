# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Top-activating tokens of the tangent directions: saved by the sweep, equal to a brute-force recomputation (every
text read alone through a forward hook, every score an explicit dot product with the saved basis) on a causal and a
masked model, shown escaped in the report, never recomputed by a resume."""

from __future__ import annotations

import shutil

import pytest
import torch
from markupsafe import escape
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

import interpreto_anisotropy as ia
from interpreto_anisotropy.results.records import saved_steps
from interpreto_anisotropy.results.store import SweepStore
from interpreto_anisotropy.sweeps import runner
from interpreto_anisotropy.tangents.top_tokens import CONTEXT_BEFORE, TOP_TOKENS, DirectionTokens, TokenInContext
from interpreto_anisotropy.visualizations.report import top_tokens_section

SETTINGS = {
    "split_point": 1,
    "nb_concepts": 4,
    "n_controls": 4,
    "seed": 3,
    "max_fit_tokens": 1500,
    "max_metric_tokens": 600,
    "reference": "both",
    "progress": False,
}
# the sweep reads texts in right-padded batches, the brute force one by one: float32 rows agree to rounding
RTOL = 1e-4


def _sweep(checkpoints, results_dir, fit_texts, texts):
    return ia.CheckpointSweep(
        checkpoints, results_dir=results_dir, texts=fit_texts[:16], probe_texts=texts[:12], **SETTINGS
    )


@pytest.fixture(scope="module")
def causal(toy_checkpoints, fit_texts, texts, tmp_path_factory):
    """A finished sweep of three GPT-NeoX checkpoints: (results folder, table, checkpoints)."""
    checkpoints = [
        c for c in ia.checkpoints.local(str(toy_checkpoints.out_dir / "checkpoint-*")) if c.step in (0, 2, 20)
    ]
    results_dir = tmp_path_factory.mktemp("causal") / "sweep"
    table = _sweep(checkpoints, results_dir, fit_texts, texts).run()
    return results_dir, table, checkpoints


@pytest.fixture(scope="module")
def masked(eurobert_model, fit_texts, texts, tmp_path_factory):
    """A finished sweep of two EuroBERT checkpoints (masked LM, BOS and EOS around every text)."""
    model, tokenizer = eurobert_model
    run = tmp_path_factory.mktemp("eurobert_run")
    for step in (0, 1):
        model.save_pretrained(run / f"checkpoint-{step}")
        tokenizer.save_pretrained(run / f"checkpoint-{step}")
    checkpoints = ia.checkpoints.local(str(run / "checkpoint-*"))
    results_dir = tmp_path_factory.mktemp("masked") / "sweep"
    table = _sweep(checkpoints, results_dir, fit_texts, texts).run()
    assert {row["objective"] for row in table.rows} == {"masked_lm"}
    return results_dir, table, checkpoints


def _rows_read_one_by_one(folder, automodel, split_point, texts, n_rows):
    """The first `n_rows` non-special token activations of `texts`, each text alone, with token ids and locations."""
    model = automodel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    captured = []
    model.get_submodule(split_point).register_forward_hook(
        lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
    )
    special = set(tokenizer.all_special_ids)
    rows, ids, where = [], [], []
    for index, text in enumerate(texts):
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            model(**encoded)
        hidden = captured.pop()[0]
        for position, token in enumerate(encoded["input_ids"][0].tolist()):
            if token not in special and len(rows) < n_rows:
                rows.append(hidden[position].double())
                ids.append(token)
                where.append((index, position))
    return rows, ids, where, tokenizer


def _brute_force(rows, ids, basis):
    """Per direction: (variance share, high indices, low indices), by explicit loops over the tokens."""
    n = len(rows)
    mean = sum(rows) / n
    total = sum(float(torch.dot(h - mean, h - mean)) for h in rows)
    found = []
    for j in range(basis.shape[1]):
        q = basis[:, j].double()
        scores = [float(torch.dot(h - mean, q)) for h in rows]
        ends = []
        for sign in (1, -1):
            best: dict[int, int] = {}
            for i, score in enumerate(scores):
                if ids[i] not in best or sign * score > sign * scores[best[ids[i]]]:
                    best[ids[i]] = i
            ends.append(sorted(best.values(), key=lambda i: (-sign * scores[i], i))[:TOP_TOKENS])
        found.append((sum(s * s for s in scores) / total, scores, *ends))
    return found


def _saved_bases(results_dir, step):
    return {
        "early": ia.Subspace.load(results_dir / "reference" / "1.safetensors").basis,
        "each": ia.Subspace.load(results_dir / "tangents" / "1" / f"step-{step}.safetensors").basis,
    }


@pytest.mark.parametrize(("name", "automodel"), [("causal", AutoModelForCausalLM), ("masked", AutoModelForMaskedLM)])
def test_top_tokens_equal_a_brute_force_recomputation(name, automodel, request, fit_texts):
    results_dir, table, checkpoints = request.getfixturevalue(name)
    for checkpoint in (checkpoints[0], checkpoints[-1]):
        saved = table.top_tokens(1, step=checkpoint.step)
        assert saved["step"] == checkpoint.step and list(saved["tangents"]) == ["early", "each"]
        rows, ids, where, tokenizer = _rows_read_one_by_one(
            checkpoint.source, automodel, saved["split_point"], fit_texts[:16], saved["n_rows"]
        )
        assert len(rows) == saved["n_rows"] == SETTINGS["max_metric_tokens"]
        for kind, basis in _saved_bases(results_dir, checkpoint.step).items():
            directions = saved["tangents"][kind]
            assert [direction.direction for direction in directions] == list(range(SETTINGS["nb_concepts"]))
            for direction, (share, scores, high, low) in zip(directions, _brute_force(rows, ids, basis), strict=True):
                assert direction.variance_share == pytest.approx(share, rel=RTOL)
                for tokens, expected in ((direction.high, high), (direction.low, low)):
                    assert [(token.text, token.position) for token in tokens] == [where[i] for i in expected]
                    assert [token.token for token in tokens] == [tokenizer.decode([ids[i]]) for i in expected]
                    assert [token.score for token in tokens] == pytest.approx([scores[i] for i in expected], rel=RTOL)
                    for token, i in zip(tokens, expected, strict=True):
                        context = [k for k in range(max(0, i - CONTEXT_BEFORE), i) if where[k][0] == where[i][0]]
                        assert token.before == tokenizer.decode([ids[k] for k in context])


def test_the_masked_models_locations_count_its_special_tokens(masked):
    _, table, _ = masked
    positions = [token.position for d in table.top_tokens(1)["tangents"]["each"] for token in d.high + d.low]
    assert min(positions) >= 1  # position 0 holds the BOS token, never a row


def test_the_report_shows_the_top_tokens_of_the_last_checkpoint(causal, tmp_path):
    results_dir, table, checkpoints = causal
    page = ia.write_report(table, tmp_path / "report").read_text()
    section = page[page.index('<h2 id="top-tokens">') : page.index("<h2>Rows</h2>")]
    assert f"checkpoint at step {checkpoints[-1].step}" in section
    saved = table.top_tokens(1)
    for kind in ("early", "each"):
        for direction in saved["tangents"][kind]:
            for token in direction.high + direction.low:
                visible = escape(token.token.replace("\n", "\u21b5"))  # as Jinja2's autoescape writes it
                assert f"<mark>{visible}</mark>" in section
            assert f"{direction.variance_share:.3f}</td>" in section


def test_tokens_from_the_files_are_escaped(causal, tmp_path):
    results_dir, _, checkpoints = causal
    copy = tmp_path / "sweep"
    shutil.copytree(results_dir, copy)
    hostile = TokenInContext('<script>alert("x")</script>', "a & b <", "\n>", 1.5, 0, 1)
    (copy / "provenance.jsonl").unlink()  # a crafted file the sweep did not record (else refused when read)
    SweepStore(copy).save_top_tokens(
        1,
        checkpoints[-1].step,
        split_point="<i>point</i>",
        n_rows=1,
        directions={"each": [DirectionTokens(0, 0.5, [hostile], [hostile])]},
    )
    page = top_tokens_section(ia.SweepResult.load(copy))
    assert "<script>" not in page and "<i>point</i>" not in page
    assert "<mark>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</mark>" in page
    assert "a &amp; b &lt;<mark>" in page and "</mark>\u21b5&gt;</span>" in page


def test_a_resume_computes_the_top_tokens_of_new_checkpoints_only(causal, fit_texts, texts, tmp_path, monkeypatch):
    results_dir, _, checkpoints = causal
    copy = tmp_path / "sweep"
    shutil.copytree(results_dir, copy)
    calls = []
    original = runner.top_tokens
    monkeypatch.setattr(runner, "top_tokens", lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    files = sorted((copy / "top_tokens" / "1").glob("step-*.json"))
    before = {path.name: (path.stat().st_mtime_ns, path.read_bytes()) for path in files}
    _sweep(checkpoints, copy, fit_texts, texts).run()  # finished: nothing to do
    assert calls == []
    lines = (copy / "rows.jsonl").read_text().splitlines()
    (copy / "rows.jsonl").write_text("\n".join(lines[:-2]) + "\n")  # the last checkpoint's two rows are lost
    _sweep(checkpoints, copy, fit_texts, texts).run()
    assert len(calls) == 2  # the last checkpoint's early and each tangents, nothing else
    assert {path.name: (path.stat().st_mtime_ns, path.read_bytes()) for path in files} == before


def test_dropped_and_overwritten_checkpoints_lose_their_top_tokens(causal, tmp_path):
    results_dir, _, checkpoints = causal
    copy = tmp_path / "sweep"
    shutil.copytree(results_dir, copy)
    store = SweepStore(copy)
    store.drop_steps({checkpoints[-1].step})
    assert saved_steps(copy, 1) == [c.step for c in checkpoints[:-1]]
    store.prepare({"format_version": -1}, overwrite=True)
    assert not (copy / "top_tokens").exists() and not (copy / "provenance.jsonl").exists()
