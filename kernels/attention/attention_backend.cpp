// The attention tiers' names, the scope that restricts them and the choice among them
// (Note [attention tiers] in kernels/attention/attention_backend.h).
#include "kernels/attention/attention_backend.h"

#include "core/error.h"

namespace loom::kernels {
namespace {

constexpr unsigned bit(SDPBackend b) { return 1u << unsigned(b); }
constexpr unsigned kAll = bit(SDPBackend::MATH) | bit(SDPBackend::FLASH_ATTENTION) | bit(SDPBackend::CUDNN_ATTENTION);

// The tiers this thread may use (a bit per SDPBackend).
thread_local unsigned enabled_tiers = kAll;

}  // namespace

const char* sdp_backend_name(SDPBackend backend) {
  switch (backend) {
    case SDPBackend::MATH: return "MATH";
    case SDPBackend::FLASH_ATTENTION: return "FLASH_ATTENTION";
    case SDPBackend::CUDNN_ATTENTION: return "CUDNN_ATTENTION";
  }
  return "?";
}

SdpaKernelGuard::SdpaKernelGuard(std::initializer_list<SDPBackend> backends) : previous_(enabled_tiers) {
  LOOM_CHECK(backends.size() > 0, ValueError, "sdpa_kernel: expected at least one backend");
  unsigned set = 0;
  for (SDPBackend b : backends) set |= bit(b);
  enabled_tiers = set;
}

SdpaKernelGuard::~SdpaKernelGuard() { enabled_tiers = previous_; }

bool sdp_backend_enabled(SDPBackend backend) { return (enabled_tiers & bit(backend)) != 0; }

std::string deterministic_attention_refusal(SDPBackend backend, bool on_gpu, bool needs_backward,
                                            bool deterministic) {
  if (deterministic && on_gpu && needs_backward && backend == SDPBackend::FLASH_ATTENTION)
    return "its backward adds dq with atomics, and deterministic algorithms are on";
  return {};
}

SDPBackend choose_sdp_backend(const char* op, const std::function<std::string(SDPBackend)>& refusal) {
  std::string why;
  for (SDPBackend tier : {SDPBackend::CUDNN_ATTENTION, SDPBackend::FLASH_ATTENTION}) {
    if (!sdp_backend_enabled(tier)) continue;
    const std::string reason = refusal(tier);
    if (reason.empty()) return tier;
    why += std::string("; ") + sdp_backend_name(tier) + ": " + reason;
  }
  if (sdp_backend_enabled(SDPBackend::MATH)) return SDPBackend::MATH;
  throw NotImplementedError(
      ::loom::detail::str(op, ": no available kernel: the backends sdpa_kernel allows refuse the call", why));
}

}  // namespace loom::kernels
