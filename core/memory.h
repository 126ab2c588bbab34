// The CPU's memory books, mirroring loom::cuda's (core/cuda.h): what live tensors hold, what
// Loom holds from the system (live + cached), their peaks, and a way to give the cache back.
//
//   loom::cpu::reset_peak_memory_stats();
//   train_one_epoch();
//   std::cout << loom::cpu::max_memory_allocated() << " bytes at the peak\n";
//   loom::empty_cache();  // returns cached blocks to the system (Note [CPU block cache])
#pragma once

#include <cstddef>

namespace loom {

namespace cpu {
size_t memory_allocated();      // bytes in live CPU tensor storages
size_t max_memory_allocated();  // peak of that since start / the last reset
size_t memory_reserved();       // bytes held from the system: live + cached
size_t max_memory_reserved();
void reset_peak_memory_stats();  // the peaks become the current values
void empty_cache();              // returns every cached block with nothing live in it
}  // namespace cpu

// Returns the cached memory of every device Loom has used to the system: the CPU's block
// cache and, in a CUDA build, each GPU's (cuda::empty_cache()).
void empty_cache();

}  // namespace loom
