#!/usr/bin/env bash
# The GPU tests' binaries and the benchmark's capi library, built on this machine (nvcc; no
# GPU needed) and packed for the device, whose calls then skip the build:
#   scripts/gpu_bin.sh [OUT.txz]        # default build-bin/bin.txz (ignored; ~11 MB: xz with
#                                       # a dictionary as large as the four binaries, which
#                                       # share their kernels; a device call carries 64 MiB)
# Carry its folder (run's carry ["build-bin", ...]) and run `tests/gpu/run.sh build-bin/bin.txz`.
# Without the Python extension: stages that import longattn (pytest, host, cp) need the
# device's own build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-bin/bin.txz}
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_TOOLS=OFF -DLONGATTN_PYTHON=OFF >/dev/null
cmake --build build-gpu -j"$(nproc)" --target test_gpu_primitives test_gpu_forward longattn_capi host_phases
mkdir -p "$(dirname "$out")"
tar -cf - -C build-gpu/tests/gpu test_gpu_forward test_gpu_primitives -C ../../bench/gpu liblongattn_capi.so host_phases |
  xz -T2 --lzma2=preset=9,dict=192MiB >"$out"
echo "$out: $(du -h "$out" | cut -f1)"
