# ctest cases that run the `longattn` binary (fast: small shapes, seconds in total).
# Each case runs tools/cli_test.cmake, which checks the exit code and the output text.
set(_cli $<TARGET_FILE:longattn_cli>)
set(_driver ${CMAKE_CURRENT_SOURCE_DIR}/cli_test.cmake)
set(_work ${CMAKE_CURRENT_BINARY_DIR}/cli_test_work)

# cli_case(NAME EXIT CODE EXPECT REGEX ARGS ...): run `longattn ARGS`, require exit CODE and
# REGEX in stdout+stderr.
function(cli_case name code regex)
  # Arguments travel as one '|'-joined string: a ';' list would not survive add_test.
  string(JOIN "|" _args ${ARGN})
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} -DCLI=${_cli} -DEXPECT_CODE=${code} "-DEXPECT_REGEX=${regex}"
                   "-DARGS=${_args}" -P ${_driver})
endfunction()

set(_small --seq 77 --heads-q 4 --heads-kv 2 --dim 64 --repeat 1 --warmup 0 --check-rows 48)

# A small run on each host backend passes its own reference check.
cli_case(run_cpu 0 "check: .* PASS" run ${_small} --backend cpu)
cli_case(run_reference 0 "check: .* PASS" run ${_small} --backend reference)
# Every feature, through the CPU backend, checked against the reference.
cli_case(feat_gqa_noncausal 0 "PASS" run ${_small} --backend cpu --no-causal --heads-q 6 --heads-kv 1)
cli_case(feat_cross_seq 0 "PASS" run ${_small} --backend cpu --seq-q 33 --seq-k 90)
cli_case(feat_top_left 0 "PASS" run ${_small} --backend cpu --seq-q 90 --seq-k 33 --top-left --lse)
cli_case(feat_window 0 "PASS" run ${_small} --backend cpu --window 13,5 --no-causal)
cli_case(feat_chunk 0 "PASS" run ${_small} --backend cpu --chunk 16)
cli_case(feat_softcap_scale 0 "PASS" run ${_small} --backend cpu --softcap 5 --scale 0.3)
cli_case(feat_sinks_lse 0 "PASS" run ${_small} --backend cpu --sinks --lse)
cli_case(feat_sinks_empty_rows 0 "PASS" run ${_small} --backend cpu --seq-q 90 --seq-k 33 --sinks --lse --check-rows 120)
cli_case(feat_ragged 0 "PASS" run ${_small} --backend cpu --ragged 5,0,40:60,17:3 --lse)
cli_case(feat_paged 0 "PASS" run ${_small} --backend cpu --page-size 16 --batch 3)
cli_case(feat_paged_ragged 0 "PASS" run ${_small} --backend cpu --page-size 8 --ragged 9:30,21:21)
cli_case(feat_dim_v 0 "PASS" run ${_small} --backend cpu --dim-v 32)
cli_case(feat_f16_f32out 0 "f16->f32.*PASS" run ${_small} --backend cpu --dtype f16 --out-dtype f32)
cli_case(feat_f32 0 "PASS" run ${_small} --backend cpu --dtype f32)
cli_case(feat_e4m3 0 "e4m3->bf16.*PASS" run ${_small} --backend cpu --dtype e4m3)
# Args::cpu_isa through --cpu-isa (portable runs on every CPU).
cli_case(cpu_isa_portable 0 "backend: cpu \\([0-9]+ threads, portable\\).*PASS" run ${_small} --backend cpu --cpu-isa portable --dtype f32)
# The check can fail: a damaged output must be caught (exit 1).
cli_case(check_catches_error 1 "FAIL" run ${_small} --backend cpu --corrupt value)
cli_case(check_catches_nan 1 "1 output elements are NaN" run ${_small} --backend cpu --corrupt nan)
cli_case(run_json 0 "^\\{\"command\": \"run\".*\"pass\": true" run ${_small} --backend cpu --json)
cli_case(bench_small 0 "TFLOP/s" bench --seqs 64,96 --heads-q 2 --heads-kv 1 --dim 32 --repeat 1 --backends cpu,reference --check)

# Bad command lines: one line on stderr, exit 2.
cli_case(bad_unknown_option 2 "^longattn: unknown option --foo\n$" run --foo)
cli_case(bad_heads 2 "^longattn: --heads-kv: 6 does not divide 32 query heads\n$" run --heads-kv 6)
cli_case(bad_number 2 "^longattn: --seq: expected an integer, got 'abc'\n$" run --seq abc)
cli_case(bad_dtype 2 "--dtype: unknown dtype 'f64'" run --dtype f64)
cli_case(bad_missing_value 2 "--batch: missing value" run --batch)
cli_case(bad_cpu_isa 2 "^longattn: --cpu-isa: unknown CPU instruction set 'sse'" run --cpu-isa sse)
cli_case(bad_command 2 "unknown command 'walk'" walk)
cli_case(bad_file 2 "--q: .*cannot open" run --q /nonexistent/q.npy --k x --v y)
# Rejected by longattn::validate: its message, exit 2.
cli_case(bad_validate_dim 2 "^longattn: [^\n]*dim[^\n]*\n$" run --seq 8 --heads-q 2 --heads-kv 1 --dim 1000 --backend cpu)
cli_case(bad_validate_window_chunk 2 "^longattn: [^\n]*\n$" run --seq 8 --heads-q 2 --heads-kv 1 --dim 32 --window 2,2 --chunk 4 --backend cpu)
if(NOT LONGATTN_WITH_CUDA)
  cli_case(bad_no_cuda 2 "^longattn: --backend cuda: this longattn was built without the CUDA backend\n$" run --backend cuda)
endif()
cli_case(help 0 "usage: longattn run" --help)

# .npy round trip: dump random inputs, rerun on the files, outputs must be byte-identical.
add_test(NAME cli.npy_round_trip
         COMMAND ${CMAKE_COMMAND} -DCLI=${_cli} -DWORK=${_work} -P
                 ${CMAKE_CURRENT_SOURCE_DIR}/cli_round_trip.cmake)

# The CUDA backend through the CLI, checked against the reference (label "gpu"). A build
# with CUDA but no sm_90 device (CI), or a feature the backend reports as "not supported
# ... yet", makes a case SKIPPED, not failed: on a Hopper machine `ctest -L gpu` runs them.
if(LONGATTN_WITH_CUDA)
  set(_no_gpu "no CUDA device of compute capability 9.0 is visible;built without the CUDA backend")
  function(cli_gpu_case name)
    cli_case(gpu.${name} 0 "check: .* PASS" run --backend cuda --repeat 2 --check-rows 256 ${ARGN})
    set_tests_properties(cli.gpu.${name} PROPERTIES LABELS gpu
      SKIP_REGULAR_EXPRESSION "${_no_gpu};not supported by the CUDA backend yet")
  endfunction()
  set(_g --seq 1031 --heads-q 8 --heads-kv 2)
  cli_gpu_case(bf16_d128_causal ${_g} --dim 128 --lse)
  cli_gpu_case(bf16_d64_noncausal ${_g} --dim 64 --no-causal --lse)
  cli_gpu_case(bf16_d256_causal ${_g} --dim 256)
  cli_gpu_case(f16_f32out ${_g} --dim 128 --dtype f16 --out-dtype f32)
  cli_gpu_case(mqa_batch3 --batch 3 --seq 517 --heads-q 6 --heads-kv 1 --dim 128)
  cli_gpu_case(kv_prefix --seq-q 300 --seq-k 1100 --heads-q 4 --heads-kv 2 --dim 128 --lse)
  cli_gpu_case(more_q_than_k --seq-q 1100 --seq-k 300 --heads-q 4 --heads-kv 2 --dim 128 --lse)
  cli_gpu_case(top_left --seq-q 1100 --seq-k 300 --heads-q 4 --heads-kv 2 --dim 128 --top-left)
  cli_gpu_case(window ${_g} --dim 128 --window 200,-1)
  cli_gpu_case(chunk ${_g} --dim 128 --chunk 256)
  cli_gpu_case(sinks_softcap ${_g} --dim 128 --sinks --softcap 30 --lse)
  cli_gpu_case(ragged --ragged 700,1,129:900,333 --heads-q 8 --heads-kv 2 --dim 128 --lse)
  cli_gpu_case(paged --batch 2 --seq 777 --heads-q 8 --heads-kv 2 --dim 128 --page-size 64)
  cli_gpu_case(e4m3 ${_g} --dim 128 --dtype e4m3)
  cli_gpu_case(dim_v ${_g} --dim 128 --dim-v 64)
  cli_case(gpu.bench 0 "PASS" bench --backends cuda --seqs 1024,2048 --heads-q 8 --heads-kv 2 --check --repeat 3)
  set_tests_properties(cli.gpu.bench PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "${_no_gpu}")
endif()
