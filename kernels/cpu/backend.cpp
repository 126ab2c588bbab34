// The CPU backend's table, assembled once from its families (kernels/cpu/backend.h).
#include "kernels/cpu/backend.h"

namespace loom::kernels {

const Backend& cpu_backend() {
  static const Backend table = [] {
    Backend b{"CPU"};
    cpu::add_elementwise_kernels(b);
    cpu::add_random_kernels(b);
    cpu::add_reduce_kernels(b);
    cpu::add_arg_reduce_kernels(b);
    cpu::add_sort_kernels(b);
    cpu::add_multinomial_kernels(b);
    cpu::add_softmax_kernels(b);
    cpu::add_matmul_kernels(b);
    cpu::add_attention_kernels(b);
    cpu::add_layer_norm_kernels(b);
    cpu::add_index_kernels(b);
    cpu::add_rnn_kernels(b);
    cpu::add_optimizer_kernels(b);
    cpu::add_amp_kernels(b);
    cpu::add_norm_kernels(b);
    return b;
  }();
  return table;
}

}  // namespace loom::kernels
