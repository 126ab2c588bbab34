// A Transformer text classifier on the bundled movie-review sentences, beside the LSTM
// flagship (text_classification): Embedding + learned positions -> TransformerEncoder
// (pre-norm, padding masks from the lengths) -> mean over each text's own tokens -> Linear,
// as a PyTorch script builds it from nn.TransformerEncoder.
//
//   ./build/cpu/examples/transformer_classification [--epochs 10] [--layers 2] [--d-model 64]
//
// At sequence length 1,024 (the bundled texts are under 64 tokens, so padded), with the
// activations recomputed in backward (each layer's blocks nested in its checkpoint, the
// attention's outputs kept: under half the memory for about 1.2x the step):
//   ./build/cpu/examples/transformer_classification --max-length 1024 --max-positions 1024 \
//       --pad-to-max-length --batch-size 8 --checkpoint-activations --checkpoint-blocks \
//       --checkpoint-keep-attention
#include "loom.h"
#include "text_classifier_program.h"
#include "transformer_classification_model.h"

using namespace loom;

int main(int argc, char** argv) {
  int64_t d_model = 64, heads = 4, layers = 2, feedforward = 128;
  double dropout = 0.1;
  int64_t max_positions = examples::TransformerClassifier::kMaxPositions;
  bool checkpoint_activations = false, checkpoint_blocks = false, keep_attention = false;
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
        app.add_flag("--checkpoint-blocks", checkpoint_blocks,
                     "the same, each layer's self-attention and feed-forward blocks apart (less memory at 2-6 layers); "
                     "with --checkpoint-activations, the blocks nested in the layers (less still)");
        app.add_flag("--checkpoint-keep-attention", keep_attention,
                     "with either: keep the attention's outputs instead of recomputing them (faster, more memory)");
        app.add_option("--max-positions", max_positions, "the longest sequence the learned positions cover")
            ->check(CLI::PositiveNumber);
      },
      [&](int64_t vocab, int64_t classes) {
        return std::make_shared<examples::TransformerClassifier>(vocab, d_model, heads, layers, feedforward, classes,
                                                                 dropout, checkpoint_activations, checkpoint_blocks,
                                                                 max_positions, keep_attention);
      });
}
