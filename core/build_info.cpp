#include "core/build_info.h"

namespace loom {

bool built_with_cuda() {
#ifdef LOOM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace loom
