// The CUDA implementations of the kernel entry points of kernels/kernels.h, with the same
// signatures and contracts (read them there). Reached through LOOM_DISPATCH_CUDA
// (kernels/dispatch.h) when the output tensor lives on a GPU; every tensor argument is
// then on that same GPU (the autograd layer checks devices before calling a kernel).
// Kernels launch on the current stream of the output's device (core/cuda.h).
#pragma once

#include "kernels/kernels.h"

namespace loom::kernels::cuda {

// kernels/cuda/elementwise_unary.cu, elementwise_binary.cu, elementwise_copy.cu
void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, Scalar value);
void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset);
void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);
void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset);
void bernoulli(const Tensor& dst, double p, uint64_t seed, uint64_t offset);
void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset);

// kernels/cuda/transfer.cpp: host <-> device and device <-> device copies (cudaMemcpyAsync).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);

// kernels/cuda/blas.cpp (cuBLAS / cuBLASLt)
void bmm(const Tensor& out, const Tensor& a, const Tensor& b, double beta);

// kernels/cuda/reduce.cu (with cumsum), softmax.cu, index.cu
void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims);
void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim);
void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction);
void cumsum(const Tensor& out, const Tensor& in, int64_t dim);
void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log);
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& y, int64_t dim, bool log);
void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void triangle(const Tensor& out, const Tensor& in, int64_t k, bool lower);
void check_indices(const Tensor& index, int64_t size, const char* op);

// kernels/cuda/rnn.cu: one recurrent layer, one direction (Note [step-functor RNN sweep]).
RNNLayerOutput rnn_layer_forward(const RNNLayerInput& in);
RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n);

}  // namespace loom::kernels::cuda
