#include "core/deterministic.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "core/error.h"

namespace loom {
namespace {
std::atomic<bool> deterministic{false};
std::atomic<bool> warn_only_mode{false};
}  // namespace

void use_deterministic_algorithms(bool mode, bool warn_only) {
  warn_only_mode.store(mode && warn_only);
  deterministic.store(mode);
}

bool are_deterministic_algorithms_enabled() { return deterministic.load(); }
bool is_deterministic_algorithms_warn_only_enabled() { return warn_only_mode.load(); }

void alert_not_deterministic(const char* op) {
  if (!deterministic.load()) return;
  const std::string what = detail::str(op, " does not have a deterministic implementation, but you set "
                                           "loom::use_deterministic_algorithms(true)");
  if (!warn_only_mode.load()) throw NotImplementedError(what + "; pass warn_only = true to be warned instead");
  static std::mutex mutex;
  static std::set<std::string> warned;
  const std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(op).second) std::fprintf(stderr, "Warning: %s\n", what.c_str());
}

}  // namespace loom
