// Which implementation runs scaled_dot_product_attention, named as PyTorch's
// torch.nn.attention.SDPBackend, and the scope that restricts them (torch.nn.attention.
// sdpa_kernel). nn::attention re-exports both (nn/functional.h).
//
// Note [attention tiers]
// nn::functional::scaled_dot_product_attention has three implementations, tried in order:
//   CUDNN_ATTENTION  cuDNN's fused flash-attention graphs through its frontend
//                    (kernels/cuda/cudnn_attention.cpp): float16 and bfloat16 on a GPU, the
//                    head dims, masks and layouts cuDNN takes (Note [cuDNN attention plans]).
//   FLASH_ATTENTION  Loom's own fused kernels: kernels/cpu/attention.cpp (every float dtype)
//                    and kernels/cuda/attention.cu (float32, float16, bfloat16, head dims up
//                    to 128) — FlashAttention-2's schedule, the name PyTorch gives its own
//                    fused CPU kernel too.
//   MATH             the composition of ops (nn::functional::detail::sdpa_reference), which
//                    takes everything, also a mask that requires grad.
// A fused tier that does not take a call says why (its refusal, a sentence) and the next
// one runs: a refusal is never the user's error. The tier the forward chose runs the
// backward too (its logsumexp and its dropout bits are its own); a call whose backward a
// tier would refuse (cuDNN builds both graphs) does not run on that tier at all.
// An SdpaKernelGuard narrows the tiers a thread may use, for tests and benchmarks; when
// none of those it allows takes a call, the op throws NotImplementedError naming each
// allowed tier and its refusal, as PyTorch's "No available kernel" (only a forced scope
// can make it throw).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

namespace loom::kernels {

enum class SDPBackend { MATH, FLASH_ATTENTION, CUDNN_ATTENTION };

// "MATH", "FLASH_ATTENTION", "CUDNN_ATTENTION": PyTorch's names (bench lines print them).
const char* sdp_backend_name(SDPBackend backend);

// As `with torch.nn.attention.sdpa_kernel(backends):` on this thread: only `backends` may
// run scaled_dot_product_attention while the guard lives; nested guards replace the set,
// and the one before comes back when they end. An empty list is a ValueError.
class SdpaKernelGuard {
 public:
  SdpaKernelGuard(std::initializer_list<SDPBackend> backends);
  explicit SdpaKernelGuard(SDPBackend backend) : SdpaKernelGuard({backend}) {}
  ~SdpaKernelGuard();
  SdpaKernelGuard(const SdpaKernelGuard&) = delete;
  SdpaKernelGuard& operator=(const SdpaKernelGuard&) = delete;

 private:
  unsigned previous_;
};

// Whether this thread's scope lets `backend` run (all three outside any guard).
bool sdp_backend_enabled(SDPBackend backend);

// Why `backend` would not run a call under deterministic mode (`deterministic`; Note
// [deterministic algorithms] in core/deterministic.h): only FLASH_ATTENTION on a GPU when
// the call's backward will run, since Loom's fused CUDA backward adds dq with atomics. cuDNN
// builds its backward with its deterministic algorithm then (Note [cuDNN attention plans]),
// the CPU's fused backward adds in a fixed order, MATH is its ops. "" otherwise.
std::string deterministic_attention_refusal(SDPBackend backend, bool on_gpu, bool needs_backward,
                                            bool deterministic);

// The tier that runs a call (Note [attention tiers]): the first of CUDNN_ATTENTION,
// FLASH_ATTENTION, MATH that the scope allows and whose refusal(tier) is "" (asked only of
// the fused tiers the scope allows, in that order, until one takes the call; MATH never
// refuses). NotImplementedError naming `op`, each allowed tier and its refusal when none of
// the allowed ones takes the call.
SDPBackend choose_sdp_backend(const char* op, const std::function<std::string(SDPBackend)>& refusal);

}  // namespace loom::kernels
