# The install_consumer test (run by ctest as `cmake -P`): installs the Loom build in
# LOOM_BINARY_DIR into a scratch prefix, then configures, builds and runs the downstream
# project tests/consumer/ against it with find_package(Loom), using the same generator,
# compiler and flags as the Loom build.
#
# Inputs (-D): LOOM_BINARY_DIR, LOOM_SOURCE_DIR, WORK_DIR, CONFIG, GENERATOR, MAKE_PROGRAM,
# CXX_COMPILER, CXX_COMPILER_LAUNCHER, CXX_FLAGS, EXE_LINKER_FLAGS, CUDA_COMPILER.
cmake_minimum_required(VERSION 3.25)

foreach(var LOOM_BINARY_DIR LOOM_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "consumer_test.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step what)
  message(STATUS "install_consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n${out}")
  endif()
endfunction()

run_step("install into ${prefix}"
  ${CMAKE_COMMAND} --install ${LOOM_BINARY_DIR} --prefix ${prefix} --config ${CONFIG})

set(configure_args
  -S ${LOOM_SOURCE_DIR}/tests/consumer -B ${build}
  -G ${GENERATOR}
  -DCMAKE_BUILD_TYPE=${CONFIG}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()
if(CUDA_COMPILER)
  # Lets find_dependency(CUDAToolkit) find the same toolkit as the Loom build.
  get_filename_component(cuda_bin ${CUDA_COMPILER} DIRECTORY)
  get_filename_component(cuda_root ${cuda_bin} DIRECTORY)
  list(APPEND configure_args -DCUDAToolkit_ROOT=${cuda_root})
endif()

run_step("configure tests/consumer" ${CMAKE_COMMAND} ${configure_args})
run_step("build tests/consumer" ${CMAKE_COMMAND} --build ${build} --config ${CONFIG})

set(exe ${build}/loom_consumer)
if(NOT EXISTS ${exe})
  set(exe ${build}/${CONFIG}/loom_consumer)  # multi-config generators
endif()
execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "install_consumer: loom_consumer said:\n${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_consumer: loom_consumer failed (${rc})")
endif()
message(STATUS "install_consumer: passed")
