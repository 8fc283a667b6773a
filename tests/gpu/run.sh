#!/usr/bin/env bash
# GPU tests and benchmarks, run on the device machine from the repo root:
#   STAGES="prim fwd san bench" tests/gpu/run.sh [BIN_DIR | BIN.txz]
# BIN_DIR holds prebuilt test_gpu_primitives, test_gpu_forward and liblongattn_capi.so (built
# elsewhere with -cudart static; a _longattn*.so there is used as the Python extension); a
# tarball of them (.txz or .tgz; scripts/gpu_bin.sh builds one on a machine without a GPU:
# carry its folder) is unpacked into $BINDIR first. Without either, everything is built here
# into build-gpu
# (~2 min of the device's time), the Python extension too
# (-DLONGATTN_PYTHON=ON, nanobind), which goes with python/longattn/*.py into $PYPKG/longattn
# on PYTHONPATH (the benchmark's per-call timing through `import longattn`).
#
# STAGES (env), default "prim fwd san bench":
#   prim      test_gpu_primitives
#   fwd       test_gpu_forward (FWD_FILTER: a gtest filter; 'Huge*' alone: K/V beyond 2^31
#             elements, ~1 min, ~9 GiB); the per-case error lines go to forward_errors.txt.
#             The whole suite takes ~600 s on an H200, more than one device call leaves after
#             the build: FWD_SHARD=i/n runs gtest's shard i of n (0-based; e.g. 0/2 in one call,
#             1/2 in the next, with the first call's BIN_DIR); FWD_PAR=n runs all n shards at
#             once (logs forward_0..n-1; the reference's threads share the CPUs)
#   san       memcheck / racecheck on small dense, feature, ragged and scheduler cases
#   ssan      san's scheduler runs alone
#   fsan      memcheck / racecheck on small fp8 cases (the V transposer, the Vt ring, a CTA's tiles)
#   psan      memcheck / racecheck on small paged cases
#   gsan      memcheck / racecheck on small packed-GQA cases
#   ksan      memcheck / racecheck on small kvcache cases (append + rotary pre-kernels, issue 17)
#   bench     bench/gpu/bench.py's headline suite (issue 20's table: FA3, cuDNN, longattn;
#             same-input and rotating-input kernel times, per-call wall times)
#   long      --long (64k..256k, 32/8 heads)        window    --window (windows, chunks)
#   features  --features (sinks, softcap, ragged, split-KV, packed GQA, paged, 192/128, kvcache)
#   kvcache   --features --match kvcache: decode and chunked prefill through the kvcache call
#             (append + rotary) vs attention-only + torch copy + torch rotary (issue 17)
#   dims      --dims (head dims 64..256: the narrow ones on the next compiled kernel, 192/128)
#   fp8       --fp8 (longattn fp8, cuDNN fp8 via .whl's cudnn-frontend, bf16 references)
#   variants  --variants (longattn override columns: sections, dynamic, rescale, ...)
#   pytest    the Python package's GPU tests (pytest -m gpu tests/python)
#   host      bench/gpu/host_phases (the C++ call step by step), host_breakdown.py (the Python
#             layers) and host_overhead.py: host time per call through Python, eager and
#             torch.compile'd, of this tree and each baseline's package (issue 16; needs the
#             Python extension)
#   cpmulti   tests/gpu/cp_multi_gpu.py under torchrun, one rank per GPU of the host (NCCL): every
#             rank's output / LSE vs float64, time per call of both methods vs one GPU (issue 18)
#   cpbreak   bench/gpu/cp_breakdown.py (CPBREAK_ARGS): each rank's in-place cp_world call and
#             the reorder path's calls, time and rate against the one call, and the reorders (issue 18)
#   cp        tests/gpu/cp_one_gpu.py: context parallelism's per-rank kernels, W ranks simulated
#             in one process, split overhead (issue 18; needs the Python extension); CP1_ARGS
#             (env) go to the script (e.g. "--skip ab --heads 32/32")
#   ncutile   ncu --set full of longattn's and FA3's kernels (NCU_SHAPES: once.py flag lists
#             split at '|'; default causal 8 x 2k, 16 heads, hdim 128): both kernels' details in
#             $OUT/ncu_details.txt; both kernels' per-SASS-instruction samples of the first
#             NCU_SOURCES shapes (default 1) in $OUT/ncu_source_{longattn,fa3}_N.csv.gz
#   ncusm     where the SMs idle (issue 20): each kernel's SM active cycles, min / avg / max over
#             the SMs against the elapsed cycles (every SM's value where ncu lists instances), of
#             longattn's and FA3's kernels (NCU_SHAPES as ncutile; default causal 16 x 1k and
#             8 x 2k) in $OUT/ncu_sm.txt: a spread of max over min is the schedule's tail, a low
#             max the launch and exit
#   ctaclock  bench/gpu/cta_clock.py: each CTA's start and end (%globaltimer, the dense kinds'
#             Overrides::cta_clock) against the call's CUPTI time and FA3's, causal 1k / 2k, full
#             1k, causal 4k (CTACLOCK_ARGS; $OUT/cta_clock.txt): the launch and the drain (issue 20);
#             CTACLOCK_ARGS="--dump $OUT/cta.json" keeps each CTA's tiles (bench/gpu/cta_tiles.py)
#   ncufp8    ncu --set full of the fp8 kernel and cuDNN's fp8 kernel (NCU_FP8_SHAPE), details and
#             every warp-stall metric side by side in $OUT/ncu_fp8_stalls.txt, both kernels'
#             per-SASS-instruction samples in $OUT/ncu_fp8_source_{longattn,cudnn}.csv.gz (issue 21)
#             (bench/gpu/ncu_sass.py summarizes these per-SASS exports: opcode mix, execution
#             counts, stall reasons)
#   mufu      bench/gpu/mufu_probe.cu: the exp2 pass's rate per warp on one SM sub-partition, with
#             the softmax's FFMA / FADD / pack around it, 1-3 warps per sub-partition ($OUT/mufu.txt)
#   ncu       L2 hit rate and DRAM bytes of one long call (NCU_SEQ keys, default 131072),
#             shipped rules and overrides sections=0
# STAGE_TIMEOUT (env, seconds, default 420): the limit of each stage's command (a hang ends
# that stage with rc 124 and the next stage runs).
# BENCH_ARGS (env) are added to every benchmark stage, split at spaces (e.g. "--dtype f16",
# "--quick", "--rounds 5", "--match d128.b16", with features "--match paged" for the paged
# rows alone, "--match GQA", "--match ragged"). FA3 is a column when .fa3/libdew_flash_attn3.so exists
# (carry .fa3); cuDNN fp8 when .whl/*.whl hold nvidia-cudnn-frontend (carry .whl).
#
# What comes back in $OUT (at most 8 files): summary.txt (device, stage results, key lines),
# logs.txt (every stage's output, appended as it runs), forward_errors.txt, bench.json (every
# benchmark number, one key per suite) and tables.md (the benchmark's tables). Per-stage logs
# stay in $LOGS; binaries in $BINDIR.
set -u
OUT=${OUT:-/tmp/longattn-gpu}
LOGS=${LOGS:-/tmp/longattn-logs}
BINDIR=${BINDIR:-/tmp/longattn-bin}
PYPKG=${PYPKG:-/tmp/longattn-pypkg}
mkdir -p "$OUT" "$LOGS"
STAGES=${STAGES:-"prim fwd san bench"}
BENCH_ARGS=${BENCH_ARGS:-}
BIN=${1:-}
if [ -n "$BIN" ] && [ -f "$BIN" ]; then  # a tarball of the binaries (scripts/gpu_bin.sh)
  mkdir -p "$BINDIR" && tar -xf "$BIN" -C "$BINDIR" || { echo "cannot unpack $BIN" >&2; exit 1; }
  BIN=$BINDIR
fi
SUM=$OUT/summary.txt
LOG=$OUT/logs.txt
export PYTHONUNBUFFERED=1
say() { echo "$*" | tee -a "$SUM"; }

# Carried wheels (nvidia-cudnn-frontend for the fp8 suite): installed beside, not into, the image.
if ls .whl/*.whl >/dev/null 2>&1; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl >"$LOGS/pip.log" 2>&1; then
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  else
    say "wheels: pip install failed: $(tail -1 "$LOGS/pip.log")"
  fi
fi

# Baselines for A/B: earlier (or variant) trees in .old/, .old2/, .old3/ (git archives, carried;
# scripts/baselines.sh REV... makes them)
# build their own capi libraries, in the background beside the main build (one tree's kernel
# units do not fill 16 cores); every dense benchmark row then has a 'baseline' column (then
# 'baseline2', ...) interleaved with longattn.
OLDS=""
for OLD in .old .old2 .old3; do
  [ -f $OLD/CMakeLists.txt ] || continue
  OLDS="$OLDS $OLD"
  # With the host stage, the baseline's Python extension too (host time A/B, interleaved).
  PYOPT=(-DLONGATTN_PYTHON=OFF); TGT=(longattn_capi)
  case " $STAGES " in *" host "*) PYOPT=(-DLONGATTN_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)"); TGT+=(_longattn) ;; esac
  (cmake -S $OLD -B build$OLD -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_TOOLS=OFF "${PYOPT[@]}" &&
     cmake --build build$OLD -j16 --target "${TGT[@]}") >"$LOGS/cmake$OLD.log" 2>&1 &
done

if [ -z "$BIN" ]; then
  CM=(-S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_TOOLS=OFF)
  if ! cmake "${CM[@]}" -DLONGATTN_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" >"$LOGS/cmake.log" 2>&1; then
    say "configure with the Python extension failed ($(grep -m1 -i error "$LOGS/cmake.log")); configuring without it"
    cmake "${CM[@]}" -DLONGATTN_PYTHON=OFF >>"$LOGS/cmake.log" 2>&1 || { tail -50 "$LOGS/cmake.log"; cp "$LOGS/cmake.log" "$OUT/"; exit 1; }
  fi
  cmake --build build-gpu -j16 --target test_gpu_primitives test_gpu_forward longattn_capi host_phases >>"$LOGS/cmake.log" 2>&1 ||
    { tail -50 "$LOGS/cmake.log"; cp "$LOGS/cmake.log" "$OUT/"; exit 1; }
  if grep -q "^LONGATTN_PYTHON:BOOL=ON" build-gpu/CMakeCache.txt; then
    cmake --build build-gpu -j16 --target _longattn >>"$LOGS/cmake.log" 2>&1 ||
      say "python extension build failed: $(grep -m1 -E 'error|FAILED' "$LOGS/cmake.log")"
  fi
  BIN=$BINDIR
  mkdir -p "$BIN"
  cp build-gpu/tests/gpu/test_gpu_primitives build-gpu/tests/gpu/test_gpu_forward build-gpu/bench/gpu/liblongattn_capi.so \
    build-gpu/bench/gpu/host_phases "$BIN"/
  EXT=$(find build-gpu -name '_longattn*.so' 2>/dev/null | head -1)
else
  EXT=$(ls "$BIN"/_longattn*.so 2>/dev/null | head -1)
fi
if [ -n "$EXT" ]; then
  rm -rf "$PYPKG" && mkdir -p "$PYPKG" && cp -r python/longattn "$PYPKG/" && cp "$EXT" "$PYPKG/longattn/" &&
    export PYTHONPATH=$PYPKG${PYTHONPATH:+:$PYTHONPATH}
else
  say "no Python extension: the benchmark's 'longattn (py)' column is n/a"
fi
FA3ARG=""
[ -f .fa3/libdew_flash_attn3.so ] && FA3ARG="--fa3 .fa3"
# The baselines' builds (started above, in the background) have finished: their libraries.
wait
for OLD in $OLDS; do
  if [ -f build$OLD/bench/gpu/liblongattn_capi.so ] && ! grep -q "FAILED" "$LOGS/cmake$OLD.log"; then
    FA3ARG="$FA3ARG --baseline build$OLD/bench/gpu/liblongattn_capi.so"
    say "baseline: $OLD ($(cat $OLD/COMMIT 2>/dev/null))"
  else
    say "baseline $OLD build failed: $(grep -m1 -E 'error|FAILED' "$LOGS/cmake$OLD.log")"
  fi
done
[ -z "$FA3ARG" ] && say "no .fa3/libdew_flash_attn3.so: FA3 columns are n/a (carry .fa3)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee -a "$SUM"

declare -A RES
run() {  # name, command...: output to $LOGS/name.log and appended to $OUT/logs.txt as it runs
  local name=$1; shift
  local t0
  t0=$(date +%s)
  echo "===== $name: $* =====" >>"$LOG"
  # A hung kernel must not take the rest of the call with it: each stage gets STAGE_TIMEOUT
  # seconds (rc 124 = timed out; the stages after it still run).
  timeout -k 10 "${STAGE_TIMEOUT:-420}" "$@" 2>&1 | tee "$LOGS/$name.log" >>"$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "$name: TIMED OUT after ${STAGE_TIMEOUT:-420} s (a hang?)" | tee -a "$SUM" >>"$LOG"
  RES[$name]="rc=$rc $(( $(date +%s) - t0 ))s"
  echo "===== $name: ${RES[$name]} =====" >>"$LOG"
  echo "$name: ${RES[$name]}" >>"$SUM"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|ERROR SUMMARY|RACECHECK SUMMARY|primitives:" "$LOGS/$name.log" | head -20 | tee -a "$SUM"
  return $rc
}
bench() {  # stage name, bench.py suite flags...: tables to stdout, numbers to $OUT/bench.json
  local name=$1; shift
  # shellcheck disable=SC2086  # FA3ARG and BENCH_ARGS are word lists
  run "$name" python3 bench/gpu/bench.py --lib "$BIN/liblongattn_capi.so" $FA3ARG --out "$OUT" "$@" $BENCH_ARGS
  grep -E "row failed|Traceback|Error" "$LOGS/$name.log" | head -10 | tee -a "$SUM"
  sed -n '/^## /,$p' "$LOGS/$name.log"
}
# ncu's kernel filter (K) and once.py's extra flags (X) for longattn's kernel or FA3's.
who_args() {
  if [ "$1" = fa3 ]; then K=regex:FlashAttn; X="--fa3 .fa3"; else K=regex:fwd_kernel; X=""; fi
}
# The hdim-256 section list's sanitizer cases (san, ssan): bf16 forced and by rule, fp8.
SL='SectionList/GpuForward.MatchesReference/b2_sq1500_sk1700_h8x2_d256_causal_*:SectionList/GpuForward.MatchesReference/b1_sq3000_sk3000_h12x4_d256_causalTL_*:GpuFp8SectionList.*'
for st in $STAGES; do
  case $st in
    prim) run primitives "$BIN/test_gpu_primitives" ;;
    fwd)
      if [ -z "${FWD_SHARD:-}" ] && [ "${FWD_PAR:-1}" -gt 1 ]; then  # every shard at once
        say "forward: $FWD_PAR gtest shards at once"
        rm -f "$LOGS"/forward_*.log  # a warm machine may keep an earlier call's shards
        for i in $(seq 0 $((FWD_PAR - 1))); do
          GTEST_SHARD_INDEX=$i GTEST_TOTAL_SHARDS=$FWD_PAR run "forward_$i" "$BIN/test_gpu_forward" --gtest_filter="${FWD_FILTER:-*}" &
        done
        wait
        cat "$LOGS"/forward_*.log >"$LOGS/forward.log"
      else
        if [ -n "${FWD_SHARD:-}" ]; then  # i/n: gtest's own sharding (deterministic by test order)
          export GTEST_SHARD_INDEX=${FWD_SHARD%/*} GTEST_TOTAL_SHARDS=${FWD_SHARD#*/}
          say "forward: shard $GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS"
        fi
        run forward "$BIN/test_gpu_forward" --gtest_filter="${FWD_FILTER:-*}"
        unset GTEST_SHARD_INDEX GTEST_TOTAL_SHARDS
      fi
      grep -E "^b[0-9]" "$LOGS/forward.log" | sort -u > "$OUT/forward_errors.txt" ;;
    san)
      F='Core/GpuForward.MatchesReference/b2_sq17_sk17_h4x4_d128*:Core/GpuForward.MatchesReference/b1_sq128_sk128*:GpuForwardEmpty.*:GpuCombine.*'
      run memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$F"
      run racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Core/GpuForward.MatchesReference/b2_sq17_sk17_h4x4_d128_causal*'
      # The feature kernel: a window, a chunk, sinks and softcap at once, on small shapes; ragged
      # seqused_q with a chunk and a window.
      FF='Features/GpuForward.MatchesReference/b2_sq500_sk640*:Features/GpuForward.MatchesReference/b1_sq1000_sk300_h4x2_d128_bf16_outbf16_TL_sinks*:Ragged/GpuForward.MatchesReference/*_s3:Ragged/GpuForward.MatchesReference/*_s11:SeqUsedQ/GpuForward.MatchesReference/*_s65'
      run memcheck_features compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$FF"
      run racecheck_features compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Features/GpuForward.MatchesReference/b2_sq500_sk640*'
      # Issue 6: the dynamic tile ids (shared-memory slot) and the ragged tile-list pre-kernel.
      run memcheck_sched compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      run racecheck_sched compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      # The hdim-256 section list: its pre-kernel's writes and the roles' list reads (global
      # memory; the kernel's shared-memory use is the dense kind's).
      run memcheck_slist compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$SL" ;;
    fsan)  # fp8: the V transposer's shared-memory writes (generic proxy) read by wgmma, the Vt ring
      F8='Fp8/GpuFp8.MatchesReference/b2_sq300_sk300_h4x4_s1:Fp8/GpuFp8.MatchesReference/b4_sq400_sk600_h4x2_s12:Fp8/GpuFp8.MatchesReference/*_s36:Fp8/GpuFp8.MatchesReference/*_s38:Fp8/GpuFp8.MatchesReference/*_s52'
      run memcheck_fp8 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$F8"
      run racecheck_fp8 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Fp8/GpuFp8.MatchesReference/b2_sq300_sk300_h4x4_s1:Fp8/GpuFp8.MatchesReference/b4_sq400_sk600_h4x2_s12:Fp8/GpuFp8.MatchesReference/*_s52' ;;
    ssan)  # the scheduler's sanitizer runs of san alone
      run memcheck_sched compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      run racecheck_sched compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      run memcheck_slist compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$SL" ;;
    psan)
      PF='Paged/GpuPaged.MatchesReference/b3_sq200_sk450_h4x2_d256_page64_s6:Paged/GpuPaged.MatchesReference/b4_sq300_sk600_h4x2_d128_page128_s9:Paged/GpuPaged.MatchesReference/*_page16_s11:Paged/GpuPaged.MatchesReference/*_page3_s14:Paged/GpuPaged.MatchesReference/*_page24_s22:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s51:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s55:PagedMode/GpuPagedMode.MatchesReference/gather_*_s71:PagedMode/GpuPagedMode.MatchesReference/gather_*_s87:PagedMode/GpuPagedMode.MatchesReference/lanes_*_s71:GpuPagedCheck.*:Paged/GpuPaged.MatchesReference/*_s73:Paged/GpuPaged.MatchesReference/*_s74:Paged/GpuPaged.MatchesReference/*_s76'
      run memcheck_paged compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$PF"
      # The consumers' clear of a sequence's last V tile (named barrier + proxy fence).
      run racecheck_paged compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Paged/GpuPaged.MatchesReference/*_page16_s11:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s51:PagedMode/GpuPagedMode.MatchesReference/gather_*_s71:PagedMode/GpuPagedMode.MatchesReference/gather_*_s84:PagedMode/GpuPagedMode.MatchesReference/lanes_*_s71:Unread/GpuForward.MatchesReference/*_s30' ;;
    gsan)
      # Packed GQA: memcheck / racecheck on small packed cases (packed Q boxes, scattered stores).
      GF='PackGqa/GpuPackGqa.MatchesReference/sq16_*:PackGqa/GpuPackGqa.MatchesReference/*_s205:PackGqa/GpuPackGqa.MatchesReference/*_s207'
      run memcheck_gqa compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$GF"
      run racecheck_gqa compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='PackGqa/GpuPackGqa.MatchesReference/*_s201' ;;
    ksan)
      # Issue 17: the kvcache pre-kernels (metadata check, append + rotary, page-table gather).
      KF='GpuKvcache.DecodeDenseAndPaged:GpuKvcache.PagedDimsOnDenseCopies:GpuKvcache.RaggedNewKeysAndQueries:GpuKvcache.CacheBatchIdxDenseAndPaged:GpuKvcache.CacheLeftpadDense:GpuKvcache.BadDeviceMetadataWritesNothing:GpuKvcache.ReportsEachDeviceCheck'
      run memcheck_kv compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$KF"
      run racecheck_kv compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuKvcache.DecodeDenseAndPaged:GpuKvcache.BadDeviceMetadataWritesNothing' ;;
    bench) bench bench --headline ;;
    long) bench long --long ;;
    window) bench window --window ;;
    features) bench features --features ;;
    kvcache) bench kvcache --features --match kvcache ;;
    fp8) bench fp8 --fp8 ;;
    mufu)
      run mufu_build nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/gpu/mufu_probe.cu -o "$LOGS/mufu_probe" &&
        run mufu "$LOGS/mufu_probe" && cp "$LOGS/mufu.log" "$OUT/mufu.txt" ;;
    dims) bench dims --dims ;;
    variants) bench variants --variants ;;
    pytest)  # the Python package's GPU tests (torch tensors on the device) through $PYPKG
      run pytest python3 -m pytest -q -m gpu tests/python -p no:cacheprovider
      tail -5 "$LOGS/pytest.log" | tee -a "$SUM" ;;
    host)
      # The C++ call step by step, the Python layers, then host time per call of this tree and
      # of each baseline's Python package (built above): eager, alternating fresh processes,
      # HOST_ROUNDS (env, default 8) rounds, medians (HOST_AB_ARGS: e.g. --compiled); then this
      # tree's eager and compiled rows.
      [ -x "$BIN/host_phases" ] && run host_phases "$BIN/host_phases"
      run host_breakdown python3 bench/gpu/host_breakdown.py
      PKGS="$PYPKG"
      for OLD in $OLDS; do
        X=$(find build$OLD -name '_longattn*.so' 2>/dev/null | head -1)
        [ -n "$X" ] || continue
        rm -rf "$PYPKG$OLD" && mkdir -p "$PYPKG$OLD" && cp -r $OLD/python/longattn "$PYPKG$OLD/" && cp "$X" "$PYPKG$OLD/longattn/"
        PKGS="$PKGS $PYPKG$OLD"
      done
      # shellcheck disable=SC2086  # PKGS is a list
      run host_ab python3 bench/gpu/host_overhead.py --ab $PKGS --rounds "${HOST_ROUNDS:-8}" ${HOST_AB_ARGS:-}
      grep "^|" "$LOGS/host_ab.log" | tee -a "$SUM"
      run host_overhead python3 bench/gpu/host_overhead.py
      grep "^|" "$LOGS/host_overhead.log" | tee -a "$SUM" ;;
    cpbreak)
      run cp_breakdown python3 bench/gpu/cp_breakdown.py ${CPBREAK_ARGS:-}
      grep -E "^W =|^calls|^a rank|^in place|^device" "$LOGS/cp_breakdown.log" | tee -a "$SUM" ;;
    cp)
      run cp_one_gpu python3 tests/gpu/cp_one_gpu.py ${CP1_ARGS:-}
      grep -E "FAIL|^\(c\)|overhead|passed|failed" "$LOGS/cp_one_gpu.log" | head -20 | tee -a "$SUM" ;;
    cpmulti)
      # every GPU of the host, one rank each (NCCL); CP_ARGS (env) go to the script
      run cp_multi_gpu torchrun --nproc-per-node "$(nvidia-smi -L | wc -l)" tests/gpu/cp_multi_gpu.py ${CP_ARGS:-}
      grep -E "^W=|FAIL|^\| [0-9]|passed|FAILED" "$LOGS/cp_multi_gpu.log" | head -40 | tee -a "$SUM" ;;
    ncutile)
      # NCU_SHAPES: once.py flag lists separated by '|'; the source samples are the first shape's.
      : >"$LOGS/ncutile.log"
      n=0
      IFS='|' read -ra SHS <<<"${NCU_SHAPES:-"--batch 8 --seq 2048 --hq 16 --hk 16 --dim 128 --causal"}"
      for SH in "${SHS[@]}"; do
        n=$((n + 1))
        for who in longattn fa3; do
          who_args $who
          # shellcheck disable=SC2086  # SH is a flag list
          ncu --set full --import-source no --kernel-name-base demangled -k $K -s 1 -c 1 -f -o "$LOGS/ncu_${who}_$n" \
            python3 bench/gpu/once.py --lib "$BIN/liblongattn_capi.so" $SH $X >>"$LOGS/ncutile.log" 2>&1
          { echo "== $who: $SH"; ncu -i "$LOGS/ncu_${who}_$n.ncu-rep" --page details; } >>"$OUT/ncu_details.txt" 2>&1
          [ $n -le "${NCU_SOURCES:-1}" ] &&
            ncu -i "$LOGS/ncu_${who}_$n.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/ncu_source_${who}_$n.csv.gz"
        done
      done
      tail -20 "$LOGS/ncutile.log" >>"$LOG"
      grep -E "^==|Duration|Registers Per|Executed Ipc A|Issue Slots Busy" "$OUT/ncu_details.txt" | tee -a "$SUM" ;;
    ncusm)
      : >"$OUT/ncu_sm.txt"
      IFS='|' read -ra SHS <<<"${NCU_SHAPES:-"--batch 16 --seq 1024 --hq 16 --hk 16 --dim 128 --causal|--batch 8 --seq 2048 --hq 16 --hk 16 --dim 128 --causal"}"
      M=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max
      for SH in "${SHS[@]}"; do
        for who in longattn fa3; do
          who_args $who
          echo "== $who: $SH" >>"$OUT/ncu_sm.txt"
          # shellcheck disable=SC2086  # SH is a flag list
          timeout -k 10 "${STAGE_TIMEOUT:-420}" ncu --metrics "$M" --print-metric-instances values --kernel-name-base demangled -k $K -s 1 -c 1 \
            python3 bench/gpu/once.py --lib "$BIN/liblongattn_capi.so" $SH $X 2>&1 | grep -E "gpu__|sm__|==PROF==|rror" >>"$OUT/ncu_sm.txt"
        done
      done
      cat "$OUT/ncu_sm.txt" >>"$LOG"
      grep -E "^==|sm__cycles_active|gpu__time" "$OUT/ncu_sm.txt" | cut -c1-160 | tee -a "$SUM" ;;
    ctaclock)
      # Issue 20: each CTA's start and end from %globaltimer against the call's CUPTI time, and
      # FA3's time on the same inputs (bench/gpu/cta_clock.py; CTACLOCK_ARGS, e.g. --shapes).
      # shellcheck disable=SC2086  # CTACLOCK_ARGS is a flag list
      timeout -k 10 "${STAGE_TIMEOUT:-420}" python3 bench/gpu/cta_clock.py --lib "$BIN/liblongattn_capi.so" \
        $([ -f .fa3/libdew_flash_attn3.so ] && echo "--fa3 .fa3") ${CTACLOCK_ARGS:-} >"$OUT/cta_clock.txt" 2>&1
      cat "$OUT/cta_clock.txt" | tee -a "$SUM" >>"$LOG" ;;
    ncufp8)
      # Issue 21: the fp8 kernel and cuDNN's fp8 SDPA kernel, ncu --set full each, on one shape
      # (NCU_FP8_SHAPE: once.py flags; default 4 x 4k, 16 heads, hdim 128, full): details, and
      # every warp-stall metric of both side by side ($OUT/ncu_fp8_stalls.txt).
      SH=${NCU_FP8_SHAPE:-"--batch 4 --seq 4096 --hq 16 --hk 16 --dim 128"}
      : >"$LOGS/ncufp8.log"
      for who in longattn cudnn; do
        if [ $who = cudnn ]; then K='regex:cudnn|sdpa|fmha|fprop|flash|attn'; X="--cudnn"; else K=regex:fwd_kernel; X=""; fi
        # shellcheck disable=SC2086  # SH is a flag list
        ncu --set full --import-source no --kernel-name-base demangled -k "$K" -s 1 -c 1 -f -o "$LOGS/ncu8_$who" \
          python3 bench/gpu/once.py --lib "$BIN/liblongattn_capi.so" $SH --fp8 $X >>"$LOGS/ncufp8.log" 2>&1
        { echo "== $who: $SH --fp8"; ncu -i "$LOGS/ncu8_$who.ncu-rep" --page details; } >>"$OUT/ncu_fp8_details.txt" 2>&1
        ncu -i "$LOGS/ncu8_$who.ncu-rep" --page raw --csv >"$LOGS/ncu8_${who}_raw.csv" 2>&1
      done
      python3 - "$LOGS/ncu8_longattn_raw.csv" "$LOGS/ncu8_cudnn_raw.csv" >"$OUT/ncu_fp8_stalls.txt" 2>&1 <<'PY'
import csv, sys
rows = []
for path in sys.argv[1:]:
    with open(path) as f:
        r = [x for x in csv.reader(f) if x]
    hdr = next(i for i, x in enumerate(r) if "Kernel Name" in x)
    rows.append(dict(zip(r[hdr], r[hdr + 2] if len(r) > hdr + 2 else r[hdr + 1])))
keys = [k for k in rows[0] if "stall" in k or k in ("Kernel Name", "gpu__time_duration.sum", "sm__inst_executed.sum",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")]
print("metric | longattn | cuDNN")
for k in keys:
    print(f"{k} | {rows[0].get(k, '')} | {rows[1].get(k, '') if len(rows) > 1 else ''}")
PY
      for who in longattn cudnn; do
        ncu -i "$LOGS/ncu8_$who.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/ncu_fp8_source_$who.csv.gz"
      done
      tail -20 "$LOGS/ncufp8.log" >>"$LOG"
      grep -E "^==|Duration|Registers Per|Executed Ipc A|Issue Slots Busy" "$OUT/ncu_fp8_details.txt" | tee -a "$SUM" ;;
    ncu)
      # Issue 6: L2 hit rate and DRAM bytes of one long call, the shipped rules and one L2 section.
      M=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum
      : >"$LOGS/ncu.log"
      for c in "" "--causal"; do for ov in "" "sections=0"; do
        echo "== ncu seq ${NCU_SEQ:-131072} ${c:-full} overrides '${ov:-rules}'" >>"$LOGS/ncu.log"
        ncu --clock-control none -k regex:fwd_kernel -s 1 -c 1 --metrics $M python3 bench/gpu/once.py \
          --lib "$BIN/liblongattn_capi.so" --seq "${NCU_SEQ:-131072}" $c --overrides "$ov" >>"$LOGS/ncu.log" 2>&1
      done; done
      { echo "===== ncu ====="; cat "$LOGS/ncu.log"; } >>"$LOG"
      grep -E "^== ncu|lts__t_sector_hit_rate|dram__bytes_read|gpu__time_duration|once:" "$LOGS/ncu.log" | tee -a "$SUM" ;;
    *) say "unknown stage '$st' (removed: ncucap, seqbench, fbench, gbench, pbench -> features)" ;;
  esac
done
echo "== summary =="
for k in "${!RES[@]}"; do echo "$k: ${RES[$k]}"; done
