#include "core/generator.h"
#include "core/thread_generator.h"

namespace loom {
namespace {
thread_local Generator* thread_generator = nullptr;  // see ThreadGeneratorGuard
}  // namespace

Generator& default_generator() {
  static Generator gen;
  return thread_generator ? *thread_generator : gen;
}

ThreadGeneratorGuard::ThreadGeneratorGuard(Generator& gen) : previous_(thread_generator) { thread_generator = &gen; }
ThreadGeneratorGuard::~ThreadGeneratorGuard() { thread_generator = previous_; }

}  // namespace loom
