#include "core/generator.h"

namespace loom {

Generator& default_generator() {
  static Generator gen;
  return gen;
}

}  // namespace loom
