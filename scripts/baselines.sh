#!/usr/bin/env bash
# Baseline trees for tests/gpu/run.sh's A/B columns: `git archive` of up to three revisions
# into .old, .old2, .old3 (ignored folders; carry them to the device), each with a COMMIT file
# naming it. run.sh builds each one's capi library beside the tree's and adds a `baseline`,
# `baseline2`, `baseline3` column to every dense and fp8 benchmark row.
#   scripts/baselines.sh main exp/some-branch     # .old = main, .old2 = exp/some-branch
#   scripts/baselines.sh                          # removes them
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -le 3 ] || { echo "at most three revisions (.old, .old2, .old3)" >&2; exit 2; }
rm -rf .old .old2 .old3
dirs=(.old .old2 .old3)
i=0
for rev in "$@"; do
  d=${dirs[$i]}
  git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "not a revision: $rev" >&2; exit 2; }
  mkdir "$d"
  # bench/gpu/results (raw outputs, megabytes) is not needed to build and would crowd the
  # device call's 64 MiB carry.
  git archive "$rev" | tar -x -C "$d" --exclude=bench/gpu/results
  echo "$rev $(git log -1 --format='%h %s' "$rev")" >"$d/COMMIT"
  echo "$d: $(cat "$d/COMMIT")"
  i=$((i + 1))
done
