# ctest driver (cmake -P): install the built tree into a fresh prefix, then configure, build
# and run the downstream project in this folder against it with find_package(longattn).
# Inputs: BUILD_DIR (the longattn build), SOURCE_DIR (this folder), WORK (scratch folder),
# GENERATOR, CXX.
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# The package registry is off so only the fresh prefix can satisfy find_package.
step("downstream configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK}/build -G ${GENERATOR}
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
string(FIND "${step_output}" "longattn package: ${prefix}/" at)
if(at LESS 0)
  message(FATAL_ERROR "find_package(longattn) did not use the installed prefix:\n${step_output}")
endif()
step("downstream build" ${CMAKE_COMMAND} --build ${WORK}/build)
step("downstream run" ${WORK}/build/downstream)
message(STATUS "${step_output}")
