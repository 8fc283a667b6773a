# Fails the build when a forward kernel lost its tensor-core path (no HGMMA) or touches local
# memory (LDL/STL: a register array indexed at run time, or spills).
execute_process(COMMAND ${CUOBJDUMP} -sass ${LIB} OUTPUT_VARIABLE sass RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cuobjdump failed on ${LIB}")
endif()
string(REGEX MATCHALL "Function : [^\n]*fwd_kernel[^\n]*" kernels "${sass}")
list(LENGTH kernels nk)
if(nk EQUAL 0)
  message(FATAL_ERROR "check_sass: no fwd_kernel found in ${LIB}")
endif()
# Split per function and check each forward kernel (SASS lines end in ';', a CMake list
# separator: drop them first).
string(REPLACE ";" "" sass "${sass}")
string(REPLACE "Function : " ";Function : " parts "${sass}")
foreach(part IN LISTS parts)
  if(part MATCHES "^Function : [^\n]*fwd_kernel")
    string(REGEX MATCH "^Function : ([^\n]*)" _ "${part}")
    set(name "${CMAKE_MATCH_1}")
    # HGMMA: 16-bit inputs; QGMMA: fp8 (e4m3).
    if(NOT part MATCHES "[HQ]GMMA")
      message(FATAL_ERROR "check_sass: ${name} has no HGMMA / QGMMA")
    endif()
    # ptxas serializes wgmma with only a "ptxas info" line (C7511: every GMMA then carries
    # gsb0 and is followed by a wait); a healthy kernel closes one group per 4-16 GMMAs.
    string(REGEX MATCHALL "[HQ]GMMA[^\n]*" hg "${part}")
    string(REGEX MATCHALL "[HQ]GMMA[^\n]*gsb0" hg_wait "${part}")
    list(LENGTH hg n_hg)
    list(LENGTH hg_wait n_wait)
    math(EXPR n_wait4 "${n_wait} * 4")
    if(n_wait4 GREATER n_hg)
      message(FATAL_ERROR "check_sass: ${name}: ${n_wait} of ${n_hg} GMMAs close a group (wgmma serialized?)")
    endif()
    if(part MATCHES "[ \t](LDL|STL)[ .]")
      message(FATAL_ERROR "check_sass: ${name} uses local memory (LDL/STL)")
    endif()
  endif()
endforeach()
message(STATUS "check_sass: ${nk} forward kernels use HGMMA / QGMMA and no local memory")
