#!/usr/bin/env bash
# Python package tests: a venv, `pip install .` (CPU backend; CUDA skipped to keep CI short),
# then pytest on NumPy inputs. PyPI must be reachable for nanobind / scikit-build-core / numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || bash scripts/deps.sh
VENV=${PY_VENV:-build/pyvenv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" 2>/dev/null || {
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"; }
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q pytest numpy ml_dtypes
# --- torch (CPU) for the PyTorch and context-parallel tests (test_torch.py,
# test_distributed.py: gloo process groups). The small CPU wheel from PyTorch's own index
# first; where that index is unreachable (CI reaches only PyPI and Debian), PyPI's torch:
# it carries CUDA libraries (~3 GB installed, about a minute) but runs on CPUs.
# LONGATTN_NO_TORCH=1 skips it (those tests then skip).
if [ -z "${LONGATTN_NO_TORCH:-}" ] && ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --retries 0 --timeout 20 torch \
      --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || "$VENV/bin/python" -m pip install -q torch
fi
# --- end torch
# CUDA off for the Python build in CI: the C++ build above already compiles the CUDA sources.
CMAKE_ARGS="${CMAKE_ARGS:-} -DLONGATTN_CUDA=OFF" "$VENV/bin/python" -m pip install -q . 
"$VENV/bin/python" -m pytest -q tests/python
