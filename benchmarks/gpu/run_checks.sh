#!/usr/bin/env bash
# Every GPU check and benchmark of the project in one command, for a machine with a CUDA GPU (about 6 minutes on
# one H200). Outputs go to $OUT (default runs/gpu): one text file per step, tails printed as they finish.
#
# On a GPU machine without PyPI, carry the wheels fetched by benchmarks/gpu/fetch_wheels.sh in .whl/.
# DEVICE=cpu WHEELS=none bash benchmarks/gpu/run_checks.sh rehearses the script on a CPU with small shapes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl > /dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"

"$PYTHON" - > "$OUT/environment.txt" 2>&1 <<'PY' || { cat "$OUT/environment.txt"; exit 1; }
import platform, torch, transformers, interpreto
import interpreto_anisotropy
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
PY
cat "$OUT/environment.txt"

step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    echo "== $name: exit $? in $((SECONDS - start)) s"
    grep -v "Loading weights\|Writing model" "$OUT/$name.txt" | tail -14
}

if [ "$DEVICE" = cuda ]; then
    small=pythia-160m large=pythia-410m shape_args=(--batch 8 --length 512 --batches 8 --repeats 3)
else
    small=cpu-small large=cpu-small shape_args=(--batch 4 --length 64 --batches 2 --repeats 1)
fi
step gpu_tests 120 "$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/test_host_sync.py tests/test_train_toy.py -k "gpu or cuda"
step probe_overhead 120 "$PYTHON" benchmarks/probe_overhead.py --device "$DEVICE" --shape "$small" --skip-interpreto \
    --batch "${shape_args[1]}" --length "${shape_args[3]}" --repeats 5
step throughput_small 120 "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$small" "${shape_args[@]}" \
    --whole-sweep
step throughput_small_bf16 90 "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$small" \
    "${shape_args[@]}" --autocast bf16
step throughput_large 120 "$PYTHON" benchmarks/sweep_throughput.py --device "$DEVICE" --shape "$large" "${shape_args[@]}"
