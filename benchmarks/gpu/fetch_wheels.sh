#!/usr/bin/env bash
# Download, on a machine that reaches PyPI, the wheels the GPU machine lacks (Python 3.12, x86-64 Linux) into .whl/.
# The GPU image already has torch, transformers, tokenizers, safetensors, numpy, scipy, scikit-learn, matplotlib,
# einops, jaxtyping, hypothesis, pytest, rich, httpx and cloudpickle; Interpreto and nnsight's other needs travel.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
PYTHON=${PYTHON:-python3}
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
packages=(
    interpreto==0.5.2 nnsight==0.7.0 beartype nltk astor toml zstandard
    ipython ipython-pygments-lexers jedi parso traitlets decorator matplotlib-inline prompt_toolkit wcwidth
    stack_data executing asttokens pure_eval pexpect ptyprocess
    pydantic pydantic-core annotated-types typing-inspection
    python-socketio python-engineio bidict simple-websocket wsproto
)
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "${packages[@]}"
du -sh .whl
ls .whl
