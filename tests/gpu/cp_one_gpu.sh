#!/usr/bin/env bash
# Context parallelism on one GPU (issue 18), on the device machine from the repo root:
#   tests/gpu/cp_one_gpu.sh [cp_one_gpu.py options]
# Builds longattn's Python extension (CUDA backend) with CMake into build-cp/ and runs
# tests/gpu/cp_one_gpu.py on it with the machine's python3 (the one holding PyTorch); < 2
# minutes of checks after the build. The device cannot fetch packages: where python3 has no
# nanobind, carry its wheel (pure Python) in .whl/, fetched on a machine that reaches PyPI:
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl nanobind
# and name .whl in the call's carry. LONGATTN_CMAKE_ARGS adds CMake options
# (-DLONGATTN_CUDA=OFF with --cpu checks this script on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import nanobind" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/cp-site .whl/nanobind-*.whl
  export PYTHONPATH=/tmp/cp-site${PYTHONPATH:+:$PYTHONPATH}
fi
mkdir -p build-cp
cmake -S . -B build-cp -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_PYTHON=ON -DLONGATTN_TESTS=OFF \
  -DLONGATTN_TOOLS=OFF -DPython_EXECUTABLE="$(command -v "$PY")" \
  -Dnanobind_ROOT="$("$PY" -m nanobind --cmake_dir)" ${LONGATTN_CMAKE_ARGS:-} >build-cp/cmake.log 2>&1 \
  && cmake --build build-cp -j"$(nproc)" --target _longattn >>build-cp/cmake.log 2>&1 \
  || { tail -40 build-cp/cmake.log; exit 1; }
rm -rf build-cp/pkg && mkdir -p build-cp/pkg
cp -r python/longattn build-cp/pkg/
cp build-cp/python/_longattn*.so build-cp/pkg/longattn/
PYTHONPATH=$PWD/build-cp/pkg${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 "$PY" tests/gpu/cp_one_gpu.py "$@"
