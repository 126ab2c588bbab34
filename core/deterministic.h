// Deterministic mode, as torch.use_deterministic_algorithms(mode, warn_only=...).
//
// Note [deterministic algorithms]
// While on, every op whose result could depend on scheduling takes a deterministic
// algorithm, and one that has none calls alert_not_deterministic, which throws
// NotImplementedError naming the op (or, with warn_only, warns once per op on stderr and
// lets it run). On CUDA: scatter_add, index_add off its sorted path, and the backward of
// gather and index_select add floats one thread per output position in index order instead
// of with atomics (kernels/support/scatter_add_rule.h); scaled-dot-product attention whose
// backward will run skips Loom's fused CUDA tier, whose backward adds dq with atomics
// (kernels::deterministic_attention_refusal), while cuDNN's tier builds its backward graph
// with cuDNN's deterministic algorithm, in plans keyed by the mode (Note [cuDNN attention
// plans]); cuDNN's RNNs run CUDNN_RNN_ALGO_STANDARD, never a persistent kernel (Note [cuDNN
// RNN algorithm rule]); Loom's cuBLAS calls always have a fixed 32 MiB workspace per stream
// (kernels/cuda/blas.cpp), what cuBLAS's reproducibility notes ask for, as
// CUBLAS_WORKSPACE_CONFIG would. On the CPU, every split whose size changes the order of a
// sum takes a fixed size instead of one from the thread count, so one and two threads give
// the same bits: the float GEMM's blocks of C (cpu::gemm_row_block, kernels/cpu/gemm.h, for
// kernels::bmm and the GEMMs around the recurrent sweeps: the GEMM's own blocking, so its
// order over K, follows the block's size), the bfloat16 GEMM's slices of rows, the recurrent
// layers' sweeps over slices of the batch (kernels/cpu/rnn.cpp), and the number of runs
// fused attention's backward splits the keys into (kernels/cpu/attention.cpp); the
// reductions, softmax, layer norm's backward, the indexed adds and the fused norm already
// fix their order by the data (Note [reduction layout], Note [indexed loops], Note
// [fixed-order norm]). The examples' CTests example_*_deterministic check whole training runs
// (docs/reproducibility.md). Not covered: the cuBLAS calls cuDNN makes inside its RNNs,
// whose workspace only CUBLAS_WORKSPACE_CONFIG (:4096:8) fixes when several streams run them.
#pragma once

namespace loom {

void use_deterministic_algorithms(bool mode, bool warn_only = false);
bool are_deterministic_algorithms_enabled();
bool is_deterministic_algorithms_warn_only_enabled();

// Called by an op that is about to run an algorithm whose result may vary run to run: in
// deterministic mode a NotImplementedError naming `op` (a warning with warn_only); else
// nothing.
void alert_not_deterministic(const char* op);

}  // namespace loom
