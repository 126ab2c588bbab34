// Reading one entry of a state dict loaded from a file (hostile input), shared by the
// load_state_dict checks of the optimizers, the schedulers and the gradient scaler.
#pragma once

#include <string>

#include "optim/optimizer.h"

namespace loom::optim {

// "float32 of shape (2, 3)", or "an undefined tensor": what an error says it got.
std::string describe(const Tensor& t);

// state[key] as one element of `dtype`, or a ValueError naming `who`, the key and what
// was found.
const Tensor& state_entry(const StateDict& state, const std::string& key, DType dtype, const std::string& who);

}  // namespace loom::optim
