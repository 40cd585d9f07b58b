#!/usr/bin/env bash
# Every device check and benchmark of the project in one command, for a machine with a CUDA GPU (caps add up to
# 9 minutes; the expected total on one H200 is under 8): the device tests (tests/test_on_device.py: the conformance
# matrix in float32 and bfloat16 against the float64 CPU reference, GradientProbe, the tangent fit, a sweep and its
# report, the live probe and its Trainer callback; tests/test_host_sync.py: host synchronisations), then the
# benchmarks (probe / floor / training step at the Pythia-160m shape, 8 x 512; sweep throughput in float32 and bf16,
# Pythia-160m and -410m shapes; live-probe overhead). No Hub: every model is built from a config.
#
# Each step's output goes to a file under $OUT (default: a new temporary folder), its tail is printed as it ends,
# and a summary (summary.txt) closes the run; the exit status is 1 if any step failed or ran past its cap.
#
#   bash benchmarks/gpu/run_checks.sh                       # on the GPU machine
#   DEVICE=cpu bash benchmarks/gpu/run_checks.sh            # the CPU rehearsal (small shapes; `make gpu-rehearsal`)
#
# Python: $PYTHON, else .venv/bin/python (`make install`), else `python` / `python3` with torch. Its packages:
# torch, transformers, Interpreto and pytest. If any is missing, the wheels in $WHEELS (default .whl/, fetched by
# benchmarks/gpu/fetch_wheels.sh where PyPI is reachable) are installed into /tmp/site, else `pip install -e
# ".[test]"` is tried (needs an index); the project itself is read from src/ (PYTHONPATH), never installed.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
WHEELS=${WHEELS:-.whl}
OUT=${OUT:-$(mktemp -d -t interpreto-anisotropy-checks.XXXXXX)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python
    elif command -v python > /dev/null && python -c "import torch" 2> /dev/null; then PYTHON=python
    else PYTHON=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
needs() { "$PYTHON" -c "import torch, transformers, interpreto, pytest" 2> /dev/null; }
if ! needs; then
    if ls "$WHEELS"/*.whl > /dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$WHEELS"/*.whl || exit 1
        export PYTHONPATH="$PYTHONPATH:/tmp/site"
    else
        echo "== installing the project's dependencies with pip (torch, transformers, Interpreto or pytest missing)"
        timeout 600 "$PYTHON" -m pip install -q -e ".[test]"
    fi
    needs || { echo "cannot import torch, transformers, interpreto and pytest with $PYTHON; without an index," \
        "carry the wheels of benchmarks/gpu/fetch_wheels.sh in $WHEELS" >&2; exit 1; }
fi

"$PYTHON" - "$DEVICE" > "$OUT/environment.txt" 2>&1 << 'PY' || { cat "$OUT/environment.txt"; exit 1; }
import platform, sys, torch, transformers, interpreto
import interpreto_anisotropy
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "interpreto", getattr(interpreto, "__version__", "?"), "interpreto-anisotropy", interpreto_anisotropy.__version__)
print("device", sys.argv[1], "| cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
if sys.argv[1].startswith("cuda") and not torch.cuda.is_available():
    sys.exit("DEVICE=%s but torch sees no CUDA device" % sys.argv[1])
PY
cat "$OUT/environment.txt"
echo "== outputs in $OUT"

failed=0
summary=()
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS status
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    status=$?
    local verdict=ok
    [ "$status" = 0 ] || { verdict="FAILED (exit $status$([ "$status" = 124 ] && echo ", past its ${limit} s cap"))"; failed=1; }
    echo "== $name: $verdict in $((SECONDS - start)) s"
    grep -v "Loading weights\|Writing model\|warnings.warn\|UserWarning" "$OUT/$name.txt" | tail -14
    summary+=("$(printf '%-22s %-40s %4d s  %s' "$name" "$verdict" "$((SECONDS - start))" "$OUT/$name.txt")")
}

if [ "$DEVICE" = cpu ]; then  # the rehearsal: every step, tiny shapes, two families of the matrix
    tests_k=(-k "not float32 and not bfloat16 or gpt_neox or modernbert")
    small=cpu-tiny large=cpu-tiny shape_args=(--batch 2 --length 32 --batches 2 --repeats 1)
    live_shape=(--hidden 64 --layers 2 --vocab 1024 --batch 2 --length 32 --steps 2)
    caps=(400 240 240 180 1 240)  # generous: CI machines are often loaded
else
    tests_k=()
    small=pythia-160m large=pythia-410m shape_args=(--batch 8 --length 512 --batches 8 --repeats 3)
    live_shape=(--hidden 768 --layers 12 --vocab 50304 --batch 8 --length 512 --steps 24)
    caps=(150 90 120 60 60 60)
fi
step device_tests "${caps[0]}" "$PYTHON" -m pytest -q -rs -p no:cacheprovider -W ignore::UserWarning --device "$DEVICE" \
    --junitxml "$OUT/device_tests.xml" tests/test_on_device.py tests/test_host_sync.py \
    tests/test_train_toy.py::test_training_on_cuda "${tests_k[@]}"
step probe_overhead "${caps[1]}" "$PYTHON" benchmarks/probe_overhead.py --device "$DEVICE" --shape "$small" \
    --skip-interpreto "${shape_args[@]}"
step throughput_small "${caps[2]}" "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$small" \
    "${shape_args[@]}" --whole-sweep
step throughput_small_bf16 "${caps[3]}" "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$small" \
    "${shape_args[@]}" --autocast bf16
if [ "$DEVICE" != cpu ]; then  # on the CPU the large shape is the small one: nothing more to rehearse
    step throughput_large "${caps[4]}" "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$large" \
        "${shape_args[@]}"
fi
step live_overhead "${caps[5]}" "$PYTHON" benchmarks/live_overhead.py --device "$DEVICE" "${live_shape[@]}" \
    --repeats 1 --only overhead

{
    echo "# $(date -u +%FT%TZ) device $DEVICE, $SECONDS s in all; $(head -1 "$OUT/environment.txt")"
    printf '%s\n' "${summary[@]}"
    grep -h "passed\|failed" "$OUT/device_tests.txt" | tail -1
} > "$OUT/summary.txt"
echo "== summary ($OUT/summary.txt)"
cat "$OUT/summary.txt"
exit "$failed"
