// What the ONNX export tests share (tests/test_onnx.cpp, tests/test_onnx_sizes.cpp): a scratch
// path, a model read back with ONNX's own ModelProto, a node looked up by type.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <onnx/onnx_pb.h>

#include "catch2_compat.h"

namespace onnx_test {

inline std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "loom_test_onnx";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

inline ::onnx::ModelProto read(const std::string& path) {
  ::onnx::ModelProto m;
  std::ifstream f(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&f));
  return m;
}

// The one node of this type in the graph.
inline const ::onnx::NodeProto& only_node(const ::onnx::ModelProto& m, const std::string& type) {
  const ::onnx::NodeProto* found = nullptr;
  for (const auto& n : m.graph().node())
    if (n.op_type() == type) {
      REQUIRE(found == nullptr);
      found = &n;
    }
  REQUIRE(found != nullptr);
  return *found;
}

}  // namespace onnx_test
