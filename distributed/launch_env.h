// The environment launchers give each process of a job, read into one LaunchEnv: a pure
// function of a table of variables (no process, no socket), so every launcher's set can be
// tested as a table.
//
// Note [launch precedence]
// Several launchers may have left variables at once (torchrun inside an `srun` step, mpirun
// under a Slurm allocation), so the rank and world size come from the first of:
//   1. RANK + WORLD_SIZE          torchrun, loomrun, Kubeflow's PyTorchJob, by hand
//   2. PET_NNODES + PET_NODE_RANK Kubeflow's torchrun arguments, the program started directly
//                                 by the PyTorchJob with one process per pod
//                                 (PET_NPROC_PER_NODE unset or 1)
//   3. OMPI_COMM_WORLD_RANK + _SIZE  Open MPI's mpirun
//   4. SLURM_PROCID + SLURM_NTASKS   Slurm's srun
// and the other fields from the same launcher where it has them, else from the next. The
// master is MASTER_ADDR/MASTER_PORT, else PET_MASTER_ADDR/PET_MASTER_PORT, else (under
// Slurm) the first host of SLURM_JOB_NODELIST and a port derived from SLURM_JOB_ID.
// The chosen launcher's variables must be whole and well formed: a half set (RANK without
// WORLD_SIZE), a value out of range, text that is not a number,
// or RANK and SLURM_PROCID disagreeing in a world of the same size, is a DistributedError
// naming the variables and their values.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::distributed {

// A variable's value, or nullopt when it is not set (std::getenv's answer in a process).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

struct LaunchEnv {
  std::string launcher;  // "torchrun", "kubeflow", "mpirun", "slurm", "env" (RANK/WORLD_SIZE), "" (none)
  std::optional<int> rank, world_size;
  int local_rank = 0, local_world_size = 1, node_rank = 0;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  int restart_count = 0;           // TORCHELASTIC_RESTART_COUNT
  std::string run_id;              // TORCHELASTIC_RUN_ID, else SLURM_JOB_ID
  bool use_agent_store = false;    // TORCHELASTIC_USE_AGENT_STORE: torchrun's agent serves the store
  // Where each field came from: field name -> the variable(s), as printed by describe().
  std::map<std::string, std::string> sources;

  // One line: what was found and from where, for rank 0 to print.
  std::string describe() const;
};

LaunchEnv read_launch_env(const EnvLookup& env);
LaunchEnv read_launch_env(const std::map<std::string, std::string>& env);
// This process's environment.
LaunchEnv read_launch_env();

// Slurm's hostlist syntax: "node[01-04,07]" -> node01 node02 node03 node04 node07;
// "gpu-a[1-2]-ib,login3"; several bracket groups expand as a product
// ("rack[1-2]-node[01-02]": rack1-node01, rack1-node02, rack2-node01, rack2-node02).
// A malformed list is a DistributedError naming `what` (the variable) and the list.
std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what = "hostlist");

// Slurm's tasks-per-node list, one count per node: "2(x3),1" -> 2 2 2 1.
std::vector<int> expand_tasks_per_node(const std::string& list, const std::string& what = "SLURM_TASKS_PER_NODE");

}  // namespace loom::distributed
