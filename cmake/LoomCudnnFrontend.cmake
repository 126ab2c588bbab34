# Finds the header-only C++ API of cuDNN's frontend (cudnn_frontend.h), with which
# kernels/cuda/cudnn_attention.cpp runs cuDNN's fused attention (the CUDNN_ATTENTION tier):
# under CUDNN_FRONTEND_ROOT (a folder with include/cudnn_frontend.h), or the include/ of
# PyPI's nvidia-cudnn-frontend that scripts/install-deps.sh puts in .venv-tools/. Included
# by CMakeLists.txt when the CUDA backend has cuDNN (LOOM_CUDNN_INCLUDE_DIR). Sets
# LOOM_CUDNN_FRONTEND_INCLUDE_DIR and LOOM_WITH_CUDNN_FRONTEND; without the headers the CUDA
# build compiles and links all the same, and scaled_dot_product_attention runs the other
# tiers.
option(LOOM_CUDNN_FRONTEND "cuDNN's fused attention through its frontend's headers, where they are found" ON)
set(LOOM_WITH_CUDNN_FRONTEND OFF)
if(NOT LOOM_CUDNN_FRONTEND)
  message(STATUS "Loom: LOOM_CUDNN_FRONTEND is OFF: cuDNN's fused attention is OFF")
  return()
endif()
file(GLOB loom_venv_includes ${CMAKE_CURRENT_SOURCE_DIR}/.venv-tools/lib/python3*/site-packages/include)
find_path(LOOM_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ${CUDNN_FRONTEND_ROOT} $ENV{CUDNN_FRONTEND_ROOT} ${loom_venv_includes} PATH_SUFFIXES include
  NO_CACHE)

# "MAJOR.MINOR.PATCH" from a header's `#define <PREFIX>{MAJOR,MINOR,<patch_name>}... N` lines.
function(loom_header_version header prefix patch_name out)
  file(STRINGS ${header} lines REGEX "#define ${prefix}(MAJOR|MINOR|${patch_name})[A-Z_]* +[0-9]+")
  set(parts "")
  foreach(part MAJOR MINOR ${patch_name})
    string(REGEX MATCH "#define ${prefix}${part}[A-Z_]* +([0-9]+)" match "${lines}")
    list(APPEND parts ${CMAKE_MATCH_1})
  endforeach()
  string(JOIN "." version ${parts})
  set(${out} ${version} PARENT_SCOPE)
endfunction()

if(LOOM_CUDNN_FRONTEND_INCLUDE_DIR)
  loom_header_version(${LOOM_CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h CUDNN_FRONTEND_ PATCH
                      loom_frontend_version)
  loom_header_version(${LOOM_CUDNN_INCLUDE_DIR}/cudnn_version.h CUDNN_ PATCHLEVEL loom_cudnn_version)
  # The SDPA graphs with bias, padding, dropout and their backward need frontend 1.x on
  # cuDNN 9 (scripts/install-cudnn-frontend.sh pins the release made for 9.18/9.19).
  if(loom_frontend_version VERSION_LESS 1.8 OR loom_cudnn_version VERSION_LESS 9.0)
    message(STATUS "Loom: cuDNN frontend ${loom_frontend_version} with cuDNN ${loom_cudnn_version}: too old for "
                   "cuDNN's attention (frontend >= 1.8, cuDNN >= 9); attention runs Loom's kernels")
  else()
    set(LOOM_WITH_CUDNN_FRONTEND ON)
    message(STATUS "Loom: cuDNN frontend ${loom_frontend_version} (${LOOM_CUDNN_FRONTEND_INCLUDE_DIR}) with cuDNN "
                   "${loom_cudnn_version}: cuDNN's fused attention is ON")
  endif()
else()
  message(STATUS "Loom: cuDNN frontend headers not found (scripts/install-deps.sh installs them into .venv-tools/, "
                 "or set CUDNN_FRONTEND_ROOT): cuDNN's fused attention is OFF")
endif()
