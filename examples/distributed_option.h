// --distributed for the examples: data-parallel training as a PyTorch DDP script does it,
// under the launcher (docs/distributed.md):
//
//   loomrun --nproc-per-node 2 build/cpu/examples/text_classification --distributed
//   torchrun --nproc-per-node 2 --no-python build/cpu/examples/text_classification --distributed
//
//   examples::DistributedOption dist;  dist.add_to(app);
//   dist.init(device);          // init_process_group from the launcher's environment; cuda:LOCAL_RANK
//   auto loader = examples::text_loader(..., dist.shard());   // this rank's share
//   dist.sum(values);           // totals over the ranks, for the metrics
//   if (dist.is_main()) save_checkpoint(...);  dist.barrier();
//
// Rank 0 prints; the other ranks' stdout goes to /dev/null (their errors still reach
// stderr), so the output reads as a single process's.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/distributed.h"
#include "loom.h"
#include "weights_crc32c.h"

namespace examples {

struct DistributedOption {
  bool enabled = false;

  void add_to(CLI::App& app) {
    app.add_flag("--distributed", enabled,
                 "data-parallel over the ranks a launcher starts: loomrun, torchrun, srun, mpirun "
                 "(gloo on the CPU, nccl on GPUs)");
  }
  // Joins the job (gloo for the CPU, nccl for CUDA) and moves a CUDA device to this rank's
  // GPU (LOCAL_RANK), one GPU per rank.
  void init(loom::Device& device) const {
    if (!enabled) return;
    // Rank 0 prints on stderr what the launcher set and where it was read.
    loom::distributed::init_process_group(device.is_cuda() ? "nccl" : "gloo",
                                          loom::distributed::InitOptions().print_environment(true));
    if (device.is_cuda()) device = loom::Device(loom::DeviceType::CUDA, loom::distributed::get_local_rank());
    if (!is_main()) std::freopen("/dev/null", "w", stdout);
  }
  ~DistributedOption() {
    if (enabled) loom::distributed::destroy_process_group();
  }

  int rank() const { return enabled ? loom::distributed::get_rank() : 0; }
  int world() const { return enabled ? loom::distributed::get_world_size() : 1; }
  bool is_main() const { return rank() == 0; }
  // (rank, world size): the share of the data this rank trains on.
  std::pair<size_t, size_t> shard() const { return {size_t(rank()), size_t(world())}; }
  // Each value summed over the ranks, in place (metrics every rank counted for its share).
  void sum(std::vector<double>& values) const {
    if (!enabled || values.empty()) return;
    loom::Tensor t = loom::from_vector(values).to(loom::distributed::default_group().device());
    loom::distributed::all_reduce(t)->wait();
    values = t.to_vector<double>();
  }
  // A flag or'ed over the ranks (every rank calls it, at the same point), for
  // TrainingParts::any_rank; empty when not distributed.
  std::function<bool(bool)> any_rank() const {
    if (!enabled) return {};
    return [this](bool flag) {
      std::vector<double> v{flag ? 1.0 : 0.0};
      sum(v);
      return v[0] > 0;
    };
  }
  // After rank 0 writes a file the others will read.
  void barrier() const {
    if (enabled) loom::distributed::barrier()->wait();
  }
};

}  // namespace examples
