// The safetensors file format (https://github.com/huggingface/safetensors), so that
// weights move between Loom and PyTorch (safetensors.torch.save_file / load_file).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// and then the raw row-major data; offsets are relative to the end of the header.
//
// Loading treats the file as hostile: every length, offset, shape and name is checked
// before any byte is read, and each problem throws SerializationError naming the file
// and the tensor — never a crash or an out-of-bounds read.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace loom {

using TensorMap = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;

// Writes atomically: a temporary file in the same folder (path.tmp.<pid>.<n>, created
// with the permissions of a new file), fsync, then rename over path, so that a crash or a
// failure mid-save never destroys an existing file; a failed save removes its temporary
// and throws SerializationError naming path (ValueError for an undefined tensor or a name
// that is not UTF-8). Tensors may live on any device and have any strides. Each save first
// removes the temporaries of earlier saves to path whose process has died (Note [stale
// temporaries] in core/safetensors.cpp), so saves killed mid-write do not pile up.
void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata = {});

struct SafetensorsFile {
  TensorMap tensors;  // on the CPU
  Metadata metadata;
};
// Throws SerializationError naming path for a file that cannot be read or is not a
// regular file (a FIFO, device, socket or directory is refused without blocking).
SafetensorsFile load_safetensors(const std::string& path);

// The whole of the regular file at path in bytes, for every loader of hostile files (the
// safetensors and checkpoint loaders, the data readers): returns "" on success, otherwise
// why not ("cannot open: No such file or directory", "is a FIFO, not a regular file", ...),
// for the caller to throw in its own error type. Never blocks on a FIFO or opens a device.
std::string read_regular_file(const std::string& path, std::string& bytes);

// Writes bytes to path atomically, as save_safetensors does (a temporary beside path,
// fsync, rename; first the stale temporaries of killed writes to path go), for every
// writer of a file that must never be left half-written. Throws SerializationError
// "<what>: <path>: why", having removed its temporary, when that fails.
void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what);

// The same from and to memory (the parsing behind load_safetensors, and the fuzz target's
// entry point). `name` is used in error messages.
std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata = {});
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name = "<memory>");

}  // namespace loom
