#include "autograd/saved_tensor_hooks.h"

namespace loom {
namespace {
thread_local SavedTensorHooks* current_hooks = nullptr;
}  // namespace

SavedTensorHooks* current_saved_tensor_hooks() { return current_hooks; }

SavedTensorHooksGuard::SavedTensorHooksGuard(SavedTensorHooks* hooks) : previous_(current_hooks) {
  current_hooks = hooks;
}

SavedTensorHooksGuard::~SavedTensorHooksGuard() { current_hooks = previous_; }

}  // namespace loom
