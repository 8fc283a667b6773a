cmake_minimum_required(VERSION 3.25)
# .npy round trip: a random run saves its q/k/v and output; a second run reads those files
# and must write a byte-identical output (same backend, one thread: deterministic).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(common --heads-q 4 --heads-kv 2 --dim 64 --backend cpu --threads 1 --repeat 1 --warmup 0
           --check-rows 16 --lse)
execute_process(COMMAND ${CLI} run --seq 45 ${common} --save-inputs ${WORK}/in
                        --out ${WORK}/out1.npy --lse-out ${WORK}/lse1.npy
                RESULT_VARIABLE rc1 OUTPUT_VARIABLE o1 ERROR_VARIABLE e1)
message("${o1}${e1}")
if(NOT rc1 EQUAL 0)
  message(FATAL_ERROR "first run failed (${rc1})")
endif()
execute_process(COMMAND ${CLI} run ${common} --q ${WORK}/in/q.npy --k ${WORK}/in/k.npy
                        --v ${WORK}/in/v.npy --out ${WORK}/out2.npy --lse-out ${WORK}/lse2.npy
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE o2 ERROR_VARIABLE e2)
message("${o2}${e2}")
if(NOT rc2 EQUAL 0)
  message(FATAL_ERROR "second run failed (${rc2})")
endif()
if(NOT o2 MATCHES "batch 1 seq 45 heads 4/2 dim 64")
  message(FATAL_ERROR "shape not taken from the files")
endif()
foreach(f out lse)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/${f}1.npy ${WORK}/${f}2.npy
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "${f}1.npy and ${f}2.npy differ")
  endif()
endforeach()
# The written output is float32 .npy with the right shape.
file(READ ${WORK}/out1.npy head OFFSET 10 LIMIT 80)  # past the magic/version bytes (NUL)
if(NOT head MATCHES "'descr': '<f4'.*'shape': \\(1, 45, 4, 64\\)")
  message(FATAL_ERROR "unexpected .npy header: ${head}")
endif()
