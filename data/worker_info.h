// Which DataLoader worker this thread is, and its seed, as torch.utils.data.get_worker_info().
//
// Note [worker seeds]
// As PyTorch seeds its worker processes: each pass over a DataLoader (each epoch's
// iterator) draws a base seed from the calling thread's default generator, with or without
// workers, so the main stream advances the same whatever num_workers is; worker i of that
// pass gets its own generator seeded base_seed + i (the default generator on its thread,
// core/thread_generator.h), then calls worker_init_fn(i). Batch k is loaded
// by worker k % num_workers, in order, as PyTorch deals batches out, so a dataset's random
// augmentation is the same run after run and differs between workers. Without workers the
// batches are made on the calling thread with its generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/thread_generator.h"

namespace loom::data {

struct WorkerInfo {
  size_t id = 0;           // 0 .. num_workers - 1
  size_t num_workers = 0;
  uint64_t seed = 0;       // base_seed + id: the seed of this worker's default generator
};

// On a DataLoader worker's thread, its WorkerInfo; elsewhere none.
std::optional<WorkerInfo> get_worker_info();

namespace detail {

// A pass's base seed: 63 random bits from the calling thread's default generator (as
// torch.empty((), dtype=torch.int64).random_()).
uint64_t draw_base_seed();

// A worker thread's identity and generator while it lives (Note [worker seeds]).
class WorkerScope {
 public:
  WorkerScope(size_t id, size_t num_workers, uint64_t base_seed);
  ~WorkerScope();
  WorkerScope(const WorkerScope&) = delete;
  WorkerScope& operator=(const WorkerScope&) = delete;

 private:
  Generator generator_;
  ThreadGeneratorGuard uses_generator_;
};

}  // namespace detail
}  // namespace loom::data
