// The CUDA backend's table, assembled once from its families (kernels/cuda/backend.h).
// Compiled only in a build with the CUDA backend, where it is the CUDA device's table.
#include "kernels/cuda/backend.h"

namespace loom::kernels {

const Backend* cuda_backend() {
  static const Backend table = [] {
    Backend b{"CUDA"};
    cuda::add_unary_kernels(b);
    cuda::add_binary_kernels(b);
    cuda::add_copy_kernels(b);
    cuda::add_transfer_kernels(b);
    cuda::add_random_kernels(b);
    cuda::add_reduce_kernels(b);
    cuda::add_sort_kernels(b);
    cuda::add_multinomial_kernels(b);
    cuda::add_softmax_kernels(b);
    cuda::add_layer_norm_kernels(b);
    cuda::add_blas_kernels(b);
    cuda::add_attention_kernels(b);
    cuda::add_cudnn_attention_kernels(b);
    cuda::add_index_kernels(b);
    cuda::add_rnn_kernels(b);
    cuda::add_cudnn_rnn_kernels(b);
    cuda::add_optimizer_kernels(b);
    cuda::add_amp_kernels(b);
    cuda::add_norm_kernels(b);
    return b;
  }();
  return &table;
}

}  // namespace loom::kernels
