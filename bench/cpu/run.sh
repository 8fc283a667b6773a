#!/usr/bin/env bash
# longattn CPU benchmark: fp32 FMA peak of this machine, then longattn CPU vs PyTorch CPU
# scaled_dot_product_attention on the same shapes (bf16/f32, head dim 64/128, seq 1k-8k,
# causal and not), one table. Nothing here runs in CI.
#
#   bench/cpu/run.sh [compare.py options, e.g. --threads 2 --seqs 2048]
#
# BUILD (default build-bench-cpu) is a Release CPU-only build of the library; VENV (default
# /tmp/benchvenv) is created with torch from PyPI on first use (a few GB, once).
# Run it alone: other processes on the cores lower (and blur) every number. On a shared
# machine, save several runs and merge them with bench/cpu/merge_runs.py (best per shape).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench-cpu}"
VENV="${VENV:-/tmp/benchvenv}"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_CUDA=OFF \
  -DLONGATTN_TESTS=OFF -DLONGATTN_TOOLS=OFF -DLONGATTN_PYTHON=OFF > /dev/null
cmake --build "$BUILD" -j2 --target longattn > /dev/null
# The driver is built outside CMake (bench/ is not part of the shipped build); its
# ISA-specific loops use function target attributes, so no -m flags here.
"${CXX:-g++}" -O2 -std=c++20 -I"$ROOT/include" "$ROOT/bench/cpu/cpu_bench.cpp" \
  "$BUILD/src/liblongattn.a" -lpthread -o "$BUILD/cpu_bench"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch
fi
exec "$VENV/bin/python" "$ROOT/bench/cpu/compare.py" --bench "$BUILD/cpu_bench" "$@"
