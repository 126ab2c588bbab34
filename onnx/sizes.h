// Which sizes of a traced forward follow the inputs' dynamic axes: the provenance of sizes.
//
// Note [size provenance]
// A forward computes sizes on the host (x.size(0), zeros({B, hidden}), x.select(1, T - 1)) as
// plain integers, so one trace cannot tell a batch of 6 from a hidden size of 6. The export
// runs the forward more than once (onnx/export.cpp): at the example's sizes, once more per
// dynamic axis with that axis grown by one (its inputs' last slice repeated), and once with
// every axis grown by two, to check. A size argument of a recorded op (a reshape's sizes, a
// select's index, a zeros' sizes, an arange's end) or a dim of an output that moves when an
// axis grows depends on that axis; one that never moves is a constant. Each size is fitted to
//     scale · ∏ axes + offset
// (B, B·T, T - 1, 4·T) and checked against every run; a size of another form (T / 2, B + T), a
// forward whose ops or non-size arguments change with the sizes, or a constant it reads that
// changes (a tensor made on the host from a size) is refused, never guessed.
// The graph then computes each dependent size from its inputs' Shape and writes the rest as
// constants: equal example sizes, a model size equal to one and size-1 axes all export.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loom::onnx {

// scale · ∏ symbols + offset; a constant (offset) where there are no symbols.
struct SymSize {
  int64_t scale = 0;
  std::vector<size_t> symbols;  // indices into the export's dynamic axes, ascending
  int64_t offset = 0;

  static SymSize constant(int64_t v) { return {0, {}, v}; }
  bool is_constant() const { return symbols.empty(); }
  // Exactly one axis (scale 1, offset 0): the axis itself.
  bool is_symbol() const { return symbols.size() == 1 && scale == 1 && offset == 0; }
  int64_t at(const std::vector<int64_t>& sizes) const;  // its value at these axis sizes
  bool operator==(const SymSize& o) const = default;
};

// "6·batch·sequence - 1": for messages and tests.
std::string to_string(const SymSize& s, const std::vector<std::string>& names);

// The sizes of the dynamic axes in each run (Note [size provenance]): run 0 the example's,
// run 1 + s axis s grown by one, the last run every axis grown by two.
std::vector<std::vector<int64_t>> run_sizes(const std::vector<int64_t>& example);

// A size's form from its value in each run (runs as run_sizes made them), or nullopt where no
// scale · ∏ axes + offset fits every run.
std::optional<SymSize> fit_size(const std::vector<int64_t>& values, const std::vector<std::vector<int64_t>>& runs);

// Which arguments of a recorded op are sizes (may follow an axis); the others must not change.
bool is_size_int(const std::string& op, size_t index);
bool is_size_float(const std::string& op, size_t index);

// `t` with `by` more entries along `axis`, its last slice repeated: an input at a grown size.
Tensor grow(const Tensor& t, int64_t axis, int64_t by);

}  // namespace loom::onnx
