// read_launch_env on tables of variables as each launcher sets them (torchrun, Slurm's srun,
// Open MPI's mpirun, Kubeflow's PyTorchJob), their mixes and every malformed value; Slurm's
// host list and tasks-per-node syntax. No process is started.
#include <map>
#include <string>
#include <vector>

#include "distributed/error.h"
#include "distributed/launch_env.h"
#include "test_util.h"

using namespace loom::distributed;
using loom::test::require_throws_with;
using Env = std::map<std::string, std::string>;
using Hosts = std::vector<std::string>;

namespace {

// What torchrun --nnodes 2 --nproc-per-node 4 gives the second process of node 1.
Env torchrun_env() {
  return {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"},
          {"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_RUN_ID", "job-7"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
}

// What srun --nodes 3 --ntasks 5 gives task 3 (nodes get 2, 2, 1 tasks).
Env slurm_env() {
  return {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
          {"SLURM_TASKS_PER_NODE", "2(x2),1"}, {"SLURM_JOB_NODELIST", "gpu-a[07-08]-ib,login3"},
          {"SLURM_JOB_ID", "123456"}};
}

}  // namespace

TEST_CASE("expand_hostlist: Slurm's documented forms", "[launch_env]") {
  CHECK(expand_hostlist("node[01-04,07]") == Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("gpu-a[1-2]-ib,login3") == Hosts{"gpu-a1-ib", "gpu-a2-ib", "login3"});
  CHECK(expand_hostlist("rack[1-2]-node[01-02]") ==
        Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"});
  CHECK(expand_hostlist("login3") == Hosts{"login3"});
  CHECK(expand_hostlist("a,b[9-11],c") == Hosts{"a", "b9", "b10", "b11", "c"});
  CHECK(expand_hostlist("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand_hostlist("n[5]") == Hosts{"n5"});
  CHECK(expand_hostlist("[1-2]x") == Hosts{"1x", "2x"});
}

TEST_CASE("expand_hostlist: a malformed list is a DistributedError naming the variable", "[launch_env]") {
  const std::string v = "SLURM_JOB_NODELIST";
  auto bad = [&](const std::string& list, const std::string& why) {
    require_throws_with<DistributedError>([&] { expand_hostlist(list, v); }, {v + "='" + list + "'", why});
  };
  bad("", "empty");
  bad("node[01-04", "'[' without its ']'");
  bad("node01]", "']' without its '['");
  bad("node[]", "empty [] group");
  bad("node[a-b]", "'a-b' in [a-b] is not a number");
  bad("node[4-1]", "runs backwards");
  bad("node[1-2-3]", "is not a number or a range");
  bad("node[1,]", "empty entry");
  bad("node[[1]]", "nested");
  bad("a,,b", "empty host name");
  bad("a,", "empty host name");
  bad("n[0-999999999]", "more than 2^20 hosts");
  bad("n[0-1023]m[0-1023]x[0-1]", "more than 2^20 hosts");
}

TEST_CASE("expand_tasks_per_node: counts and repeats", "[launch_env]") {
  CHECK(expand_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(expand_tasks_per_node("4") == std::vector<int>{4});
  CHECK(expand_tasks_per_node("1,3(x2)") == std::vector<int>{1, 3, 3});
  for (const char* list : {"", "2(x", "2(3)", "x2", "2(x3)1", "2,", "-1", "2(x)"}) {
    require_throws_with<DistributedError>([&] { expand_tasks_per_node(list); },
                                          {"SLURM_TASKS_PER_NODE='" + std::string(list) + "'"});
  }
}

TEST_CASE("read_launch_env: torchrun's variables", "[launch_env]") {
  LaunchEnv e = read_launch_env(torchrun_env());
  CHECK(e.launcher == "torchrun");
  CHECK(*e.rank == 5);
  CHECK(*e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(*e.master_addr == "10.0.0.1");
  CHECK(*e.master_port == 29400);
  CHECK(e.restart_count == 2);
  CHECK(e.run_id == "job-7");
  CHECK(e.use_agent_store);
  CHECK(e.sources.at("rank") == "RANK");
  CHECK(e.sources.at("node_rank") == "GROUP_RANK");
  std::string line = e.describe();
  CHECK(line.find("launched by torchrun: rank 5 (RANK) of 8 (WORLD_SIZE)") != std::string::npos);
  CHECK(line.find("10.0.0.1 (MASTER_ADDR):29400 (MASTER_PORT)") != std::string::npos);
  CHECK(line.find("torchrun's agent store") != std::string::npos);

  Env env = torchrun_env();
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  CHECK_FALSE(read_launch_env(env).use_agent_store);
}

TEST_CASE("read_launch_env: Slurm's srun", "[launch_env]") {
  LaunchEnv e = read_launch_env(slurm_env());
  CHECK(e.launcher == "slurm");
  CHECK(*e.rank == 3);
  CHECK(*e.world_size == 5);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);  // node 1 of 2(x2),1
  CHECK(e.node_rank == 1);
  CHECK(*e.master_addr == "gpu-a07-ib");
  CHECK(*e.master_port == 15000 + 123456 % 20000);
  CHECK(e.sources.at("master_port") == "SLURM_JOB_ID");
  CHECK(e.run_id == "123456");
  CHECK_FALSE(e.use_agent_store);

  Env env = slurm_env();
  env["SLURM_NODEID"] = "2";
  env["SLURM_LOCALID"] = "0";
  CHECK(read_launch_env(env).local_world_size == 1);  // the last node has one task
  env["SLURM_NTASKS_PER_NODE"] = "3";                  // --ntasks-per-node wins over the list
  env["MASTER_PORT"] = "29500";
  env["MASTER_ADDR"] = "head";
  LaunchEnv f = read_launch_env(env);
  CHECK(f.local_world_size == 3);
  CHECK(*f.master_port == 29500);
  CHECK(*f.master_addr == "head");

  env = slurm_env();
  env["SLURM_NODEID"] = "3";
  require_throws_with<DistributedError>([&] { read_launch_env(env); },
                                        {"SLURM_TASKS_PER_NODE='2(x2),1' lists 3 nodes", "SLURM_NODEID=3"});
  env = slurm_env();
  env["SLURM_JOB_NODELIST"] = "gpu[1-";
  require_throws_with<DistributedError>([&] { read_launch_env(env); }, {"SLURM_JOB_NODELIST='gpu[1-'"});
  env = slurm_env();
  env["SLURM_LOCALID"] = "2";  // node 1 has 2 tasks
  require_throws_with<DistributedError>([&] { read_launch_env(env); },
                                        {"local rank 2 is not in [0, 2)", "SLURM_LOCALID", "SLURM_TASKS_PER_NODE"});
}

TEST_CASE("read_launch_env: Open MPI's mpirun", "[launch_env]") {
  LaunchEnv e = read_launch_env(Env{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                    {"OMPI_COMM_WORLD_NODE_RANK", "1"}, {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "1234"}});
  CHECK(e.launcher == "mpirun");
  CHECK(*e.rank == 2);
  CHECK(*e.world_size == 4);
  CHECK(e.local_rank == 0);
  CHECK(e.local_world_size == 2);
  CHECK(e.node_rank == 1);
  CHECK(e.sources.at("rank") == "OMPI_COMM_WORLD_RANK");
}

TEST_CASE("read_launch_env: Kubeflow's PyTorchJob", "[launch_env]") {
  // The program as the pod's command, one process per pod: PET_* and the master.
  LaunchEnv e = read_launch_env(Env{{"PET_NNODES", "4"}, {"PET_NODE_RANK", "3"}, {"PET_NPROC_PER_NODE", "1"},
                                    {"PET_MASTER_ADDR", "job-master-0"}, {"PET_MASTER_PORT", "23456"}});
  CHECK(e.launcher == "kubeflow");
  CHECK(*e.rank == 3);
  CHECK(*e.world_size == 4);
  CHECK(e.node_rank == 3);
  CHECK(*e.master_addr == "job-master-0");
  CHECK(*e.master_port == 23456);
  CHECK(e.sources.at("master_addr") == "PET_MASTER_ADDR");

  // PyTorchJob's own MASTER_ADDR/RANK/WORLD_SIZE win over PET_*.
  LaunchEnv f = read_launch_env(Env{{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"MASTER_ADDR", "job-master-0"},
                                    {"MASTER_PORT", "23456"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  CHECK(f.launcher == "kubeflow");
  CHECK(f.sources.at("rank") == "RANK");
  CHECK(f.sources.at("master_addr") == "MASTER_ADDR");

  require_throws_with<DistributedError>(
      [] { read_launch_env(Env{{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"PET_NPROC_PER_NODE", "4"}}); },
      {"PET_NPROC_PER_NODE=4", "torchrun"});
}

TEST_CASE("read_launch_env: precedence when launchers nest", "[launch_env]") {
  // torchrun started by one srun task per node: RANK counts torchrun's workers.
  Env env = slurm_env();
  env.insert({{"RANK", "6"}, {"WORLD_SIZE", "12"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "4"},
              {"GROUP_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "r"}});
  LaunchEnv e = read_launch_env(env);
  CHECK(e.launcher == "torchrun");
  CHECK(*e.rank == 6);
  CHECK(e.local_rank == 2);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(*e.master_addr == "gpu-a07-ib");  // no MASTER_ADDR: Slurm's first host

  // RANK set by hand beside srun, for the same world: they must agree.
  env = slurm_env();
  env.insert({{"RANK", "0"}, {"WORLD_SIZE", "5"}});
  require_throws_with<DistributedError>([&] { read_launch_env(env); },
                                        {"RANK=0 but SLURM_PROCID=3", "world of 5", "disagree"});
  env["RANK"] = "3";
  CHECK(*read_launch_env(env).rank == 3);

  // Launchers around torchrun leave half sets and values that are not counts: they are
  // not read when RANK and WORLD_SIZE are there (an elastic PyTorchJob, an salloc shell).
  LaunchEnv around = read_launch_env(Env{{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"PET_NNODES", "1:4"},
                                         {"PET_NPROC_PER_NODE", "auto"}, {"SLURM_NTASKS", "2"},
                                         {"TORCHELASTIC_RUN_ID", "r"}});
  CHECK(around.launcher == "torchrun");
  CHECK(*around.world_size == 8);
  CHECK_FALSE(read_launch_env(Env{{"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}}).rank);  // salloc, no srun

  // Open MPI before Slurm (mpirun inside an allocation).
  env = slurm_env();
  env.insert({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  CHECK(read_launch_env(env).launcher == "mpirun");
}

TEST_CASE("read_launch_env: partial, out-of-range and malformed values", "[launch_env]") {
  auto bad = [](Env env, std::vector<std::string> parts) {
    require_throws_with<DistributedError>([&] { read_launch_env(env); }, parts);
  };
  bad({{"RANK", "1"}}, {"RANK=1 is set but WORLD_SIZE is not set"});
  bad({{"WORLD_SIZE", "2"}}, {"WORLD_SIZE=2 is set but RANK is not set"});
  bad({{"SLURM_PROCID", "0"}}, {"SLURM_PROCID=0 is set but SLURM_NTASKS is not set"});
  bad({{"OMPI_COMM_WORLD_SIZE", "2"}}, {"OMPI_COMM_WORLD_RANK is not set"});
  bad({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, {"rank 2 is not in [0, 2)", "RANK=2", "WORLD_SIZE=2"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0"});
  bad({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK='-1' is not an integer"});
  bad({{"RANK", "two"}, {"WORLD_SIZE", "2"}}, {"RANK='two'"});
  bad({{"RANK", "1"}, {"WORLD_SIZE", "2x"}}, {"WORLD_SIZE='2x'"});
  bad({{"RANK", "1"}, {"WORLD_SIZE", "99999999999"}}, {"WORLD_SIZE='99999999999'"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65536"}}, {"MASTER_PORT='65536'"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}, {"MASTER_PORT=0"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}},
      {"local rank 3 is not in [0, 2)", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "yes"}},
      {"TORCHELASTIC_USE_AGENT_STORE='yes'"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}}, {"MASTER_ADDR"});
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "x"}}, {"TORCHELASTIC_RESTART_COUNT='x'"});
  bad({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "abc"}}, {"SLURM_JOB_ID='abc'"});
}

TEST_CASE("read_launch_env: nothing set, and loomrun's set", "[launch_env]") {
  LaunchEnv none = read_launch_env(Env{});
  CHECK(none.launcher.empty());
  CHECK_FALSE(none.rank);
  CHECK_FALSE(none.master_addr);
  CHECK(none.describe().find("launched by none found") != std::string::npos);
  // Empty values count as unset.
  CHECK_FALSE(read_launch_env(Env{{"RANK", ""}, {"WORLD_SIZE", ""}}).rank);

  LaunchEnv e = read_launch_env(Env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                    {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  CHECK(e.launcher == "env");
  CHECK(e.local_rank == 1);
  LaunchEnv by_hand = read_launch_env(Env{{"RANK", "1"}, {"WORLD_SIZE", "3"}});
  CHECK(by_hand.local_rank == 1);  // LOCAL_RANK defaults to RANK
  CHECK(by_hand.local_world_size == 3);
  CHECK(by_hand.sources.at("local_rank") == "rank");
}
