#!/usr/bin/env bash
# The tests: build, run every C++ test (ctest), then the Python package's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
if [ -f pyproject.toml ] && [ -z "${LONGATTN_SKIP_PYTHON:-}" ]; then
  bash scripts/test-python.sh
fi
