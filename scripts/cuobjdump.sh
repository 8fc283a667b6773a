#!/usr/bin/env bash
# cuobjdump on this machine (no GPU, no CUDA binary utilities): the `nvidia-cuda-cuobjdump`
# PyPI wheel unpacked once into .cuobjdump/ (ignored), then run with the given arguments.
#   scripts/cuobjdump.sh -sass build/x.o > x.sass    # then bench/gpu/sass_softmax.py x.sass
set -euo pipefail
cd "$(dirname "$0")/.."
D=.cuobjdump
if [ ! -x $D/nvidia/cu13/bin/cuobjdump ]; then
  rm -rf $D && mkdir -p $D/whl
  python3 -m pip download -q --no-deps --only-binary=:all: nvidia-cuda-cuobjdump -d $D/whl
  python3 -m zipfile -e $D/whl/*.whl $D
  chmod +x $D/nvidia/cu13/bin/cuobjdump
fi
cd - >/dev/null
exec "$(dirname "$0")/../$D/nvidia/cu13/bin/cuobjdump" "$@"
