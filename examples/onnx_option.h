// --export-onnx PATH for the examples: after training, the model is written as ONNX
// (docs/onnx.md), its batch and sequence axes dynamic, for ONNX Runtime and the like.
//
//   examples::OnnxOption onnx_option;  onnx_option.add_to(app);
//   ... after training: onnx_option.export_model<2>(model, example_texts(vocab, device), {"tokens", "lengths"});
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "loom.h"
#if LOOM_WITH_ONNX
#include "onnx/export.h"
#endif

namespace examples {

// Example inputs of a text model's export: token ids (3, 7) in [1, vocab) on `device` and
// lengths (3) on the CPU, the longest 7 (any sizes: the axes stay dynamic, onnx/sizes.h).
inline std::vector<loom::Tensor> example_texts(int64_t vocab, loom::Device device) {
  const loom::Tensor tokens = loom::randint(1, vocab, {3, 7}).to(device);
  return {tokens, loom::tensor<int64_t>({7, 4, 2})};
}

struct OnnxOption {
  std::string path;
  std::string from;  // --export-from: a checkpoint exported without training (where a program offers it)

  void add_to(CLI::App& app) {
    app.add_option("--export-onnx", path, "after training, write the model to this ONNX file (docs/onnx.md)")
        ->check([](const std::string&) -> std::string {
#if LOOM_WITH_ONNX
          return "";
#else
          return "this build has no ONNX export (install libonnx-dev and libprotobuf-dev, then configure again)";
#endif
        });
  }
  // --export-from CKPT: export a saved checkpoint's model (its vocabulary beside it) to
  // --export-onnx and stop, without training.
  void add_export_from(CLI::App& app) {
    app.add_option("--export-from", from,
                   "write this checkpoint's model (--checkpoint's or --keep-best's, its vocabulary beside it) "
                   "to --export-onnx without training")
        ->needs(app.get_option("--export-onnx"));
  }

  // With --export-from: loads that checkpoint's model into `model` (a text model over `vocab`
  // words), writes it to --export-onnx and returns true; false otherwise.
  template <typename Model>
  bool export_saved(const Model& model, int64_t vocab, loom::Device device) const {
    if (from.empty()) return false;
    loom::optim::load_checkpoint(from, {model.get()});
    std::printf("loaded %s\n", from.c_str());
    export_model<2>(model, example_texts(vocab, device), {"tokens", "lengths"});
    return true;
  }

  // Traces model(inputs...) (N inputs) and writes it, when --export-onnx was given.
  template <size_t N, typename Model>
  void export_model(const Model& model, const std::vector<loom::Tensor>& inputs,
                    std::vector<std::string> input_names) const {
    if (path.empty()) return;
#if LOOM_WITH_ONNX
    loom::onnx::export_model<N>(model, inputs, path, loom::onnx::ExportOptions().input_names(std::move(input_names)));
    std::printf("wrote %s (ONNX)\n", path.c_str());
#endif
  }
};


}  // namespace examples
