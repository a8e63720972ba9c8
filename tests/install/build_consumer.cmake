# Script mode, run by CTest (tests/CMakeLists.txt): installs the build into a fresh prefix, then
# configures, builds and runs tests/install/consumer against it the way a user would, with only
# CMAKE_PREFIX_PATH pointing at the prefix. Any failing step fails the test with its output.
# Inputs: BUILD_DIR, WORK_DIR (emptied), CONSUMER_DIR, GENERATOR, CXX_COMPILER, BUILD_TYPE,
# VERSION (the project's), CLI (whether the build has the fmha-jit CLI).
set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: done")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install into ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

if(CLI)
  run_step("installed fmha-jit --version" ${prefix}/bin/fmha-jit --version)
  if(NOT step_output MATCHES "${VERSION}")
    message(FATAL_ERROR "installed fmha-jit --version printed '${step_output}', not ${VERSION}")
  endif()
endif()

run_step("configure the consumer"
  ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
  -DCMAKE_PREFIX_PATH=${prefix} -DFMHA_JIT_EXPECTED_VERSION=${VERSION})
# The package must come from the prefix, not from a copy installed elsewhere on the machine.
file(STRINGS ${consumer_build}/CMakeCache.txt package_dir REGEX "^fmha_jit_DIR:")
if(NOT package_dir MATCHES "=${prefix}/")
  message(FATAL_ERROR "the consumer found fmha_jit outside ${prefix}: ${package_dir}")
endif()

run_step("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build})
# The cache directory is the test's own, though these paths compile nothing.
run_step("run the consumer"
  ${CMAKE_COMMAND} -E env FMHA_JIT_CACHE_DIR=${WORK_DIR}/cache ${consumer_build}/fmha_jit_consumer)
message(STATUS "consumer output:\n${step_output}")
