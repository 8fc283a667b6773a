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

# --- torch (CPU) + transformers: the PyTorch, torch.compile, HuggingFace and context-parallel
# tests (test_torch*.py, test_hf*.py, test_distributed.py: gloo process groups). Prefer
# PyTorch's small CPU-only wheel; its index is unreachable where only Debian and PyPI are (CI:
# fails in under a second), so fall back to PyPI's torch (CUDA libraries included, ~3-5 GB
# installed, about a minute); it runs on CPUs. LONGATTN_NO_TORCH=1 skips it (those tests skip).
if [ -z "${LONGATTN_NO_TORCH:-}" ] && ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --timeout 15 --retries 0 torch \
      --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || "$VENV/bin/python" -m pip install -q torch
fi
[ -z "${LONGATTN_NO_TORCH:-}" ] && "$VENV/bin/python" -m pip install -q transformers
# --- end torch + transformers --------------------------------------------------------------
# CUDA off for the Python build in CI: the C++ build above already compiles the CUDA sources.
CMAKE_ARGS="${CMAKE_ARGS:-} -DLONGATTN_CUDA=OFF" "$VENV/bin/python" -m pip install -q . 
HF_HUB_OFFLINE=1 "$VENV/bin/python" -m pytest -q tests/python
