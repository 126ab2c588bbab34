// The smallest useful text classifier: Embedding -> mean over the words -> Linear (a
// "bag of embeddings", as nn.EmbeddingBag(mode="mean") + nn.Linear in PyTorch), on the
// same movie-review sentences as text_classification. A baseline for the LSTM: no word
// order, a few seconds per epoch.
//
//   ./build/cpu/examples/embedding_mean [--epochs 10] [--data file.tsv | aclImdb/]
#include "embedding_mean_model.h"
#include "loom.h"
#include "text_classifier_program.h"

using namespace loom;

int main(int argc, char** argv) {
  int64_t dim = 64;
  return examples::run_text_classifier(
      argc, argv, {.name = "embedding_mean", .description = "Train an embedding-mean text classifier"},
      [&](CLI::App& app) { app.add_option("--dim", dim, "embedding size"); },
      [&](int64_t vocab, int64_t classes) { return std::make_shared<examples::EmbeddingMeanClassifier>(vocab, dim, classes); });
}
