// The CUDA backend's table (Note [kernel routing] in kernels/backend.h): each family of
// CUDA kernels fills its own slots, from the file that defines them. The kernels launch on
// the current stream of their output's device (core/cuda.h); the router has checked that
// every operand is on that device.
#pragma once

#include "kernels/backend.h"

namespace loom::kernels::cuda {

void add_unary_kernels(Backend& b);        // kernels/cuda/elementwise_unary.cu
void add_binary_kernels(Backend& b);       // elementwise_binary.cu
void add_copy_kernels(Backend& b);         // elementwise_copy.cu (where, copy, fill)
void add_transfer_kernels(Backend& b);     // transfer.cpp (host <-> device, device <-> device)
void add_random_kernels(Backend& b);       // random.cu
void add_reduce_kernels(Backend& b);       // reduce.cu (with arg_reduce, variance, cumsum)
void add_sort_kernels(Backend& b);         // sort.cu (sort, topk)
void add_multinomial_kernels(Backend& b);  // multinomial.cu
void add_softmax_kernels(Backend& b);      // softmax.cu
void add_layer_norm_kernels(Backend& b);   // layer_norm.cu (fused layer norm, forward and backward)
void add_blas_kernels(Backend& b);         // blas.cpp (cuBLAS)
void add_attention_kernels(Backend& b);    // attention.cu (fused scaled-dot-product attention)
void add_cudnn_attention_kernels(Backend& b);  // cudnn_attention.cpp (cuDNN's; nothing without its frontend)
void add_index_kernels(Backend& b);        // index.cu
void add_rnn_kernels(Backend& b);          // rnn.cu (the step-functor sweep)
void add_cudnn_rnn_kernels(Backend& b);    // cudnn_rnn.cpp (whole stacks; nothing without cuDNN)
void add_optimizer_kernels(Backend& b);    // optim_update.cu
void add_amp_kernels(Backend& b);          // amp.cu (the gradient scaler's)
void add_norm_kernels(Backend& b);         // norm.cu (multi_tensor_norm)

}  // namespace loom::kernels::cuda
