#include "nn/embedding.h"

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/ops.h"
#include "nn/init.h"

namespace loom::nn {

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : Module("Embedding"), options(o) {
  LOOM_CHECK(o.num_embeddings_ > 0 && o.embedding_dim_ > 0, ValueError,
             "Embedding: num_embeddings and embedding_dim must be positive, got ", o.num_embeddings_,
             " and ", o.embedding_dim_);
  if (o.padding_idx_) {
    int64_t& p = *options.padding_idx_;
    LOOM_CHECK(p >= -o.num_embeddings_ && p < o.num_embeddings_, IndexError, "Embedding: padding_idx ", p,
               " is out of range for ", o.num_embeddings_, " embeddings");
    if (p < 0) p += o.num_embeddings_;
  }
  weight = register_parameter("weight", empty({o.num_embeddings_, o.embedding_dim_}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight, 0.0, 1.0);  // PyTorch's default
  if (options.padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *options.padding_idx_).fill_(0);
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  return embedding(weight, indices, options.padding_idx_.value_or(-1));
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = std::to_string(options.num_embeddings_) + ", " + std::to_string(options.embedding_dim_);
  if (options.padding_idx_) s += ", padding_idx=" + std::to_string(*options.padding_idx_);
  return s;
}

}  // namespace loom::nn
