// A Transformer text classifier on the bundled movie-review sentences, beside the LSTM
// flagship (text_classification): Embedding + learned positions -> TransformerEncoder
// (pre-norm, padding masks from the lengths) -> mean over each text's own tokens -> Linear,
// as a PyTorch script builds it from nn.TransformerEncoder.
//
//   ./build/cpu/examples/transformer_classification [--epochs 10] [--layers 2] [--d-model 64]
#include "loom.h"
#include "text_classifier_program.h"
#include "transformer_classification_model.h"

using namespace loom;

int main(int argc, char** argv) {
  int64_t d_model = 64, heads = 4, layers = 2, feedforward = 128;
  double dropout = 0.1;
  bool checkpoint_activations = false;
  return examples::run_text_classifier(
      argc, argv,
      {.name = "transformer_classification", .description = "Train a Transformer-encoder text classifier",
       .epochs = 6, .batch_size = 32, .lr = 2e-3, .clip_norm = 1.0},
      [&](CLI::App& app) {
        app.add_option("--d-model", d_model, "embedding and model width");
        app.add_option("--heads", heads, "attention heads");
        app.add_option("--layers", layers, "encoder layers");
        app.add_option("--feedforward", feedforward, "width of each layer's feed-forward block");
        app.add_option("--dropout", dropout);
        app.add_flag("--checkpoint-activations", checkpoint_activations,
                     "recompute each encoder layer's activations in backward instead of keeping them");
      },
      [&](int64_t vocab, int64_t classes) {
        return std::make_shared<examples::TransformerClassifier>(vocab, d_model, heads, layers, feedforward, classes,
                                                                 dropout, checkpoint_activations);
      });
}
