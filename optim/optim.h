// All of loom::optim: optimizers, schedulers, gradient clipping and checkpoints.
#pragma once

#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
