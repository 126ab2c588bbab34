#include "distributed/init.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "distributed/error.h"
#include "distributed/launch_env.h"
#include "distributed/process_group_gloo.h"
#include "distributed/process_group_nccl.h"
#include "distributed/tcp_store.h"

namespace loom::distributed {

namespace {

// The default group of this process: set by init_process_group, cleared by
// destroy_process_group.
struct DefaultGroup {
  std::mutex mutex;
  std::unique_ptr<ProcessGroup> group;
  int local_rank = 0;
};

DefaultGroup& state() {
  static DefaultGroup s;
  return s;
}

constexpr const char* kEnvHelp =
    " (a launcher sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for every process; see docs/distributed.md)";

template <typename T>
T required(const std::optional<T>& option, const std::optional<T>& env, const char* name) {
  if (option) return *option;
  if (env) return *env;
  throw DistributedError(std::string("init_process_group: the environment variable ") + name + " is not set" +
                         kEnvHelp);
}

ProcessGroup& group_locked(DefaultGroup& s) {
  LOOM_CHECK(s.group != nullptr, DistributedError,
             "no default process group: call loom::distributed::init_process_group() first");
  return *s.group;
}

// GLOO_SOCKET_IFNAME (PyTorch's name): the network interface Gloo binds to, where the
// machine's hostname does not resolve to an address the other hosts reach.
ProcessGroupGlooOptions gloo_options(const InitOptions& options) {
  ProcessGroupGlooOptions gloo;
  gloo.timeout(options.timeout_);
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) gloo.iface(iface);
  return gloo;
}

}  // namespace

void init_process_group(const std::string& backend, const InitOptions& options) {
  LOOM_CHECK(backend == "gloo" || backend == "nccl", DistributedError, "init_process_group: unknown backend '",
             backend, "' (the backends are \"gloo\", for CPU tensors, and \"nccl\", for CUDA tensors)");
  // Before the environment and the store: a build without NCCL fails the same everywhere.
  LOOM_CHECK(backend != "nccl" || is_nccl_available(), DistributedError, "init_process_group: ",
             nccl_unavailable_reason());
  DefaultGroup& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  LOOM_CHECK(s.group == nullptr, DistributedError,
             "init_process_group: the default process group exists already (destroy_process_group() first)");
  LaunchEnv env = read_launch_env();
  int rank = required(options.rank_, env.rank, "RANK");
  int world_size = required(options.world_size_, env.world_size, "WORLD_SIZE");
  std::string addr = required(options.master_addr_, env.master_addr, "MASTER_ADDR");
  int port = required(options.master_port_, env.master_port, "MASTER_PORT");
  bool local_known = env.sources.at("local_rank") != "rank";  // else LOCAL_RANK defaults to RANK
  int local_rank = local_known ? env.local_rank : rank;
  LOOM_CHECK(world_size >= 1 && rank < world_size, DistributedError, "init_process_group: rank ", rank,
             " is not in [0, ", world_size, ") (RANK and WORLD_SIZE)");
  LOOM_CHECK(port >= 1 && port <= 65535, DistributedError, "init_process_group: MASTER_PORT ", port,
             " is not in [1, 65535]");
  bool announce = options.print_environment_ && rank == 0;
  if (announce) std::fprintf(stderr, "loom.distributed: %s\n", env.describe().c_str());
  auto start = std::chrono::steady_clock::now();

  // Under torchrun the agent serves the store already: every rank joins it, under the keys
  // of this attempt (as PyTorch's workers do), so a restarted job starts afresh.
  bool agent = env.use_agent_store && !options.master_addr_ && !options.master_port_;
  std::string prefix = agent ? "/worker/attempt_" + std::to_string(env.restart_count) + "/" : "";
  auto store = std::make_shared<TCPStore>(addr, port, rank == 0 && !agent, options.timeout_, prefix);
  if (backend == "nccl") {  // one GPU per rank: cuda:LOCAL_RANK, else the current device
    s.group = std::make_unique<ProcessGroupNCCL>(std::move(store), rank, world_size,
                                                 ProcessGroupNCCLOptions().timeout(options.timeout_).device(local_known ? local_rank : -1));
  } else {
    s.group = std::make_unique<ProcessGroupGloo>(std::move(store), rank, world_size,
                                                 gloo_options(options));
  }
  s.local_rank = local_rank;
  if (announce) {
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "loom.distributed: rendezvous took %.3f s\n", took.count());
  }
}

bool is_initialized() {
  DefaultGroup& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.group != nullptr;
}

void destroy_process_group() {
  DefaultGroup& s = state();
  std::unique_ptr<ProcessGroup> group;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    group = std::move(s.group);
  }
  group.reset();  // outside the lock: it waits for the queued collectives
}

ProcessGroup& default_group() {
  DefaultGroup& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return group_locked(s);
}

int get_rank() { return default_group().rank(); }
int get_world_size() { return default_group().size(); }

int get_local_rank() {
  DefaultGroup& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  group_locked(s);
  return s.local_rank;
}

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op) { return default_group().all_reduce(tensor, op); }
std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) { return default_group().broadcast(tensor, root); }
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  return default_group().all_gather(outputs, input);
}
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  return default_group().reduce_scatter(output, inputs, op);
}
std::shared_ptr<Work> barrier() { return default_group().barrier(); }

}  // namespace loom::distributed
