#include "distributed/launch_env.h"

#include <cstdlib>
#include <sstream>

#include "distributed/error.h"

namespace loom::distributed {

namespace {

constexpr size_t kMaxHosts = size_t(1) << 20;  // a bound on an expansion, against "n[0-999999999]"

// ---- Slurm's lists ---------------------------------------------------------------------------

[[noreturn]] void bad_list(const std::string& what, const std::string& list, const std::string& why) {
  throw DistributedError(what + "='" + list + "' is not a Slurm host list: " + why +
                         " (expected names like node[01-04,07],login3)");
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The values of one bracket group's body, "01-04,07" -> 01 02 03 04 07 (zero padding kept:
// a range is as wide as its first bound).
std::vector<std::string> expand_group(const std::string& body, const std::string& what, const std::string& list) {
  std::vector<std::string> out;
  std::stringstream parts(body);
  std::string part;
  if (body.empty()) bad_list(what, list, "an empty [] group");
  while (std::getline(parts, part, ',')) {
    size_t dash = part.find('-');
    std::string lo = part.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) {
      bad_list(what, list, "'" + part + "' in [" + body + "] is not a number or a range a-b");
    }
    long a = std::stol(lo), b = std::stol(hi);
    if (a > b) bad_list(what, list, "the range '" + part + "' runs backwards");
    if (out.size() + size_t(b - a + 1) > kMaxHosts) bad_list(what, list, "more than 2^20 hosts");
    for (long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      out.push_back(std::string(digits.size() < lo.size() ? lo.size() - digits.size() : 0, '0') + digits);
    }
  }
  if (body.back() == ',') bad_list(what, list, "an empty entry in [" + body + "]");
  return out;
}

// One host expression without top-level commas: literal text and bracket groups, as a product.
void expand_item(const std::string& item, const std::string& what, const std::string& list,
                 std::vector<std::string>& hosts) {
  std::vector<std::string> prefixes{""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      size_t close = item.find(']', i);
      if (close == std::string::npos) bad_list(what, list, "a '[' without its ']'");
      std::string body = item.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string::npos) bad_list(what, list, "nested '['");
      std::vector<std::string> values = expand_group(body, what, list);
      if (prefixes.size() * values.size() > kMaxHosts) bad_list(what, list, "more than 2^20 hosts");
      std::vector<std::string> next;
      next.reserve(prefixes.size() * values.size());
      for (const auto& p : prefixes) {
        for (const auto& v : values) next.push_back(p + v);
      }
      prefixes = std::move(next);
      i = close + 1;
    } else if (item[i] == ']') {
      bad_list(what, list, "a ']' without its '['");
    } else {
      size_t end = item.find_first_of("[]", i);
      std::string text = item.substr(i, end == std::string::npos ? std::string::npos : end - i);
      for (auto& p : prefixes) p += text;
      i = end == std::string::npos ? item.size() : end;
    }
  }
  if (hosts.size() + prefixes.size() > kMaxHosts) bad_list(what, list, "more than 2^20 hosts");
  hosts.insert(hosts.end(), prefixes.begin(), prefixes.end());
}

// ---- reading variables -----------------------------------------------------------------------

class Reader {
 public:
  explicit Reader(const EnvLookup& env) : env_(env) {}

  std::optional<std::string> text(const std::string& name) const {
    std::optional<std::string> v = env_(name);
    if (v && v->empty()) return std::nullopt;  // set but empty counts as unset, as PyTorch's reads
    return v;
  }
  bool has(const std::string& name) const { return text(name).has_value(); }

  // A non-negative integer (at most `max`), or nullopt when unset.
  std::optional<int> number(const std::string& name, long max = 1L << 30) const {
    std::optional<std::string> v = text(name);
    if (!v) return std::nullopt;
    char* end = nullptr;
    long value = std::strtol(v->c_str(), &end, 10);
    if (!all_digits(*v) || *end != '\0' || value > max) {
      throw DistributedError("launch environment: " + name + "='" + *v + "' is not an integer in [0, " +
                             std::to_string(max) + "]");
    }
    return int(value);
  }

 private:
  const EnvLookup& env_;
};

std::string pair_text(const std::string& name, int value) { return name + "=" + std::to_string(value); }

// Both of a pair of variables, or neither: "RANK=1 is set but WORLD_SIZE is not set".
void require_pair(const Reader& r, const std::string& a, const std::string& b) {
  if (r.has(a) != r.has(b)) {
    const std::string& set = r.has(a) ? a : b;
    const std::string& unset = r.has(a) ? b : a;
    throw DistributedError("launch environment: " + set + "=" + *r.text(set) + " is set but " + unset +
                           " is not set (a launcher sets both; see docs/distributed.md, On a cluster)");
  }
}

// The master's port under Slurm without MASTER_PORT: every task of a job derives the same
// one from the job id, and two jobs sharing a node rarely collide.
int slurm_port(int job_id) { return 15000 + job_id % 20000; }

bool parse_bool(const Reader& r, const std::string& name) {
  std::optional<std::string> v = r.text(name);
  if (!v) return false;
  if (*v == "True" || *v == "true" || *v == "1") return true;
  if (*v == "False" || *v == "false" || *v == "0") return false;
  throw DistributedError("launch environment: " + name + "='" + *v + "' is not True or False");
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what) {
  if (list.empty()) bad_list(what, list, "it is empty");
  std::vector<std::string> hosts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if ((c == ',' && depth <= 0) || i == list.size()) {  // a comma outside brackets separates hosts
      std::string item = list.substr(start, i - start);
      if (item.empty()) bad_list(what, list, "an empty host name");
      expand_item(item, what, list, hosts);
      start = i + 1;
    }
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(const std::string& list, const std::string& what) {
  std::vector<int> counts;
  std::stringstream parts(list);
  std::string part;
  auto bad = [&](const std::string& why) {
    throw DistributedError(what + "='" + list + "' is not a Slurm tasks-per-node list: " + why +
                           " (expected counts like 2(x3),1)");
  };
  if (list.empty() || list.back() == ',') bad("an empty entry");
  while (std::getline(parts, part, ',')) {
    size_t paren = part.find('(');
    std::string count = part.substr(0, paren);
    std::string times = "1";
    if (paren != std::string::npos) {
      if (part.size() < paren + 4 || part.compare(paren, 2, "(x") != 0 || part.back() != ')') {
        bad("'" + part + "' is not N or N(xK)");
      }
      times = part.substr(paren + 2, part.size() - paren - 3);
    }
    if (!all_digits(count) || !all_digits(times) || count.size() > 6 || times.size() > 6) {
      bad("'" + part + "' is not N or N(xK)");
    }
    if (counts.size() + std::stoul(times) > kMaxHosts) bad("more than 2^20 nodes");
    counts.insert(counts.end(), std::stoul(times), std::stoi(count));
  }
  return counts;
}

LaunchEnv read_launch_env(const EnvLookup& lookup) {
  Reader r(lookup);
  LaunchEnv e;
  // Rank and world size: Note [launch precedence]. Only the chosen launcher's pair must be
  // whole: an elastic PyTorchJob's PET_NNODES ("1:4") or salloc's SLURM_NTASKS (no
  // SLURM_PROCID outside srun) may surround a torchrun job.
  auto from = [&](const std::string& rank, const std::string& size) {
    require_pair(r, rank, size);
    e.rank = r.number(rank);
    e.world_size = r.number(size);
    e.sources["rank"] = rank;
    e.sources["world_size"] = size;
  };
  bool torchrun = r.has("TORCHELASTIC_RUN_ID") || r.has("GROUP_RANK") || r.has("TORCHELASTIC_RESTART_COUNT");
  if (r.has("RANK") || r.has("WORLD_SIZE")) {
    from("RANK", "WORLD_SIZE");
    e.launcher = torchrun ? "torchrun" : r.has("PET_NNODES") ? "kubeflow" : "env";
  } else if (r.has("PET_NNODES") || r.has("PET_NODE_RANK")) {
    std::optional<int> pet_nproc = r.number("PET_NPROC_PER_NODE");
    if (pet_nproc.value_or(1) != 1) {
      throw DistributedError("launch environment: PET_NPROC_PER_NODE=" + std::to_string(*pet_nproc) +
                             " processes per pod need a launcher to start them: run the program under "
                             "torchrun (it sets RANK and WORLD_SIZE) or set PET_NPROC_PER_NODE=1");
    }
    from("PET_NODE_RANK", "PET_NNODES");
    e.launcher = "kubeflow";
  } else if (r.has("OMPI_COMM_WORLD_RANK") || r.has("OMPI_COMM_WORLD_SIZE")) {
    from("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    e.launcher = "mpirun";
  } else if (r.has("SLURM_PROCID")) {
    from("SLURM_PROCID", "SLURM_NTASKS");
    e.launcher = "slurm";
  }
  if (e.world_size && *e.world_size == 0) {
    throw DistributedError("launch environment: " + e.sources["world_size"] + "=0: a job has at least one process");
  }
  if (e.rank && *e.rank >= *e.world_size) {
    throw DistributedError("launch environment: rank " + std::to_string(*e.rank) + " is not in [0, " +
                           std::to_string(*e.world_size) + ") (" + pair_text(e.sources["rank"], *e.rank) + ", " +
                           pair_text(e.sources["world_size"], *e.world_size) + ")");
  }

  // Slurm's numbering must agree with the chosen one where both count the same processes
  // (torchrun started by one srun task per node counts more processes than Slurm does).
  std::optional<int> slurm_rank = r.number("SLURM_PROCID"), slurm_size = r.number("SLURM_NTASKS");
  bool same_world = e.rank && slurm_rank && slurm_size && *slurm_size == *e.world_size;
  if (e.launcher != "slurm" && same_world && *slurm_rank != *e.rank) {
    throw DistributedError("launch environment: " + pair_text(e.sources["rank"], *e.rank) + " but " +
                           pair_text("SLURM_PROCID", *slurm_rank) + " in a world of " +
                           std::to_string(*e.world_size) + " (" + e.sources["world_size"] +
                           " and SLURM_NTASKS): two launchers disagree on this process's rank");
  }

  // Local rank, local world size, node rank: the first variable of the list that is set.
  auto first = [&](const std::string& field, std::initializer_list<const char*> names) -> std::optional<int> {
    for (const char* name : names) {
      if (std::optional<int> v = r.number(name)) {
        e.sources[field] = name;
        return v;
      }
    }
    return std::nullopt;
  };
  std::optional<int> local = first("local_rank", {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  std::optional<int> node = first("node_rank", {"GROUP_RANK", "PET_NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK", "SLURM_NODEID"});
  std::optional<int> local_size = first("local_world_size", {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"});
  if (!local_size && r.has("SLURM_PROCID")) {
    // Slurm gives this node's count only as an entry of the per-node list.
    for (const char* name : {"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"}) {
      if (std::optional<std::string> list = r.text(name)) {
        std::vector<int> counts = expand_tasks_per_node(*list, name);
        size_t index = counts.size() == 1 ? 0 : size_t(node.value_or(0));
        if (index >= counts.size()) {
          throw DistributedError("launch environment: " + std::string(name) + "='" + *list + "' lists " +
                                 std::to_string(counts.size()) + " nodes but SLURM_NODEID=" +
                                 std::to_string(*node));
        }
        local_size = counts[index];
        e.sources["local_world_size"] = name;
        break;
      }
    }
  }
  e.local_rank = local.value_or(e.rank.value_or(0));
  e.local_world_size = local_size.value_or(e.world_size.value_or(1));
  e.node_rank = node.value_or(0);
  if (!local) e.sources["local_rank"] = "rank";
  if (!local_size) e.sources["local_world_size"] = "world size";
  if (e.rank && local_size && e.local_rank >= e.local_world_size) {
    throw DistributedError("launch environment: local rank " + std::to_string(e.local_rank) + " is not in [0, " +
                           std::to_string(e.local_world_size) + ") (" + e.sources["local_rank"] + ", " +
                           e.sources["local_world_size"] + ")");
  }

  // The master.
  for (const char* name : {"MASTER_ADDR", "PET_MASTER_ADDR"}) {
    if (!e.master_addr && (e.master_addr = r.text(name))) e.sources["master_addr"] = name;
  }
  for (const char* name : {"MASTER_PORT", "PET_MASTER_PORT"}) {
    if (!e.master_port && (e.master_port = r.number(name, 65535))) e.sources["master_port"] = name;
  }
  if (e.master_port && *e.master_port == 0) {
    throw DistributedError("launch environment: " + e.sources["master_port"] + "=0 is not a port in [1, 65535]");
  }
  if (!e.master_addr) {
    for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (std::optional<std::string> list = r.text(name)) {
        e.master_addr = expand_hostlist(*list, name).front();
        e.sources["master_addr"] = std::string(name) + "'s first host";
        break;
      }
    }
  }
  std::optional<int> job_id = r.number("SLURM_JOB_ID", 0x7fffffff);
  if (!e.master_port && job_id) {
    e.master_port = slurm_port(*job_id);
    e.sources["master_port"] = "SLURM_JOB_ID";
  }

  // torchrun's elastic agent.
  e.restart_count = r.number("TORCHELASTIC_RESTART_COUNT").value_or(0);
  e.run_id = r.text("TORCHELASTIC_RUN_ID").value_or(job_id ? std::to_string(*job_id) : "");
  e.use_agent_store = parse_bool(r, "TORCHELASTIC_USE_AGENT_STORE");
  if (e.use_agent_store && (!e.master_addr || !e.master_port)) {
    throw DistributedError("launch environment: TORCHELASTIC_USE_AGENT_STORE=True but MASTER_ADDR or "
                           "MASTER_PORT is not set (where torchrun's agent serves the store)");
  }
  return e;
}

LaunchEnv read_launch_env(const std::map<std::string, std::string>& env) {
  return read_launch_env([&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
}

std::string LaunchEnv::describe() const {
  auto src = [&](const std::string& field) {
    auto it = sources.find(field);
    return it == sources.end() ? std::string("unset") : it->second;
  };
  std::ostringstream s;
  s << "launched by " << (launcher.empty() ? "none found" : launcher) << ": rank "
    << (rank ? std::to_string(*rank) : "?") << " (" << src("rank") << ") of "
    << (world_size ? std::to_string(*world_size) : "?") << " (" << src("world_size") << "), local rank "
    << local_rank << " (" << src("local_rank") << ") of " << local_world_size << " (" << src("local_world_size")
    << "), node " << node_rank << " (" << src("node_rank") << "), master "
    << master_addr.value_or("?") << " (" << src("master_addr") << "):"
    << (master_port ? std::to_string(*master_port) : "?") << " (" << src("master_port") << ")";
  if (use_agent_store) s << ", torchrun's agent store";
  if (restart_count > 0) s << ", restart " << restart_count;
  if (!run_id.empty()) s << ", run " << run_id;
  return s.str();
}

}  // namespace loom::distributed
