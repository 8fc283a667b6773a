#!/usr/bin/env bash
# Python package tests: a venv, `pip install .` (CPU backend; CUDA skipped to keep CI short),
# then pytest on NumPy arrays and CPU torch tensors (torch.compile, HuggingFace transformers).
# PyPI must be reachable for nanobind / scikit-build-core / numpy / torch / transformers.
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

# --- torch (CPU) + transformers: the torch.compile and HuggingFace tests (issue 16) --------
# Prefer PyTorch's CPU-only wheel (small); its index is unreachable where only Debian and PyPI
# are (CI here: fails in under a second), so fall back to PyPI's torch (CUDA libraries
# included: ~5 GB installed, about a minute on this machine). The tests run on CPU tensors.
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --timeout 15 --retries 0 torch \
      --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || "$VENV/bin/python" -m pip install -q torch
fi
"$VENV/bin/python" -m pip install -q transformers
# --- end torch + transformers --------------------------------------------------------------

# CUDA off for the Python build in CI: the C++ build above already compiles the CUDA sources.
CMAKE_ARGS="${CMAKE_ARGS:-} -DLONGATTN_CUDA=OFF" "$VENV/bin/python" -m pip install -q . 
HF_HUB_OFFLINE=1 "$VENV/bin/python" -m pytest -q tests/python
