#!/usr/bin/env bash
# cuobjdump on this machine (no GPU, no CUDA binary utilities): the `nvidia-cuda-cuobjdump` and
# `nvidia-cuda-nvdisasm` PyPI wheels (-sass needs nvdisasm) unpacked once into .cuobjdump/
# (ignored), then cuobjdump run with the given arguments.
#   scripts/cuobjdump.sh -sass build/x.o > x.sass    # then bench/gpu/sass_softmax.py x.sass
set -euo pipefail
cd "$(dirname "$0")/.."
D=.cuobjdump
if [ ! -x $D/nvidia/cu13/bin/cuobjdump ]; then
  rm -rf $D && mkdir -p $D/whl
  python3 -m pip download -q --no-deps --only-binary=:all: nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d $D/whl
  for w in $D/whl/*.whl; do python3 -m zipfile -e "$w" $D; done
  chmod +x $D/nvidia/cu13/bin/cuobjdump $D/nvidia/cu13/bin/nvdisasm
fi
B=$PWD/$D/nvidia/cu13/bin
cd - >/dev/null
NVDISASM_PATH=$B exec "$B/cuobjdump" "$@"
