// The distributed layer (docs/distributed.md): process groups and their collectives.
#pragma once

#include "distributed/error.h"
#include "distributed/init.h"
#include "distributed/process_group.h"
#include "distributed/process_group_gloo.h"
#include "distributed/tcp_store.h"
