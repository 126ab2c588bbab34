// A thread's own default generator: while a ThreadGeneratorGuard lives, default_generator()
// (core/generator.h) called on its thread returns the guard's generator instead of the global
// one (guards nest). What a DataLoader worker runs under: its own generator seeded
// base_seed + its id, as each of PyTorch's worker processes has its own torch.manual_seed
// (Note [worker seeds], data/worker_info.h).
#pragma once

#include "core/generator.h"

namespace loom {

class ThreadGeneratorGuard {
 public:
  explicit ThreadGeneratorGuard(Generator& gen);
  ~ThreadGeneratorGuard();
  ThreadGeneratorGuard(const ThreadGeneratorGuard&) = delete;
  ThreadGeneratorGuard& operator=(const ThreadGeneratorGuard&) = delete;

 private:
  Generator* previous_;
};

}  // namespace loom
