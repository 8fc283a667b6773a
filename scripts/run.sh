#!/usr/bin/env bash
# The main job: build, then `longattn run` (GPU when one is present, else CPU).
# Extra arguments go to `longattn run`, e.g. scripts/run.sh --seq 8192 --no-causal
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >&2
exec "${BUILD_DIR:-build}/tools/longattn" run "$@"
