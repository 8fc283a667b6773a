#!/usr/bin/env bash
# GPU test script, run on the device machine from the repo root:
#   tests/gpu/run.sh [BIN_DIR]
# BIN_DIR holds prebuilt test_gpu_primitives, test_gpu_forward and liblongattn_capi.so (built
# elsewhere with -cudart static); without it everything is built here into build-gpu.
# STAGES (env) picks what runs: any of "prim fwd san bench seqbench fbench" (default: all but
# long, the issue-6 long-context rows, ncu, L2 figures of one long call, ncucap, full ncu reports
# of the softcapped hdim-128 feature kernel (NCU_CAP_MODES), seqbench, the back-to-back timing variant of the benchmark, fbench, the issue-5 feature
# rows, pbench, the paged K/V rows alone (pages 3..1024, LONGATTN_TILE_LIST=0,
# LONGATTN_PAGED_VGROUP=1 and LONGATTN_PAGED_MODE=tma/lanes/gather variants, 192/128 head
# dims vs cuDNN), and psan, memcheck and racecheck on small paged cases, gbench, the packed-GQA
# rows, gsan, memcheck and racecheck on small packed-GQA cases, ssan, san's scheduler runs alone). FWD_FILTER (env) narrows the forward tests (a gtest
# filter; 'Huge*' alone: K/V beyond 2^31 elements, ~1 min, ~9 GiB). Logs go to $OUT.
set -u
OUT=${OUT:-/tmp/longattn-gpu}
mkdir -p "$OUT"
STAGES=${STAGES:-"prim fwd san bench"}
BIN=${1:-}
if [ -z "$BIN" ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGATTN_TOOLS=OFF >"$OUT/cmake.log" 2>&1 &&
    cmake --build build-gpu -j16 --target test_gpu_primitives test_gpu_forward longattn_capi >>"$OUT/cmake.log" 2>&1 ||
    { tail -50 "$OUT/cmake.log"; exit 1; }
  BIN=$OUT/bin
  mkdir -p "$BIN"
  cp build-gpu/tests/gpu/test_gpu_primitives build-gpu/tests/gpu/test_gpu_forward build-gpu/bench/gpu/liblongattn_capi.so "$BIN"/
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/device.txt"
declare -A RES
run() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  RES[$name]="rc=$rc $(( $(date +%s) - t0 ))s"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|ERROR SUMMARY|RACECHECK SUMMARY|primitives:" "$OUT/$name.log" | head -20
  return $rc
}
for st in $STAGES; do
  case $st in
    prim) run primitives "$BIN/test_gpu_primitives" ;;
    fwd)
      run forward "$BIN/test_gpu_forward" --gtest_filter="${FWD_FILTER:-*}"
      grep -E "^b[0-9]" "$OUT/forward.log" | sort -u > "$OUT/forward_errors.txt" ;;
    san)
      F='Core/GpuForward.MatchesReference/b2_sq17_sk17_h4x4_d128*:Core/GpuForward.MatchesReference/b1_sq128_sk128*:GpuForwardEmpty.*:GpuCombine.*'
      run memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$F"
      run racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Core/GpuForward.MatchesReference/b2_sq17_sk17_h4x4_d128_causal*'
      # The feature kernel: a window, a chunk, sinks and softcap at once, on small shapes.
      FF='Features/GpuForward.MatchesReference/b2_sq500_sk640*:Features/GpuForward.MatchesReference/b1_sq1000_sk300_h4x2_d128_bf16_outbf16_TL_sinks*:Ragged/GpuForward.MatchesReference/*_s3:Ragged/GpuForward.MatchesReference/*_s11'
      run memcheck_features compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$FF"
      run racecheck_features compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Features/GpuForward.MatchesReference/b2_sq500_sk640*'
      # Issue 6: the dynamic tile ids (shared-memory slot) and the ragged tile-list pre-kernel.
      run memcheck_sched compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      run racecheck_sched compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles' ;;
    ssan)  # the scheduler's sanitizer runs of san alone
      run memcheck_sched compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles'
      run racecheck_sched compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='GpuBatchInvariance.ManySmallTiles' ;;
    bench)
      PYTHONUNBUFFERED=1 run bench python3 bench/gpu/bench.py --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -17 "$OUT/bench.log" ;;
    fbench)
      PYTHONUNBUFFERED=1 run fbench python3 bench/gpu/bench.py --features --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -32 "$OUT/fbench.log" ;;
    psan)
      PF='Paged/GpuPaged.MatchesReference/b3_sq200_sk450_h4x2_d256_page64_s6:Paged/GpuPaged.MatchesReference/b4_sq300_sk600_h4x2_d128_page128_s9:Paged/GpuPaged.MatchesReference/*_page16_s11:Paged/GpuPaged.MatchesReference/*_page3_s14:Paged/GpuPaged.MatchesReference/*_page24_s22:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s51:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s55:PagedMode/GpuPagedMode.MatchesReference/gather_*_s71:PagedMode/GpuPagedMode.MatchesReference/gather_*_s87:PagedMode/GpuPagedMode.MatchesReference/lanes_*_s71:GpuPagedCheck.*'
      run memcheck_paged compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$PF"
      # The consumers' clear of a sequence's last V tile (named barrier + proxy fence).
      run racecheck_paged compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='Paged/GpuPaged.MatchesReference/*_page16_s11:PagedVGroup/GpuPagedVGroup.MatchesReference/*_page16_s51:PagedMode/GpuPagedMode.MatchesReference/gather_*_s71:PagedMode/GpuPagedMode.MatchesReference/gather_*_s84:PagedMode/GpuPagedMode.MatchesReference/lanes_*_s71:Unread/GpuForward.MatchesReference/*_s30' ;;
    gbench)
      # Packed GQA (issue 5): short seq_q x 8k keys, 32/8 heads, packed vs unpacked vs cuDNN.
      PYTHONUNBUFFERED=1 run gbench python3 bench/gpu/bench.py --gqa --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -36 "$OUT/gbench.log" ;;
    gsan)
      # Packed GQA: memcheck / racecheck on small packed cases (packed Q boxes, scattered stores).
      GF='PackGqa/GpuPackGqa.MatchesReference/sq16_*:PackGqa/GpuPackGqa.MatchesReference/*_s205:PackGqa/GpuPackGqa.MatchesReference/*_s207'
      run memcheck_gqa compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter="$GF"
      run racecheck_gqa compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu_forward" --gtest_filter='PackGqa/GpuPackGqa.MatchesReference/*_s201' ;;
    pbench)
      PYTHONUNBUFFERED=1 run pbench python3 bench/gpu/bench.py --paged --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -12 "$OUT/pbench.log" ;;
    long)
      PYTHONUNBUFFERED=1 run long python3 bench/gpu/bench.py --long --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -20 "$OUT/long.log" ;;
    ncu)
      # Issue 6: L2 hit rate and DRAM bytes of one long call, with and without the head sections.
      M=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum
      for c in "" "--causal"; do for sec in "" 0; do
        echo "== ncu seq ${NCU_SEQ:-131072} ${c:-full} LONGATTN_SECTIONS=${sec:-default}" >>"$OUT/ncu.log"
        LONGATTN_SECTIONS=$sec ncu --clock-control none -k regex:fwd_kernel -s 1 -c 1 --metrics $M python3 bench/gpu/once.py \
          --lib "$BIN/liblongattn_capi.so" --seq ${NCU_SEQ:-131072} $c >>"$OUT/ncu.log" 2>&1
      done; done
      grep -E "^== ncu|lts__t_sector_hit_rate|dram__bytes_read|gpu__time_duration" "$OUT/ncu.log" ;;
    ncucap)
      # Issue 5: what limits the softcapped hdim-128 feature kernel (bf16 2 x 8192, 16 heads,
      # cap 30, sinks; the fbench shape). One full report per LONGATTN_SOFTCAP_MODE in
      # NCU_CAP_MODES (default "fixed fixedh"), and "nocap" = the same kernel with sinks only
      # (the plain softmax). Per report: the .ncu-rep, the raw metrics (csv) and a grep of pipe
      # use, issue activity and stall reasons; the per-SASS-line source page where ncu has it.
      for m in ${NCU_CAP_MODES:-nocap fixed fixedh}; do
        cap="--softcap 30"; [ "$m" = nocap ] && cap=""
        LONGATTN_SOFTCAP_MODE=$([ "$m" = nocap ] || echo "$m") ncu --set full --import-source yes -k regex:fwd_kernel \
          -s 1 -c 1 -f -o "$OUT/ncu_cap_$m" python3 bench/gpu/once.py --lib "$BIN/liblongattn_capi.so" \
          --batch 2 --seq 8192 --hq 16 --hk 16 --dim 128 $cap --sinks >"$OUT/ncu_cap_$m.log" 2>&1
        ncu --import "$OUT/ncu_cap_$m.ncu-rep" --page raw --csv >"$OUT/ncu_cap_${m}_raw.csv" 2>&1
        ncu --import "$OUT/ncu_cap_$m.ncu-rep" --page details >"$OUT/ncu_cap_${m}_details.txt" 2>&1
        ncu --import "$OUT/ncu_cap_$m.ncu-rep" --page source --csv --print-source sass \
          >"$OUT/ncu_cap_${m}_sass.csv" 2>/dev/null || true
        echo "== ncucap $m"
        python3 - "$OUT/ncu_cap_${m}_raw.csv" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((r for r in rows if "gpu__time_duration.sum" in r), None)
if hdr is None:
    print(open(sys.argv[1]).read()[:2000]); sys.exit()
val = rows[rows.index(hdr) + 2]
pat = re.compile(r"gpu__time_duration.sum|sm__pipe_.*(cycles_active|inst_executed).*pct_of_peak_sustained_active$|"
                 r"sm__inst_executed_pipe_.*pct_of_peak_sustained_active$|smsp__issue_active.avg.pct|"
                 r"smsp__average_warp_latency_issue_stalled_.*ratio$|smsp__average_warps_issue_stalled_.*_per_issue_active.ratio$|"
                 r"smsp__warps_issue_stalled_.*avg.pct|sm__throughput.avg.pct|l1tex__data_pipe_lsu_wavefronts_mem_shared.*pct|"
                 r"smsp__cycles_active.avg$|sm__cycles_elapsed.avg$|smsp__inst_executed.sum$")
for h, v in zip(hdr, val):
    if pat.search(h):
        try:
            if float(v.replace(",", "")) == 0: continue
        except ValueError:
            pass
        print(f"  {h} = {v}")
PY
      done ;;
    seqbench)
      PYTHONUNBUFFERED=1 run seqbench python3 bench/gpu/bench.py --sequential --lib "$BIN/liblongattn_capi.so" --out "$OUT"
      tail -17 "$OUT/seqbench.log" ;;
  esac
done
echo "== summary =="
for k in "${!RES[@]}"; do echo "$k: ${RES[$k]}"; done
