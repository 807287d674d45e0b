#!/usr/bin/env bash
# The GPU measurements in one prepared run: benchmark 1 with offload (issue 30) and
# benchmark 9, many agents on one machine (issue 43).
#
# Stages (STAGES, default all of them, in this order):
#   build       llama-cpp-python (the version CI pins, 0.3.36) built with CUDA into a fresh
#               virtual environment, .venv-gpu, with the project and its test extras;
#   xllama      xllamacpp's CUDA wheel, the version pyproject.toml pins, into the same
#               environment (replacing the CPU wheel the project's install brought);
#   streaming   benchmark 1 (bench/streaming.py) on a ~1B random-weight model with every
#               layer on the GPU, then decode tokens/s with all layers on the GPU against
#               none, alternating;
#   agents      benchmark 9 (bench/agents.py) on the GPU: aggregate generated tokens/s with
#               1, 4, 8 and 16 environments, xllamacpp in-process against llama-cpp-python
#               queued, llama_cpp.server and xllamacpp's HTTP server, on a ~1B F32 model;
#               then evaluated / new prompt tokens on both in-process engines (turns,
#               tab switch, fork, retry, predict --session);
#   checkpoints hybrid-model checkpoint save and restore against the state's size
#               (bench/checkpoints.py), the states now in GPU memory;
#   reality     issues 41 and 42's tables (bench/reality.py, bench/grounding.py) on a real
#               world model, REAL_MODEL (a GGUF file), every layer on the GPU. Not in the
#               default stages: it needs the model and the real MCP servers installed
#               beforehand (`python bench/realworld.py --install DIR`, then
#               AGENTWORLD_BENCH_SERVERS=DIR), Node, tmux and bubblewrap.
# Logs and figures go to $OUT (or ./gpu-bench-out).
#
# The build needs the CUDA toolkit (nvcc) and a C++ compiler. A machine without network
# access needs a folder of wheels made beforehand, WHEELHOUSE: the project's dependencies,
# an llama-cpp-python sdist (`pip download --no-binary :all: llama-cpp-python==0.3.36`)
# and xllamacpp's CUDA wheel (`pip download xllamacpp==VERSION --no-deps --index-url
# https://xorbitsai.github.io/xllamacpp/whl/cu128`); the installs then use --no-index.
# CUDA_ARCH limits the kernels built (90 for H100/H200 keeps the build to a few minutes;
# "native" asks the local GPU). XLLAMACPP_INDEX picks the CUDA wheel's index (cu128 by
# default; cu132 needs a driver for CUDA 13.2).
#
#   bash bench/gpu.sh                                   # with network
#   WHEELHOUSE=/path/to/wheels bash bench/gpu.sh
#   STAGES="xllama agents" bash bench/gpu.sh            # .venv-gpu made by an earlier run
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
CUDA_ARCH="${CUDA_ARCH:-native}"
OUT="${OUT:-$PWD/gpu-bench-out}"
LLAMA_VERSION="${LLAMA_VERSION:-0.3.36}"
XLLAMACPP_INDEX="${XLLAMACPP_INDEX:-https://xorbitsai.github.io/xllamacpp/whl/cu128}"
STAGES="${STAGES:-build xllama streaming agents checkpoints}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-bench.log") 2>&1

wants() { [[ " $STAGES " == *" $1 "* ]]; }

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || {
    echo "no NVIDIA GPU visible (nvidia-smi failed)"; exit 1; }
nproc
command -v nvcc && nvcc --version | tail -1 || echo "nvcc not on PATH: the CUDA build will fail"

pip_args=(--quiet)
if [ -n "${WHEELHOUSE:-}" ]; then
    pip_args+=(--no-index --find-links "$WHEELHOUSE")
fi

if wants build; then
    echo "== build llama-cpp-python $LLAMA_VERSION with CUDA (arch $CUDA_ARCH)"
    "$PYTHON" -m venv .venv-gpu
    # shellcheck disable=SC1091
    . .venv-gpu/bin/activate
    python -m pip install "${pip_args[@]}" --upgrade pip || true
    start=$(date +%s)
    CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH" FORCE_CMAKE=1 \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        python -m pip install "${pip_args[@]}" --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMA_VERSION"
    echo "built in $(( $(date +%s) - start ))s"
    python -m pip install "${pip_args[@]}" -e ".[test]"  # with llama_cpp.server's extras
else
    # shellcheck disable=SC1091
    . .venv-gpu/bin/activate
fi
python - <<'PY'
import llama_cpp
print("llama-cpp-python", llama_cpp.__version__, "GPU offload:", llama_cpp.llama_supports_gpu_offload())
assert llama_cpp.llama_supports_gpu_offload(), "this build cannot offload to the GPU"
PY

if wants xllama; then
    # The version the project declares (pyproject's lower bound), from the CUDA index.
    XLLAMACPP_VERSION=$(sed -n 's/.*"xllamacpp>=\([0-9.]*\).*/\1/p' pyproject.toml | head -1)
    echo "== xllamacpp $XLLAMACPP_VERSION for CUDA"
    if [ -n "${WHEELHOUSE:-}" ]; then
        python -m pip install "${pip_args[@]}" --force-reinstall --no-deps \
            "xllamacpp==$XLLAMACPP_VERSION"
    else
        python -m pip install --quiet --force-reinstall --no-deps \
            --index-url "$XLLAMACPP_INDEX" "xllamacpp==$XLLAMACPP_VERSION"
    fi
fi
python - <<'PY'
import xllamacpp
devices = xllamacpp.get_device_info()
print("xllamacpp", xllamacpp.__version__, "devices:", [d.get("name") for d in devices])
assert any("cpu" not in str(d.get("name", "")).lower() for d in devices), \
    "this xllamacpp build sees no GPU: install its CUDA wheel (stage xllama)"
PY

export AGENTWORLD_CONFIG_DIR="$OUT/config" AGENTWORLD_DATA_DIR="$OUT/data" HF_HUB_OFFLINE=1
MODELS="$PWD/.bench-models"

if wants streaming; then
    echo "== a ~1B random-weight model"
    MODEL=$(python - "$MODELS" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "bench")
from models import random_model
print(random_model(Path(sys.argv[1]), size="1b"))
PY
)
    ls -l "$MODEL"
    echo "== benchmark 1 on the GPU, then offload against the CPU"
    python bench/streaming.py --model-path "$MODEL" --gpu-layers -1 --offload \
        --tokens 256 --reps 5 --ctx 4096 | tee "$OUT/streaming-gpu.txt"
fi

if wants agents; then
    echo "== benchmark 9: many agents on one GPU"
    python bench/agents.py --models "$MODELS" --size 1b --gpu-layers -1 \
        --threads "$(nproc)" --slots 16 --envs 1,4,8,16 --steps 2 --tokens 128 --ctx 4096 \
        | tee "$OUT/agents-gpu.txt"
fi

if wants checkpoints; then
    echo "== checkpoint save and restore against the state's size, states on the GPU"
    python bench/checkpoints.py --sizes 8,32,63 --reps 7 | tee "$OUT/checkpoints-gpu.txt"
fi

if wants reality; then
    echo "== reality in the loop on ${REAL_MODEL:?set REAL_MODEL to a GGUF file of the world model}"
    real=(--model "$REAL_MODEL" --engine xllamacpp --gpu-layers -1 --threads 8 --slots 1
          --ctx 32768 --max-tokens 8192)
    python bench/reality.py "${real[@]}" | tee "$OUT/reality.txt"
    python bench/grounding.py "${real[@]}" | tee "$OUT/grounding.txt"
fi
echo "done; figures in $OUT"
