// The draws of kernels::multinomial, shared by the CPU kernel (kernels/cpu/multinomial.cpp)
// and the CUDA one (kernels/cuda/multinomial.cu), so one seed gives the same samples on
// both.
//
// Note [multinomial draws]
// Every random number is tied to a (row, position) pair, never to a thread, and uses the
// words of element i of the Philox stream at the reserved offset (kernels/math/random_math.h):
// - With replacement, sample s of row r takes element r * num_samples + s as a double u
//   in [0, 1) and is the first category whose running sum of weights exceeds u * total.
//   The sums run in float64, in category order, the same on both devices.
// - Without replacement (PyTorch's exponential race), category c of row r takes element
//   r * categories + c: its key is w_c / E_c with E_c = -log(u) exponential; the samples
//   are the categories of the num_samples largest keys (kernels::sort, descending), which
//   is drawing one by one without replacement in proportion to the weights. A zero weight
//   gets key -1 and is never drawn. log is not correctly rounded on either device, so a
//   GPU key may differ from the CPU's in its last bit; the order differs only if two keys
//   fall within that ulp (about 1e-16 relative).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "kernels/math/random_math.h"

namespace loom::kernels::multinomial_math {

// What is wrong with a row of weights, if anything, and how many weights are positive.
enum class RowProblem : int32_t { None = 0, Negative, NotFinite, ZeroSum };

struct RowCheck {
  RowProblem problem = RowProblem::None;
  int64_t nonzero = 0;
};

template <typename T>
LOOM_HOST_DEVICE inline double weight(T w) {
  return double(opmath_t<T>(w));
}

template <typename T>
LOOM_HOST_DEVICE inline RowCheck check_row(const T* row, int64_t categories) {
  RowCheck check;
  double total = 0;
  for (int64_t c = 0; c < categories; ++c) {
    const double w = weight(row[c]);
    if (w != w || w - w != 0) check.problem = RowProblem::NotFinite;  // NaN or +-inf
    else if (w < 0 && check.problem == RowProblem::None) check.problem = RowProblem::Negative;
    if (w > 0) ++check.nonzero, total += w;
  }
  if (check.problem == RowProblem::None && !(total > 0)) check.problem = RowProblem::ZeroSum;
  if (check.problem == RowProblem::None && total - total != 0) check.problem = RowProblem::NotFinite;  // overflow
  return check;
}

// The ValueError for a row that cannot be drawn from (host only).
inline void throw_if_invalid(const RowCheck& check, int64_t row, int64_t categories, int64_t num_samples,
                             bool replacement) {
  const char* op = "multinomial";
  LOOM_CHECK(check.problem != RowProblem::Negative && check.problem != RowProblem::NotFinite, ValueError, op,
             ": row ", row, " of the probabilities contains inf, NaN or a negative weight (expected finite, "
             "non-negative weights)");
  LOOM_CHECK(check.problem != RowProblem::ZeroSum, ValueError, op, ": row ", row,
             " of the probabilities sums to 0 (expected at least one positive weight)");
  LOOM_CHECK(replacement || check.nonzero >= num_samples, ValueError, op, ": row ", row, " has ", check.nonzero,
             " positive weights of ", categories, ", too few to draw ", num_samples,
             " samples without replacement");
}

// Sample `element` of a row with replacement: the first category whose running sum
// exceeds u * total (zero weights are never chosen; a u * total rounded up to the total
// gives the last positive one).
template <typename T>
LOOM_HOST_DEVICE inline int64_t draw_with_replacement(const T* row, int64_t categories, int64_t element,
                                                      uint64_t seed, uint64_t offset) {
  const auto words = random_math::words_of(element, seed, offset);
  double total = 0;
  for (int64_t c = 0; c < categories; ++c) total += weight(row[c]);
  const double target = Philox::to_unit_double(words.first, words.second) * total;
  double running = 0;
  int64_t last = 0;
  for (int64_t c = 0; c < categories; ++c) {
    const double w = weight(row[c]);
    if (!(w > 0)) continue;
    running += w;
    last = c;
    if (running > target) return c;
  }
  return last;
}

// The race key of weight w at `element` (without replacement): larger is drawn earlier.
LOOM_HOST_DEVICE inline double race_key(double w, int64_t element, uint64_t seed, uint64_t offset) {
  if (!(w > 0)) return -1.0;
  const auto words = random_math::words_of(element, seed, offset);
  const double u = 1.0 - Philox::to_unit_double(words.first, words.second);  // (0, 1]
  const double e = -std::log(u);
  return e > 0 ? w / e : HUGE_VAL;  // u == 1: an exponential of 0, drawn first
}

}  // namespace loom::kernels::multinomial_math
