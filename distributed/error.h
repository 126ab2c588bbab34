// DistributedError: what the distributed layer throws when a rendezvous or a collective
// fails (an unreachable master, a duplicate rank, a world-size mismatch, a timeout, a peer
// that went away). Argument errors of a collective (a non-contiguous tensor, a wrong
// device or dtype, mismatched sizes) throw the usual ValueError/DeviceError/DTypeError/
// ShapeError of core/error.h.
#pragma once

#include "core/error.h"

namespace loom::distributed {

class DistributedError : public Error { using Error::Error; };

}  // namespace loom::distributed
