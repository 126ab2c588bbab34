// nn::Embedding: a lookup table of vectors, as torch.nn.Embedding.
#pragma once

#include <optional>

#include "nn/module.h"

namespace loom::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  // This row starts at zero and gets no gradient (e.g. the <pad> token).
  EmbeddingOptions& padding_idx(int64_t i) { padding_idx_ = i; return *this; }
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  // indices (...) of int64/int32 -> (..., embedding_dim)
  Tensor forward(const Tensor& indices);
  void reset_parameters();
  std::string extra_repr() const override;

  EmbeddingOptions options;
  Tensor weight;  // (num_embeddings, embedding_dim)
};

using Embedding = ModuleHolder<EmbeddingImpl>;

}  // namespace loom::nn
