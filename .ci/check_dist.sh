#!/usr/bin/env bash
# The package as a user gets it (`make dist-check`, run by .ci/run): the wheel and sdist that `make dist` built in
# DIST (default dist/) pass `twine check`; the sdist holds every tracked file but .ci/ (the tests and what they
# read) and no machine-specific golden copy; in a fresh virtual environment, torch then the wheel install, and
# `interpreto-anisotropy --version` and a short `interpreto-anisotropy demo` run offline outside the clone; then,
# with the wheel's test extra, a subset of the sdist's own tests runs from the unpacked sdist.
#
# Environment: PY (the Python with build and twine, default .venv/bin/python), PYTHON (the Python of the fresh
# venv, default python3), TORCH (its torch, default torch==2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
PY=${PY:-.venv/bin/python}
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}
work=$(mktemp -d "${TMPDIR:-/tmp}/dist-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "dist-check: $*" >&2; exit 1; }
started=$SECONDS

wheels=("$dist"/*.whl) sdists=("$dist"/*.tar.gz)
[ ${#wheels[@]} = 1 ] && [ -f "${wheels[0]}" ] && [ ${#sdists[@]} = 1 ] && [ -f "${sdists[0]}" ] ||
    fail "$dist/ should hold one wheel and one sdist (make dist builds them): ${wheels[*]} ${sdists[*]}"
wheel=$(realpath "${wheels[0]}") sdist=$(realpath "${sdists[0]}")
version=$(basename "$wheel" | cut -d- -f2)

echo "== twine check"
"$PY" -m twine check --strict "$wheel" "$sdist"

echo "== the wheel ships py.typed; the sdist holds every tracked file but .ci/, and no tests/golden/local"
"$PY" -m zipfile -l "$wheel" >"$work/wheel.txt"
grep -q "interpreto_anisotropy/py.typed" "$work/wheel.txt" || fail "the wheel has no py.typed"
tar -tzf "$sdist" | sed 's|^[^/]*/||' | grep -v '/$' | sort >"$work/sdist.txt"
! grep -q '^tests/golden/local/' "$work/sdist.txt" || fail "the sdist holds tests/golden/local (machine-specific)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    missing=$(git ls-files | grep -v '^\.ci/' | sort | comm -23 - "$work/sdist.txt")
    [ -z "$missing" ] || fail "tracked files missing from the sdist (MANIFEST.in): $missing"
fi

echo "== a fresh venv ($("$PYTHON" --version)): $TORCH, then the wheel"
install_started=$SECONDS
"$PYTHON" -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/python" -m pip install --quiet --no-compile "$TORCH"
"$venv/python" -m pip install --quiet --no-compile "$wheel"
echo "installed in $((SECONDS - install_started)) s"

echo "== the command, outside the clone, offline"
mkdir "$work/outside"
cd "$work/outside"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
answer=$("$venv/interpreto-anisotropy" --version)
[ "$answer" = "interpreto-anisotropy $version" ] || fail "--version answered '$answer', not interpreto-anisotropy $version"
echo "$answer"
demo_started=$SECONDS
"$venv/interpreto-anisotropy" demo --out demo --steps 4 --nb-concepts 4 --n-controls 3 --no-progress >demo.log 2>&1 ||
    { tail -40 demo.log; fail "interpreto-anisotropy demo failed"; }
for written in demo/report/index.html demo/sweep/rows.jsonl demo/live/rows.jsonl; do
    [ -s "$written" ] || fail "the demo did not write $written"
done
echo "demo: $((SECONDS - demo_started)) s, wrote demo/report/index.html"

echo "== the sdist's own tests (a subset) against the installed wheel"
install_started=$SECONDS
"$venv/python" -m pip install --quiet --no-compile "$wheel[test]"
echo "test extra installed in $((SECONDS - install_started)) s"
mkdir "$work/sdist"
tar -xzf "$sdist" -C "$work/sdist"
cd "$work/sdist"/*/
"$venv/python" -m pytest -q -p no:cacheprovider -m "not slow" \
    tests/test_dependencies.py tests/test_readme.py tests/test_golden.py tests/test_sweep_config.py
echo "dist-check: passed in $((SECONDS - started)) s"
