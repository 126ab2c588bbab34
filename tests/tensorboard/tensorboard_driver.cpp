// Writes the TensorBoard logs that read_events.py checks with TensorBoard's own reader:
//
//   tensorboard_driver LOG_DIR
//
// The values are formulas both sides compute (read_events.py has the same ones):
//   scalar "loss/train" = 1 / (s + 1) and "lr" = 0.1 * 0.9^s, steps s = 0..19
//   add_scalars("loss", {train: s / 2, test: s / 4}), s = 0..4 (folders loss_train, loss_test)
//   text "config" at step 0 (kText below)
//   histogram "weights" at step 7: (i - 50) * 0.37 for i = 0..99, then 0, 0, 1e-13
//   histogram "activations" at step 8: i * i * 0.01 - 3 for i = 0..63, a (8, 8) float32 tensor
#include <cmath>
#include <cstdio>
#include <vector>

#include "loom.h"

using namespace loom;

namespace {
constexpr const char* kText = "lr = 0.1, hidden = **128**\nsecond line: üñí";
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tensorboard_driver LOG_DIR\n");
    return 2;
  }
  try {
    train::SummaryWriter tb(argv[1]);
    for (int s = 0; s < 20; ++s) {
      tb.add_scalar("loss/train", 1.0 / (s + 1), s);
      tb.add_scalar("lr", 0.1 * std::pow(0.9, s), s);
      if (s == 10) tb.flush();
    }
    for (int s = 0; s < 5; ++s) tb.add_scalars("loss", {{"train", s / 2.0}, {"test", s / 4.0}}, s);
    tb.add_text("config", kText, 0);
    std::vector<double> weights;
    for (int i = 0; i < 100; ++i) weights.push_back((i - 50) * 0.37);
    for (double v : {0.0, 0.0, 1e-13}) weights.push_back(v);
    tb.add_histogram("weights", from_vector(weights), 7);
    std::vector<float> activations;
    for (int i = 0; i < 64; ++i) activations.push_back(static_cast<float>(i * i * 0.01 - 3));
    tb.add_histogram("activations", from_vector(activations, {8, 8}), 8);
    for (const std::string& path : tb.paths()) std::printf("wrote %s\n", path.c_str());
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "tensorboard_driver: %s\n", e.what());
    return 1;
  }
  return 0;  // the writer's destructor flushed and closed the files
}
