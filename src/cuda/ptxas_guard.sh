#!/usr/bin/env bash
# Compiler launcher for the CUDA sources (src/cuda/CMakeLists.txt): runs the compile and fails
# it when ptxas reports that it serialized wgmma ("Potential Performance Loss", C7510-C7518)
# or injected a warpgroup wait (C7517). ptxas prints several of these as "ptxas info" lines,
# which -Werror does not turn into errors, and a serialized kernel still passes check_sass
# when the serialization does not close a group at every GMMA.
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" 2>"$log"
rc=$?
cat "$log" >&2
if [ $rc -eq 0 ] && grep -qE "Potential Performance Loss|\(C751[0-9]\)" "$log"; then
  echo "ptxas_guard: ptxas serialized wgmma or injected a wait (the lines above): fails the build" >&2
  exit 1
fi
exit $rc
