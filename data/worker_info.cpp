#include "data/worker_info.h"

namespace loom::data {
namespace {
thread_local std::optional<WorkerInfo> this_worker;  // set by WorkerScope
}  // namespace

std::optional<WorkerInfo> get_worker_info() { return this_worker; }

namespace detail {

uint64_t draw_base_seed() {
  Generator& gen = default_generator();
  const auto words = Philox::block(gen.seed(), gen.reserve(1));
  return ((uint64_t(words[0]) << 32) | words[1]) >> 1;  // non-negative as an int64
}

WorkerScope::WorkerScope(size_t id, size_t num_workers, uint64_t base_seed)
    : generator_(base_seed + id), uses_generator_(generator_) {
  this_worker = WorkerInfo{id, num_workers, base_seed + id};
}

WorkerScope::~WorkerScope() { this_worker.reset(); }

}  // namespace detail
}  // namespace loom::data
