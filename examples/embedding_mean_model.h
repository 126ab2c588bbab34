// embedding_mean's model: Embedding -> mean over the words -> Linear (a "bag of
// embeddings", as nn.EmbeddingBag(mode="mean") + nn.Linear in PyTorch). Shared with the
// tests that train it on a GPU.
#pragma once

#include "loom.h"

namespace examples {

struct EmbeddingMeanClassifier : loom::nn::Module {
  EmbeddingMeanClassifier(int64_t vocab, int64_t dim, int64_t classes)
      : embedding(register_module("embedding",
                                  loom::nn::Embedding(loom::nn::EmbeddingOptions(vocab, dim).padding_idx(0)))),
        fc(register_module("fc", loom::nn::Linear(dim, classes))) {}

  // tokens (B, T) int64 on the model's device; lengths (B) int64, anywhere (a TextBatch
  // keeps them on the CPU for the recurrent layers; from pinned memory they reach a GPU
  // without the host waiting).
  loom::Tensor forward(const loom::Tensor& tokens, const loom::Tensor& lengths) {
    // <pad> embeds to zeros, so the sum over T is the sum over each text's own words.
    const loom::Tensor counts = lengths.to(tokens.device(), /*non_blocking=*/true).unsqueeze(1).to(loom::kFloat32);
    return fc(embedding(tokens).sum(1) / counts);  // (B, dim) -> (B, classes)
  }

  loom::nn::Embedding embedding;
  loom::nn::Linear fc;
};

}  // namespace examples
