// The distributed layer inside one process: the TCPStore, the rendezvous's failures (an
// unreachable master, a duplicate rank, a world-size mismatch, missing environment), the
// collectives' argument checks, and a small two-rank group on threads. The collectives
// across real processes are the CTest tests distributed_collectives_2 and _3
// (tests/distributed/).
#include <sys/socket.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>

#include "distributed/distributed.h"
#include "test_util.h"

using namespace loom;
using namespace loom::distributed;
using loom::test::message_of;
using loom::test::require_throws_with;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A port nobody listens on (bound, read, closed: free right after).
int unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Joins a group of `size` as `rank` through a client of the master store on port; returns
// the group, or the DistributedError's message.
struct Joined {
  std::unique_ptr<ProcessGroupGloo> group;
  std::optional<std::string> error;
};

Joined join(std::shared_ptr<TCPStore> store, int rank, int size, milliseconds timeout) {
  Joined j;
  try {
    j.group = std::make_unique<ProcessGroupGloo>(std::move(store), rank, size,
                                                 ProcessGroupGlooOptions().timeout(timeout));
  } catch (const DistributedError& e) {
    j.error = e.what();
  }
  return j;
}

std::shared_ptr<TCPStore> client(const TCPStore& master, milliseconds timeout) {
  return std::make_shared<TCPStore>("127.0.0.1", master.port(), false, timeout);
}

// A group of two ranks on two threads of this process (rank 1 joins from a thread);
// the collectives time out after op_timeout.
std::pair<Joined, Joined> two_ranks(milliseconds op_timeout) {
  auto master = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(10000));
  auto r1 = std::async(std::launch::async, [&] { return join(client(*master, milliseconds(10000)), 1, 2, op_timeout); });
  Joined j0 = join(master, 0, 2, op_timeout);
  Joined j1 = r1.get();
  REQUIRE_FALSE(j0.error);
  REQUIRE_FALSE(j1.error);
  return {std::move(j0), std::move(j1)};
}

// Sets (or unsets, with nullptr) environment variables for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      value ? ::setenv(name, value, 1) : ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, value] : saved_) value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("TCPStore: set, get, add and wait between a master and a client", "[distributed]") {
  auto master = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(2000));
  REQUIRE(master->is_master());
  REQUIRE(master->port() > 0);
  auto other = client(*master, milliseconds(2000));

  master->set("greeting", {'h', 'i'});
  CHECK(other->get("greeting") == std::vector<char>{'h', 'i'});
  CHECK(other->add("counter", 5) == 5);
  CHECK(master->add("counter", -2) == 3);
  other->set("empty", {});
  CHECK(master->get("empty").empty());

  // get blocks until another thread sets the key.
  auto later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    master->set("late", {'x'});
  });
  CHECK(other->get("late") == std::vector<char>{'x'});
  later.get();
  other->wait({"greeting", "late"});
}

TEST_CASE("TCPStore: a key that never comes times out with DistributedError", "[distributed]") {
  TCPStore master("127.0.0.1", 0, true, milliseconds(300));
  auto start = Clock::now();
  require_throws_with<DistributedError>([&] { master.get("never"); }, {"timed out", "'never'"});
  require_throws_with<DistributedError>([&] { master.wait({"never"}, milliseconds(100)); }, {"ms waiting for key 'never'"});
  CHECK(seconds_since(start) < 3.0);
}

TEST_CASE("TCPStore: an unreachable master gives DistributedError within the timeout", "[distributed]") {
  int port = unused_port();
  auto start = Clock::now();
  require_throws_with<DistributedError>([&] { TCPStore("127.0.0.1", port, false, milliseconds(500)); },
                                        {"could not connect", "127.0.0.1:" + std::to_string(port), "500 ms"});
  CHECK(seconds_since(start) < 3.0);

  // The same through init_process_group and the environment.
  ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port).c_str()},
                 {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  start = Clock::now();
  require_throws_with<DistributedError>(
      [] { init_process_group("gloo", InitOptions().timeout(milliseconds(500))); }, {"could not connect"});
  CHECK(seconds_since(start) < 3.0);
  CHECK_FALSE(is_initialized());
}

TEST_CASE("init_process_group: missing or malformed environment is a DistributedError", "[distributed]") {
  {
    ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", nullptr},
                   {"OMPI_COMM_WORLD_RANK", nullptr}, {"WORLD_SIZE", "2"}});
    require_throws_with<DistributedError>([] { init_process_group(); }, {"RANK is not set"});
  }
  {
    ScopedEnv env({{"MASTER_ADDR", nullptr}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
    require_throws_with<DistributedError>([] { init_process_group(); }, {"MASTER_ADDR is not set"});
  }
  {
    ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "two"}, {"WORLD_SIZE", "2"}});
    require_throws_with<DistributedError>([] { init_process_group(); }, {"RANK='two'"});
  }
  {
    ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}});
    require_throws_with<DistributedError>([] { init_process_group(); }, {"rank 2 is not in [0, 2)"});
  }
  require_throws_with<DistributedError>([] { init_process_group("mpi"); }, {"unknown backend 'mpi'"});
  require_throws_with<DistributedError>([] { get_rank(); }, {"init_process_group() first"});
}

TEST_CASE("init_process_group: a world of one from Open MPI's variables", "[distributed]") {
  ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(unused_port()).c_str()},
                 {"RANK", nullptr}, {"WORLD_SIZE", nullptr}, {"LOCAL_RANK", nullptr},
                 {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  init_process_group("gloo", InitOptions().timeout(milliseconds(5000)));
  CHECK(is_initialized());
  CHECK(get_rank() == 0);
  CHECK(get_world_size() == 1);
  CHECK(get_local_rank() == 0);
  CHECK(default_group().backend() == "gloo");
  Tensor t = tensor<float>({1, 2, 3});
  all_reduce(t, ReduceOp::AVG)->wait();
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});
  require_throws_with<DistributedError>([] { init_process_group(); }, {"exists already"});
  destroy_process_group();
  CHECK_FALSE(is_initialized());
  destroy_process_group();  // a no-op now
}

TEST_CASE("ProcessGroupGloo: a duplicate rank is a DistributedError", "[distributed]") {
  auto master = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(5000));
  auto start = Clock::now();
  auto r0 = std::async(std::launch::async, [&] { return join(master, 0, 2, milliseconds(5000)); });
  auto a = std::async(std::launch::async, [&] { return join(client(*master, milliseconds(5000)), 1, 2, milliseconds(5000)); });
  auto b = std::async(std::launch::async, [&] { return join(client(*master, milliseconds(5000)), 1, 2, milliseconds(5000)); });
  Joined j0 = r0.get(), ja = a.get(), jb = b.get();
  // The first rank 1 to arrive joins rank 0; the second is refused.
  CHECK_FALSE(j0.error);
  REQUIRE(ja.error.has_value() != jb.error.has_value());
  const std::string& msg = ja.error ? *ja.error : *jb.error;
  CHECK_THAT(msg, Catch::Contains("duplicate rank 1") && Catch::Contains("2 processes"));
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE("ProcessGroupGloo: a world-size mismatch is a DistributedError on every rank", "[distributed]") {
  auto master = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(1500));
  auto start = Clock::now();
  auto r0 = std::async(std::launch::async, [&] { return join(master, 0, 2, milliseconds(1500)); });
  auto r1 = std::async(std::launch::async, [&] { return join(client(*master, milliseconds(1500)), 1, 3, milliseconds(1500)); });
  Joined j0 = r0.get(), j1 = r1.get();
  REQUIRE(j1.error);
  CHECK_THAT(*j1.error, Catch::Contains("world size mismatch") && Catch::Contains("rank 1 has world size 3") &&
                            Catch::Contains("rank 0 has 2"));
  REQUIRE(j0.error);  // rank 0 waits for a rank 1 that left: it times out
  CHECK(seconds_since(start) < 10.0);
}

TEST_CASE("ProcessGroupGloo: two ranks on threads reduce, broadcast and gather", "[distributed]") {
  auto [j0, j1] = two_ranks(milliseconds(10000));
  ProcessGroup* groups[2] = {j0.group.get(), j1.group.get()};

  Tensor a[2] = {tensor<double>({1, -2, 3}), tensor<double>({10, 20, -30})};
  Tensor gathered[2][2] = {{zeros({3}, TensorOptions(kFloat64)), zeros({3}, TensorOptions(kFloat64))},
                           {zeros({3}, TensorOptions(kFloat64)), zeros({3}, TensorOptions(kFloat64))}};
  Tensor b[2] = {tensor<float>({7, 8}), tensor<float>({0, 0})};
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < 2; ++r) {
    works.push_back(groups[r]->all_gather({gathered[r][0], gathered[r][1]}, a[r]));
    works.push_back(groups[r]->all_reduce(a[r], ReduceOp::MAX));
    works.push_back(groups[r]->broadcast(b[r], 0));
    works.push_back(groups[r]->barrier());
  }
  for (auto& w : works) w->wait();
  for (int r = 0; r < 2; ++r) {
    CHECK(a[r].to_vector<double>() == std::vector<double>{10, 20, 3});
    CHECK(b[r].to_vector<float>() == std::vector<float>{7, 8});
    CHECK(gathered[r][0].to_vector<double>() == std::vector<double>{1, -2, 3});
    CHECK(gathered[r][1].to_vector<double>() == std::vector<double>{10, 20, -30});
  }
}

TEST_CASE("ProcessGroupGloo: a collective a peer never joins fails from wait()", "[distributed]") {
  auto [j0, j1] = two_ranks(milliseconds(500));
  Tensor t = tensor<float>({1, 2});
  auto start = Clock::now();
  auto work = j0.group->all_reduce(t);  // rank 1 never calls it
  require_throws_with<DistributedError>([&] { work->wait(); },
                                        {"all_reduce #0 (gloo, timeout 500 ms) failed",
                                         "rank 1 did not arrive (last collective entered: none)"});
  CHECK(work->is_completed());
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE("ProcessGroupGloo: argument errors name the op, the shapes and the dtypes", "[distributed]") {
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(5000));
  ProcessGroupGloo group(store, 0, 1, ProcessGroupGlooOptions().timeout(milliseconds(5000)));
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);

  Tensor m = zeros({2, 3});
  require_throws_with<ValueError>([&] { group.all_reduce(m.transpose(0, 1)); },
                                  {"all_reduce", "(3, 2)", "not contiguous"});
  require_throws_with<DTypeError>([&] { group.all_reduce(zeros({2}, TensorOptions(kInt64)), ReduceOp::AVG); },
                                  {"all_reduce", "AVG", "int64"});
  require_throws_with<DTypeError>([&] { group.broadcast(zeros({2}, TensorOptions(kBool))); },
                                  {"broadcast", "Bool"});
  require_throws_with<ValueError>([&] { group.broadcast(m, 1); }, {"broadcast", "root 1"});
  require_throws_with<ValueError>([&] { group.all_gather({m, m}, m); }, {"all_gather", "2 outputs", "1 ranks"});
  require_throws_with<ShapeError>([&] { group.all_gather({zeros({3, 2})}, m); },
                                  {"all_gather", "(3, 2)", "(2, 3)"});
  require_throws_with<DTypeError>([&] { group.reduce_scatter(m, {zeros({2, 3}, TensorOptions(kFloat64))}); },
                                  {"reduce_scatter", "float64", "float32"});
  require_throws_with<DistributedError>([&] { ProcessGroupGloo(store, 1, 1); }, {"rank 1 is not in [0, 1)"});

  // A world of one: every collective leaves the values as they are.
  Tensor h = tensor<float>({1.5f, -2.0f}).to(kBFloat16);
  group.all_reduce(h, ReduceOp::AVG)->wait();
  CHECK(h.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  Tensor out = zeros({2}, TensorOptions(kFloat16));
  group.reduce_scatter(out, {tensor<float>({3, 4}).to(kFloat16)}, ReduceOp::MIN)->wait();
  CHECK(out.to_vector<float>() == std::vector<float>{3, 4});
}

TEST_CASE("init_process_group: under torchrun every rank joins the agent's store", "[distributed]") {
  // The test's store plays torchrun's agent, serving on MASTER_PORT: rank 0 must join it
  // (serving a second store on that port would fail to bind), under this attempt's keys.
  TCPStore agent("127.0.0.1", 0, true, milliseconds(5000));
  std::string port = std::to_string(agent.port());
  ScopedEnv env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port.c_str()}, {"RANK", "0"}, {"WORLD_SIZE", "1"},
                 {"LOCAL_RANK", "0"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"},
                 {"TORCHELASTIC_RUN_ID", "test"}, {"OMPI_COMM_WORLD_RANK", nullptr}, {"OMPI_COMM_WORLD_SIZE", nullptr}});
  init_process_group("gloo", InitOptions().timeout(milliseconds(5000)));
  CHECK(agent.check({"/worker/attempt_2/loom/rank/0", "/worker/attempt_2/loom/world_size"}));
  CHECK_FALSE(agent.check({"loom/rank/0"}));
  Tensor t = tensor<float>({1, 2});
  all_reduce(t)->wait();
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2});
  destroy_process_group();
}
