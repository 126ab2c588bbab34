// init_process_group: the default process group of a job, set up from the environment a
// launcher gives each process: torchrun's, Slurm's, Open MPI's or Kubeflow's, read by
// read_launch_env (distributed/launch_env.h, Note [launch precedence]). PyTorch's names:
//
//   MASTER_ADDR, MASTER_PORT   where rank 0 serves the rendezvous store (Note [rendezvous]),
//                              or torchrun's agent does (TORCHELASTIC_USE_AGENT_STORE=True)
//   RANK, WORLD_SIZE           this process's rank in [0, WORLD_SIZE); Open MPI's mpirun
//                              sets OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE instead
//   LOCAL_RANK                 the rank on this machine (OMPI_COMM_WORLD_LOCAL_RANK);
//                              optional, defaults to RANK
//   GLOO_SOCKET_IFNAME         gloo: the network interface to use (e.g. eth0); unset, the
//                              machine's hostname (127.0.0.1 when the master is loopback)
//
// A value given in InitOptions wins over the environment; a missing or malformed one is a
// DistributedError naming the variable.
//
//   loom::distributed::init_process_group("gloo");
//   loom::distributed::all_reduce(grad, ReduceOp::AVG)->wait();
//   loom::distributed::destroy_process_group();
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace loom::distributed {

struct InitOptions {
  std::chrono::milliseconds timeout_ = std::chrono::minutes(30);  // rendezvous and each collective
  std::optional<int> rank_, world_size_, master_port_;
  std::optional<std::string> master_addr_;
  bool print_environment_ = false;  // rank 0 prints what the launcher set, and where it read it

  InitOptions& timeout(std::chrono::milliseconds t) { timeout_ = t; return *this; }
  InitOptions& rank(int r) { rank_ = r; return *this; }
  InitOptions& world_size(int n) { world_size_ = n; return *this; }
  InitOptions& master_addr(std::string a) { master_addr_ = std::move(a); return *this; }
  InitOptions& master_port(int p) { master_port_ = p; return *this; }
  InitOptions& print_environment(bool on) { print_environment_ = on; return *this; }
};

// Sets up the default group: "gloo" (CPU tensors) or "nccl" (CUDA tensors, one GPU per rank:
// cuda:LOCAL_RANK; Loom built with CUDA); an error if one exists already.
void init_process_group(const std::string& backend = "gloo", const InitOptions& options = {});
bool is_initialized();
// Runs the default group's queued collectives, then closes it (a no-op without one).
void destroy_process_group();

// Of the default group (DistributedError without one).
ProcessGroup& default_group();
int get_rank();
int get_world_size();
int get_local_rank();

// The default group's collectives (ProcessGroup's, see distributed/process_group.h).
std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM);
std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0);
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                     ReduceOp op = ReduceOp::SUM);
std::shared_ptr<Work> barrier();

}  // namespace loom::distributed
