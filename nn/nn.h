// All of loom::nn: modules, layers, losses, initialisation and the functional forms.
#pragma once

#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/multihead_attention.h"
#include "nn/rnn.h"
#include "nn/sequential.h"
#include "nn/summary.h"
#include "nn/transformer.h"
