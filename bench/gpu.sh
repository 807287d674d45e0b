#!/usr/bin/env bash
# Benchmark 1 and GPU offload on a CUDA machine, in one prepared run.
#
# What it does:
#   1. builds llama-cpp-python (the version this project pins in CI, 0.3.36) with CUDA into
#      a fresh virtual environment, .venv-gpu, with the project and its test extras;
#   2. generates a random-weight GGUF model of about 1.0B parameters (bench/models.py,
#      size "1b": llama architecture, 2048 wide, 20 layers, f16, about 2 GB);
#   3. runs benchmark 1 (bench/streaming.py) with every layer on the GPU on both sides
#      (app and raw llama-cpp-python), then the offload comparison: decode tokens/s with
#      all layers on the GPU against none, alternating, 5 repetitions.
# Logs and figures go to $OUT (or ./gpu-bench-out).
#
# The build needs the CUDA toolkit (nvcc) and a C++ compiler. Without network access,
# point WHEELHOUSE at a folder of wheels and an llama-cpp-python sdist made beforehand
# with `pip download` (the build then uses --no-index). CUDA_ARCH limits the kernels built
# (90 for H100/H200 keeps the build to a few minutes; "native" asks the local GPU).
#
#   bash bench/gpu.sh                      # with network
#   WHEELHOUSE=/path/to/wheels bash bench/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
CUDA_ARCH="${CUDA_ARCH:-native}"
OUT="${OUT:-$PWD/gpu-bench-out}"
LLAMA_VERSION="${LLAMA_VERSION:-0.3.36}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-bench.log") 2>&1

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || {
    echo "no NVIDIA GPU visible (nvidia-smi failed)"; exit 1; }
nproc
command -v nvcc && nvcc --version | tail -1 || echo "nvcc not on PATH: the CUDA build will fail"

echo "== build llama-cpp-python $LLAMA_VERSION with CUDA (arch $CUDA_ARCH)"
"$PYTHON" -m venv .venv-gpu
# shellcheck disable=SC1091
. .venv-gpu/bin/activate
pip_args=(--quiet)
if [ -n "${WHEELHOUSE:-}" ]; then
    pip_args+=(--no-index --find-links "$WHEELHOUSE")
fi
python -m pip install "${pip_args[@]}" --upgrade pip || true
start=$(date +%s)
CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH" FORCE_CMAKE=1 \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    python -m pip install "${pip_args[@]}" --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_VERSION"
echo "built in $(( $(date +%s) - start ))s"
python -m pip install "${pip_args[@]}" -e ".[test]"
python - <<'PY'
import llama_cpp
print("llama-cpp-python", llama_cpp.__version__, "GPU offload:", llama_cpp.llama_supports_gpu_offload())
assert llama_cpp.llama_supports_gpu_offload(), "this build cannot offload to the GPU"
PY

echo "== a ~1B random-weight model"
MODELS="$PWD/.bench-models"
MODEL=$(python - "$MODELS" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "bench")
from models import random_model
print(random_model(Path(sys.argv[1]), size="1b"))
PY
)
ls -l "$MODEL"

export AGENTWORLD_CONFIG_DIR="$OUT/config" AGENTWORLD_DATA_DIR="$OUT/data" HF_HUB_OFFLINE=1

echo "== benchmark 1 on the GPU, then offload against the CPU"
python bench/streaming.py --model-path "$MODEL" --gpu-layers -1 --offload \
    --tokens 256 --reps 5 --ctx 4096 | tee "$OUT/streaming-gpu.txt"
echo "done; figures in $OUT/streaming-gpu.txt"
