// Reading one entry of a state dict loaded from a file (hostile input), shared by the
// load_state_dict checks of the optimizers, the schedulers and the gradient scaler.
#pragma once

#include <set>
#include <string>

#include "optim/optimizer.h"

namespace loom::optim {

// "float32 of shape (2, 3)", or "an undefined tensor": what an error says it got.
std::string describe(const Tensor& t);

// state[key] as one element of `dtype`, or a ValueError naming `who`, the key and what
// was found.
const Tensor& state_entry(const StateDict& state, const std::string& key, DType dtype, const std::string& who);

// state[key] as an int64 count in [0, 2^62], or a ValueError.
int64_t count_entry(const StateDict& state, const std::string& key, const std::string& who);
// state[key] as a float64 value that is not NaN, or a ValueError.
double real_entry(const StateDict& state, const std::string& key, const std::string& who);
// A ValueError listing the keys of state not in `known`: a state dict of something else,
// or a corrupt one.
void check_no_unexpected_keys(const StateDict& state, const std::set<std::string>& known, const std::string& who);

}  // namespace loom::optim
