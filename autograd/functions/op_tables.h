// The elementwise ops' enums and table rows (Note [op tables] in kernels/math/
// elementwise_ops.h), as the layers above autograd/ name them: the ONNX exporter maps each
// recorded elementwise op by its enum (onnx/convert_ops.cpp).
#pragma once

#include "kernels/math/elementwise_ops.h"

namespace loom {

using kernels::BinaryOp;
using kernels::op_info;
using kernels::UnaryOp;

}  // namespace loom
