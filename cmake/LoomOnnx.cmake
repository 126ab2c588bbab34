# ONNX export (onnx/): the ModelProto messages that libonnx-dev generated from its onnx.proto
# (the target onnx_proto, libonnx_proto.so, built on libprotobuf). Sets LOOM_WITH_ONNX: ON where
# LOOM_ENABLE_ONNX is and both packages are found, OFF with a message otherwise. Included by
# the build and, for a static libloom.a, by LoomConfig.cmake.
set(LOOM_WITH_ONNX OFF)
if(NOT DEFINED LOOM_ENABLE_ONNX OR LOOM_ENABLE_ONNX)
  find_package(Protobuf QUIET)
  if(Protobuf_FOUND)
    find_package(ONNX CONFIG QUIET)
  endif()
  if(Protobuf_FOUND AND TARGET onnx_proto)
    set(LOOM_WITH_ONNX ON)
    message(STATUS "Loom: ONNX export ON (onnx ${ONNX_VERSION}, protobuf ${Protobuf_VERSION})")
  else()
    message(STATUS "Loom: ONNX export OFF: libonnx-dev and libprotobuf-dev not found "
                   "(scripts/install-deps.sh onnx installs them)")
  endif()
else()
  message(STATUS "Loom: ONNX export OFF (LOOM_ENABLE_ONNX=OFF)")
endif()
