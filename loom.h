// Loom's convenience header: everything a program needs, as `#include <loom/loom.h>`
// (installed) or `#include "loom.h"` (in this source tree).
//
//   loom::Tensor w = loom::randn({3, 1}, loom::TensorOptions().requires_grad());
//   loom::Tensor loss = x.matmul(w).sub(y).pow(2).mean();
//   loss.backward();  // w.grad() now holds d loss / d w
#pragma once

#include "core/build_info.h"
#include "core/deterministic.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/generator.h"
#include "core/memory.h"
#include "core/ordered_dict.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/tensor.h"

#include "autograd/activation_checkpoint.h"
#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"

#include "core/safetensors.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "distributed/distributed.h"

#include "data/data.h"
#include "train/train.h"
