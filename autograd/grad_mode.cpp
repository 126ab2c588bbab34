#include "autograd/grad_mode.h"

#include <atomic>

namespace loom {
namespace {
thread_local bool grad_enabled = true;
std::atomic<bool> anomaly_enabled{false};
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }
bool AnomalyMode::is_enabled() { return anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled) { anomaly_enabled = enabled; }

}  // namespace loom
