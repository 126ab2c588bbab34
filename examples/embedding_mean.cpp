// The smallest useful text classifier: Embedding -> mean over the words -> Linear (a
// "bag of embeddings", as nn.EmbeddingBag(mode="mean") + nn.Linear in PyTorch), on the
// same movie-review sentences as text_classification. A baseline for the LSTM: no word
// order, a few seconds per epoch.
//
//   ./build/cpu/examples/embedding_mean [--epochs 10] [--data file.tsv | aclImdb/]
#include "loom.h"
#include "text_classifier_program.h"

using namespace loom;

struct TextClassifier : nn::Module {
  TextClassifier(int64_t vocab, int64_t dim, int64_t classes)
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(vocab, dim).padding_idx(0)))),
        fc(register_module("fc", nn::Linear(dim, classes))) {}

  Tensor forward(const Tensor& tokens, const Tensor& lengths) {  // (B, T) int64, (B)
    // <pad> embeds to zeros, so the sum over T is the sum over each text's own words.
    // (lengths stay on the CPU in a TextBatch, for the recurrent layers: move them here.)
    Tensor mean = embedding(tokens).sum(1) / lengths.unsqueeze(1).to(tokens.device(), kFloat32);  // (B, dim)
    return fc(mean);
  }

  nn::Embedding embedding;
  nn::Linear fc;
};

int main(int argc, char** argv) {
  int64_t dim = 64;
  return examples::run_text_classifier(
      argc, argv, {.name = "embedding_mean", .description = "Train an embedding-mean text classifier"},
      [&](CLI::App& app) { app.add_option("--dim", dim, "embedding size"); },
      [&](int64_t vocab, int64_t classes) { return std::make_shared<TextClassifier>(vocab, dim, classes); });
}
