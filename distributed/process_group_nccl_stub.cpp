// ProcessGroupNCCL in a build without the nccl backend (CMakeLists.txt compiles this file
// instead of process_group_nccl.cpp when CUDA or NCCL is missing): it says why at once,
// so init_process_group("nccl") fails before it reads the environment or opens the store.
#include "core/build_info.h"
#include "distributed/error.h"
#include "distributed/process_group_nccl.h"

namespace loom::distributed {

bool is_nccl_available() { return false; }

std::string nccl_unavailable_reason() {
  if (!built_with_cuda()) {
    return "nccl needs Loom built with CUDA (the cuda preset: cmake --preset cuda); this build has the gloo "
           "backend only";
  }
  return "nccl needs NCCL, which CMake did not find when this CUDA build was configured (set NCCL_ROOT to a "
         "folder with include/nccl.h and lib/libnccl.so*, e.g. the nvidia-nccl pip wheel's, and reconfigure); "
         "this build has the gloo backend only";
}

struct ProcessGroupNCCL::Impl {};

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<TCPStore>, int rank, int size, ProcessGroupNCCLOptions)
    : ProcessGroup(rank, size, kCUDA) {
  throw DistributedError("ProcessGroupNCCL: " + nccl_unavailable_reason());
}

// Never reached: no ProcessGroupNCCL is ever constructed in this build.
ProcessGroupNCCL::~ProcessGroupNCCL() = default;
std::shared_ptr<Work> ProcessGroupNCCL::all_reduce(const Tensor&, ReduceOp) { return nullptr; }
std::shared_ptr<Work> ProcessGroupNCCL::broadcast(const Tensor&, int) { return nullptr; }
std::shared_ptr<Work> ProcessGroupNCCL::all_gather(const std::vector<Tensor>&, const Tensor&) { return nullptr; }
std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter(const Tensor&, const std::vector<Tensor>&, ReduceOp) {
  return nullptr;
}
std::shared_ptr<Work> ProcessGroupNCCL::barrier() { return nullptr; }

}  // namespace loom::distributed
