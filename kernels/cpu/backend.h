// The CPU backend's table (Note [kernel routing] in kernels/backend.h): each family of
// CPU kernels fills its own slots, from the file that defines them.
#pragma once

#include "kernels/backend.h"

namespace loom::kernels::cpu {

void add_elementwise_kernels(Backend& b);  // kernels/cpu/elementwise.cpp
void add_random_kernels(Backend& b);       // random.cpp
void add_reduce_kernels(Backend& b);       // reduce.cpp
void add_arg_reduce_kernels(Backend& b);   // arg_reduce.cpp (with variance, cumsum)
void add_sort_kernels(Backend& b);         // sort.cpp (sort, topk)
void add_multinomial_kernels(Backend& b);  // multinomial.cpp
void add_softmax_kernels(Backend& b);      // softmax.cpp
void add_matmul_kernels(Backend& b);       // matmul.cpp
void add_attention_kernels(Backend& b);    // attention.cpp
void add_layer_norm_kernels(Backend& b);   // layer_norm.cpp
void add_index_kernels(Backend& b);        // index.cpp
void add_rnn_kernels(Backend& b);          // rnn.cpp
void add_optimizer_kernels(Backend& b);    // optim_update.cpp
void add_amp_kernels(Backend& b);          // amp.cpp (the gradient scaler's)
void add_norm_kernels(Backend& b);         // norm.cpp (multi_tensor_norm)

}  // namespace loom::kernels::cpu
