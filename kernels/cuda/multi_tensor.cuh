// One launch for a list of tensors (PyTorch's multi_tensor_apply): the optimizers' updates
// and the gradient scaler's unscale of every gradient of a dtype.
//
// Note [multi-tensor launches]
// A training step updates dozens of parameters; one launch each made the step's end a row of
// launches the host queues one by one (about 5 µs each), for tensors that are often too small
// to fill the GPU. Instead, a launch takes up to kMaxListTensors tensors, whose pointers ride
// in the kernel's argument (under 4 KiB). Each tensor is cut into chunks of kListChunk
// elements and each block takes one chunk: its tensor is the one whose run of chunks holds
// the block's index (first_chunk holds the runs' starts), its elements that chunk's. A longer
// list takes more launches of the same kind. for_each_list_launch does the packing on the
// host, the kernels find their chunk with ListChunks.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {

constexpr int kMaxListTensors = 24;
constexpr int64_t kListChunk = 16384;  // elements per block: 64 per thread

struct ListChunks {
  int count = 0;                          // tensors in this launch
  int first_chunk[kMaxListTensors + 1];   // tensor t's chunks: [first_chunk[t], first_chunk[t + 1])
  int64_t numel[kMaxListTensors];

  int blocks() const { return first_chunk[count]; }

  // The tensor of block `block`, and the range [begin, end) of its elements that block
  // takes (host and device: the host tests walk a grid with it).
  LOOM_HOST_DEVICE int tensor_of(int block, int64_t& begin, int64_t& end) const {
    int t = 0;
    while (first_chunk[t + 1] <= block) ++t;
    begin = int64_t(block - first_chunk[t]) * kListChunk;
    end = begin + kListChunk < numel[t] ? begin + kListChunk : numel[t];
    return t;
  }
};

// Calls launch(chunks, which) for each run of at most kMaxListTensors tensors of a list whose
// element counts are `numel` (empty tensors are skipped): `which` holds the indices in the
// list of the run's chunks.count tensors, in order.
inline void for_each_list_launch(const std::vector<int64_t>& numel,
                                 const std::function<void(const ListChunks&, const std::vector<size_t>&)>& launch) {
  ListChunks chunks;
  std::vector<size_t> which;
  chunks.first_chunk[0] = 0;
  for (size_t i = 0; i < numel.size(); ++i) {
    if (numel[i] == 0) continue;
    const int t = chunks.count++;
    chunks.numel[t] = numel[i];
    chunks.first_chunk[t + 1] = chunks.first_chunk[t] + int((numel[i] + kListChunk - 1) / kListChunk);
    which.push_back(i);
    if (chunks.count == kMaxListTensors) {
      launch(chunks, which);
      chunks.count = 0;
      which.clear();
    }
  }
  if (chunks.count > 0) launch(chunks, which);
}

// Calls fn(dtype, of_dtype, numel) for each floating dtype of `tensors`, in a fixed order of
// dtypes: of_dtype holds that dtype's tensors in list order, numel their element counts (a
// multi-tensor launch takes one dtype).
inline void for_each_dtype_group(
    const std::vector<Tensor>& tensors,
    const std::function<void(DType, const std::vector<const Tensor*>&, const std::vector<int64_t>&)>& fn) {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    std::vector<const Tensor*> of_dtype;
    std::vector<int64_t> numel;
    for (const Tensor& t : tensors)
      if (t.dtype() == dtype) {
        of_dtype.push_back(&t);
        numel.push_back(t.numel());
      }
    if (!of_dtype.empty()) fn(dtype, of_dtype, numel);
  }
}

}  // namespace loom::kernels::cuda
