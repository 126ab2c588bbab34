// Random padded token batches for the tests that train the flagship's model on them
// (gradient accumulation, DistributedDataParallel): n texts of up to t tokens from a
// vocabulary of 20 (0 is padding), with labels in {0, 1, 2}.
#pragma once

#include "loom.h"

namespace loom::test {

struct Texts {
  Tensor tokens, lengths, labels;  // (N, T) with padding 0 after each length, (N), (N)
  Texts slice(int64_t start, int64_t n) const {
    return {tokens.narrow(0, start, n), lengths.narrow(0, start, n), labels.narrow(0, start, n)};
  }
};

inline Texts random_texts(int64_t n, int64_t t) {
  Texts x{randint(1, 20, {n, t}), randint(1, t + 1, {n}), randint(0, 3, {n})};
  const Tensor position = arange(t).reshape({1, t}).expand({n, t});
  x.tokens = x.tokens.masked_fill(position.ge(x.lengths.reshape({n, 1})), 0);
  return x;
}

}  // namespace loom::test
