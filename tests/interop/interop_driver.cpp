// The Loom half of the PyTorch interop test (tests/interop/torch_interop.py runs it):
//
//   interop_driver export DIR   trains the model below a few steps, then writes
//                               DIR/loom_weights.safetensors   (optim::save_weights)
//                               DIR/loom_outputs.safetensors   tokens and eval-mode logits
//                               DIR/loom_dtypes.safetensors    known values in every dtype
//   interop_driver import DIR   loads DIR/torch_weights.safetensors (written by PyTorch) with
//                               optim::load_weights, checks the logits against
//                               DIR/torch_outputs.safetensors to 1e-5 and the values of
//                               DIR/torch_dtypes.safetensors exactly
//
// The model is tiny_lm.h's TinyLM: Embedding(13, 8) -> Dropout(0.2) -> LSTM(8, 16, 2 layers,
// bidirectional, batch_first, dropout 0.1) -> Linear(32, 13); torch_interop.py builds the
// same one.
// Exit status: 0 when every check passes, 1 when one fails, 2 on a usage error.
#include <cmath>
#include <iostream>
#include <memory>
#include <string>

#include "core/safetensors.h"
#include "loom.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "tiny_lm.h"

using namespace loom;

namespace {

constexpr int64_t kVocab = 13, kEmbed = 8, kHidden = 16;

std::shared_ptr<test::TinyLM> make_model() {
  return std::make_shared<test::TinyLM>(test::TinyLMOptions{kVocab, kEmbed, kHidden, /*bidirectional=*/true});
}

// The values each dtype's tensor holds in *_dtypes.safetensors, as (3, 4) and transposed:
// element i of the row-major (3, 4) tensor is f(i); torch_interop.py computes the same.
Tensor known_values(DType dt) {
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) {
    switch (dt) {
      case DType::Int64: v.push_back(double(i - 6) * 3e9); break;  // beyond int32
      case DType::Int32: v.push_back(double(i - 6) * 1e5); break;
      case DType::Bool: v.push_back(i % 3 == 0 ? 1 : 0); break;
      default: v.push_back(double(i - 6) * 0.375); break;  // exact in every float format
    }
  }
  return from_vector<double>(v, {3, 4}, TensorOptions(dt));
}

const DType kDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

int do_export(const std::string& dir) {
  manual_seed(2024);
  auto model = make_model();
  optim::Adam opt(model->parameters(), 1e-2);
  for (int step = 0; step < 3; ++step) {
    Tensor tokens = randint(0, kVocab, {4, 7});
    Tensor targets = randint(0, kVocab, {4, 7});
    opt.zero_grad();
    nn::functional::cross_entropy(model->forward(tokens).reshape({-1, kVocab}), targets.reshape({-1})).backward();
    opt.step();
  }
  model->eval();
  Tensor tokens = randint(0, kVocab, {3, 6});
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = model->forward(tokens);
  }
  optim::save_weights(dir + "/loom_weights.safetensors", *model);
  save_safetensors(dir + "/loom_outputs.safetensors", {{"tokens", tokens}, {"logits", logits}},
                   {{"producer", "loom interop_driver"}});
  TensorMap dtypes;
  for (DType dt : kDTypes) {
    dtypes[std::string("dtype.") + dtype_name(dt)] = known_values(dt);
    dtypes[std::string("dtype.") + dtype_name(dt) + ".t"] = known_values(dt).t();  // non-contiguous
  }
  save_safetensors(dir + "/loom_dtypes.safetensors", dtypes);
  std::cout << "interop_driver: exported weights, outputs " << shape_str(logits.sizes()) << " and "
            << dtypes.size() << " dtype tensors to " << dir << "\n";
  return 0;
}

int do_import(const std::string& dir) {
  manual_seed(1);  // a different initialisation: every value must come from the file
  auto model = make_model();
  optim::load_weights(dir + "/torch_weights.safetensors", *model, /*strict=*/true);
  model->eval();
  const SafetensorsFile expected = load_safetensors(dir + "/torch_outputs.safetensors");
  Tensor got;
  {
    NoGradGuard no_grad;
    got = model->forward(expected.tensors.at("tokens"));
  }
  const Tensor& want = expected.tensors.at("logits");
  int failures = 0;
  if (got.sizes() != want.sizes()) {
    std::cerr << "interop_driver: logits " << shape_str(got.sizes()) << " but PyTorch's are " << shape_str(want.sizes()) << "\n";
    return 1;
  }
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double max_diff = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = std::abs(g[i] - w[i]);
    max_diff = std::max(max_diff, d);
    if (!(d <= 1e-5 * (1 + std::abs(w[i])))) {
      if (failures++ < 5) std::cerr << "interop_driver: logits element " << i << ": Loom " << g[i] << ", PyTorch " << w[i] << "\n";
    }
  }
  std::cout << "interop_driver: Loom's logits from PyTorch's weights: max |diff| " << max_diff << " over " << g.size()
            << " values\n";

  const SafetensorsFile dtypes = load_safetensors(dir + "/torch_dtypes.safetensors");
  for (DType dt : kDTypes) {
    for (const bool transposed : {false, true}) {
      const std::string key = std::string("dtype.") + dtype_name(dt) + (transposed ? ".t" : "");
      const Tensor want_t = transposed ? known_values(dt).t() : known_values(dt);
      auto it = dtypes.tensors.find(key);
      if (it == dtypes.tensors.end() || it->second.dtype() != dt || it->second.sizes() != want_t.sizes() ||
          it->second.to_vector<double>() != want_t.to_vector<double>()) {
        std::cerr << "interop_driver: " << key << " from PyTorch does not hold the expected values\n";
        ++failures;
      }
    }
  }
  std::cout << "interop_driver: import " << (failures ? "FAILED" : "passed") << "\n";
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "export" && std::string(argv[1]) != "import")) {
    std::cerr << "usage: interop_driver export|import DIR\n";
    return 2;
  }
  try {
    return std::string(argv[1]) == "export" ? do_export(argv[2]) : do_import(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "interop_driver: " << e.what() << "\n";
    return 1;
  }
}
