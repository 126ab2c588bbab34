// The distributed layer (docs/distributed.md): process groups and their collectives, and
// DistributedDataParallel over them.
#pragma once

#include "distributed/data_parallel.h"
#include "distributed/error.h"
#include "distributed/init.h"
#include "distributed/launch_env.h"
#include "distributed/process_group.h"
#include "distributed/process_group_gloo.h"
#include "distributed/process_group_nccl.h"
#include "distributed/tcp_store.h"
