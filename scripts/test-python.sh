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
# CUDA off for the Python build in CI: the C++ build above already compiles the CUDA sources.
CMAKE_ARGS="${CMAKE_ARGS:-} -DLONGATTN_CUDA=OFF" "$VENV/bin/python" -m pip install -q . 
"$VENV/bin/python" -m pytest -q tests/python
