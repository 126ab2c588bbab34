// The profiler (core/profiler.h, train/profiler/profile.h): what it records (router ops, autograd
// nodes, optimizer steps, the DataLoader's threads, user ranges), how they nest, what the
// table adds up to against clocks and sleeps the test times itself, per-op memory against
// the bytes the test allocates, the schedule, a step that throws, the trace's structure, and
// that nothing is recorded while no Profile is on. GPU timing runs on the host-emulated cuda:0
// here (its events carry host times) and on a real GPU in the "[.cuda]" cases.
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/cuda_emulation.h"
#include "core/profiler.h"
#include "cuda_test_util.h"
#include "data/dataloader.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "test_util.h"
#include "train/profiler/chrome_trace.h"
#include "train/profiler/profile.h"
#include "train/profiler/timeline_html.h"

using namespace loom;
using namespace loom::profiler;
using Json = nlohmann::json;

namespace {

std::vector<const Event*> named(const Recording& r, const std::string& name) {
  std::vector<const Event*> out;
  for (const Event& e : r.events)
    if (display_name(e) == name) out.push_back(&e);
  return out;
}

const Event& only(const Recording& r, const std::string& name) {
  const auto found = named(r, name);
  INFO(name);
  REQUIRE(found.size() == 1);
  return *found[0];
}

const Event* by_id(const Recording& r, uint64_t id) {
  for (const Event& e : r.events)
    if (e.id == id) return &e;
  return nullptr;
}

const EventAverage& row(const KeyAverages& k, const std::string& key) {
  for (const EventAverage& a : k.rows())
    if (a.key == key) return a;
  FAIL("no row " << key);
  throw;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("profiler: off, nothing is recorded and a later Profile sees only its own ops", "[profiler]") {
  REQUIRE_FALSE(is_recording());
  Tensor a = test::random_nonzero({64, 32});
  {
    Range ignored("not recorded");
    for (int i = 0; i < 10; ++i) a = a.mul(a).tanh();  // 20 ops while off
  }
  Profile prof({.profile_memory = true});
  REQUIRE(is_recording());
  Tensor b = a.exp();  // one op
  prof.stop();
  REQUIRE_FALSE(is_recording());
  const Recording& r = prof.events();
  REQUIRE(r.events.size() == 1);
  REQUIRE(display_name(r.events[0]) == "loom::exp");
  REQUIRE(named(r, "not recorded").empty());
  // After the stop, ops and allocations are not recorded anywhere.
  for (int i = 0; i < 10; ++i) b = b.mul(b);
  REQUIRE(prof.events().events.size() == 1);
  REQUIRE(prof.events().memory.size() == 1);  // exp's output, which counts as exp's
  REQUIRE(prof.events().memory[0].bytes == 64 * 32 * 4);
  REQUIRE(prof.events().memory[0].event == r.events[0].id);
}

TEST_CASE("profiler: router ops by name, device, thread and input shapes", "[profiler]") {
  Tensor x = test::random_nonzero({8, 16}), w = test::random_nonzero({16, 4});
  Profile prof({.record_shapes = true});
  Tensor y = x.matmul(w).relu().sum();
  Tensor z = x.add(x);
  prof.stop();
  const Recording& r = prof.events();
  const Event& relu = only(r, "loom::relu");
  REQUIRE(relu.input_shapes == "[[8, 4], [8, 4], [], [], []]");  // out, in, three scalar arguments
  REQUIRE(relu.input_dtypes == R"(["float32", "float32", "Scalar", "Scalar", "Scalar"])");
  const Event& add = only(r, "loom::add");
  REQUIRE(add.input_shapes == "[[8, 16], [8, 16], [8, 16], []]");
  REQUIRE(only(r, "loom::sum").input_shapes == "[[], [8, 4], []]");  // out is 0-dim; dims
  REQUIRE(r.threads.size() == 1);
  for (const Event& e : r.events) {
    REQUIRE(e.kind == EventKind::Op);
    REQUIRE(e.device == kCPU);
    REQUIRE(e.thread == 0);
    REQUIRE(e.parent == 0);
    REQUIRE(e.begin_ns >= r.begin_ns);
    REQUIRE(e.begin_ns <= e.end_ns);
    REQUIRE(e.end_ns <= r.end_ns);
    REQUIRE_FALSE(e.has_gpu_time());
  }
  // Events come in the order they began.
  for (size_t i = 1; i < r.events.size(); ++i) REQUIRE(r.events[i - 1].begin_ns <= r.events[i].begin_ns);
  REQUIRE(&only(r, "loom::relu") < &only(r, "loom::sum"));
  REQUIRE(&only(r, "loom::sum") < &only(r, "loom::add"));
}

TEST_CASE("profiler: key_averages grouped by input shape", "[profiler]") {
  Tensor small = test::random_nonzero({2, 3}), large = test::random_nonzero({5, 7});
  Profile prof({.record_shapes = true});
  for (int i = 0; i < 3; ++i) small.relu();
  large.relu();
  prof.stop();
  REQUIRE(prof.key_averages().rows().size() == 1);
  REQUIRE(prof.key_averages().rows()[0].count == 4);
  const KeyAverages by_shape = prof.key_averages(/*group_by_input_shape=*/true);
  REQUIRE(by_shape.rows().size() == 2);
  std::map<std::string, int64_t> calls;
  for (const EventAverage& a : by_shape.rows()) calls[a.input_shapes] = a.count;
  REQUIRE(calls == std::map<std::string, int64_t>{{"[[2, 3], [2, 3], [], [], []]", 3}, {"[[5, 7], [5, 7], [], [], []]", 1}});
  REQUIRE_THAT(by_shape.table(), Catch::Contains("Input Shapes") && Catch::Contains("[[5, 7], [5, 7], [], [], []]"));
}

TEST_CASE("profiler: nested ranges and ops: parents, self and total times against the test's clock", "[profiler]") {
  Tensor a = test::random_nonzero({32, 32});
  Profile prof;
  const int64_t before = steady_ns();
  {
    Range outer("outer");
    sleep_ms(4);
    {
      Range inner("inner");
      sleep_ms(6);
      a = a.mul(a);
    }
    {
      Range inner("inner");
      a = a.tanh();
    }
  }
  const int64_t after = steady_ns();
  prof.stop();
  const Recording& r = prof.events();
  const Event& outer = only(r, "outer");
  const auto inners = named(r, "inner");
  REQUIRE(inners.size() == 2);
  REQUIRE(outer.parent == 0);
  for (const Event* e : inners) REQUIRE(e->parent == outer.id);
  REQUIRE(only(r, "loom::mul").parent == inners[0]->id);
  REQUIRE(only(r, "loom::tanh").parent == inners[1]->id);
  REQUIRE(outer.begin_ns >= before);
  REQUIRE(outer.end_ns <= after);
  REQUIRE(outer.duration_ns() >= 10'000'000);  // the two sleeps

  const std::vector<EventStats> stats = analyze(r).stats;
  const size_t outer_at = size_t(&outer - r.events.data());
  REQUIRE(stats[outer_at].self_cpu_ns == outer.duration_ns() - inners[0]->duration_ns() - inners[1]->duration_ns());
  REQUIRE(stats[outer_at].self_cpu_ns >= 4'000'000);
  REQUIRE(stats[outer_at].depth == 0);
  REQUIRE(stats[size_t(&only(r, "loom::mul") - r.events.data())].depth == 2);

  const KeyAverages k = prof.key_averages();
  REQUIRE(row(k, "inner").count == 2);
  REQUIRE(row(k, "inner").cpu_total_ns == inners[0]->duration_ns() + inners[1]->duration_ns());
  REQUIRE(row(k, "outer").self_cpu_ns == stats[outer_at].self_cpu_ns);
  // Self times add up to the top-level events' durations.
  int64_t self = 0;
  for (const EventAverage& a : k.rows()) self += a.self_cpu_ns;
  REQUIRE(self == outer.duration_ns());
  REQUIRE(k.self_cpu_time_total_ns() == outer.duration_ns());
}

TEST_CASE("profiler: the table's totals against a timed loop of known sleeps and ops", "[profiler]") {
  Tensor a = test::random_nonzero({256, 256}), b = test::random_nonzero({256, 256});
  Profile prof;
  int64_t loop_ns = 0, slept_ns = 0;
  for (int i = 0; i < 5; ++i) {
    const int64_t start = steady_ns();
    {
      Range step("timed step");
      {
        Range nap("nap");
        const int64_t nap_start = steady_ns();
        sleep_ms(2 + i);
        slept_ns += steady_ns() - nap_start;
      }
      for (int j = 0; j < 3; ++j) a = a.matmul(b).tanh();
    }
    loop_ns += steady_ns() - start;
  }
  prof.stop();
  const KeyAverages k = prof.key_averages();
  const EventAverage& step = row(k, "timed step");
  const EventAverage& nap = row(k, "nap");
  REQUIRE(step.count == 5);
  REQUIRE(nap.count == 5);
  REQUIRE(row(k, "loom::tanh").count == 15);
  // Each recorded duration lies inside the test's own interval around it.
  REQUIRE(step.cpu_total_ns <= loop_ns);
  // What lies outside a Range but inside the test's timer is two clock reads and the Range's
  // own work: microseconds, 1 ms per step allowed for a preempted thread on a busy machine.
  REQUIRE(step.cpu_total_ns >= loop_ns - 5 * 1'000'000);
  REQUIRE(nap.cpu_total_ns >= 20'000'000);              // 2 + 3 + 4 + 5 + 6 ms asked for
  REQUIRE(nap.cpu_total_ns <= slept_ns + 5 * 1'000'000);
  // The step's self time is what is not in its naps and ops.
  int64_t children = nap.cpu_total_ns;
  for (const EventAverage& a : k.rows())
    if (a.kind == EventKind::Op) children += a.cpu_total_ns;
  REQUIRE(step.self_cpu_ns == step.cpu_total_ns - children);
  // Sorted by total CPU time, the steps come first (they hold everything else); a row limit
  // keeps that many rows.
  const std::string table = k.table({.sort_by = "cpu_time_total", .row_limit = 2});
  INFO(table);
  std::vector<std::string> lines;
  for (size_t at = 0, end; at < table.size(); at = end + 1)
    lines.push_back(table.substr(at, (end = table.find('\n', at)) - at));
  REQUIRE(lines.size() == 7);  // rule, header, rule, two rows, rule, total
  REQUIRE_THAT(lines[1], Catch::Contains("Name") && Catch::Contains("# of Calls"));
  REQUIRE_THAT(lines[3], Catch::Contains("timed step") && Catch::EndsWith(" 5"));
  REQUIRE_THAT(lines[4], !Catch::Contains("timed step"));
  // By count, the 15-call ops before the 5-call ranges.
  const std::string by_count = k.table({.sort_by = "count", .row_limit = 1});
  REQUIRE_THAT(by_count, Catch::Contains("loom::tanh") || Catch::Contains("loom::bmm"));
  REQUIRE(table.find("Self CUDA") == std::string::npos);  // no CUDA op recorded
  REQUIRE_THROWS_WITH(k.table({.sort_by = "speed"}), Catch::Contains("cpu_time_total"));
}

TEST_CASE("profiler: autograd nodes in backward, named as PyTorch's, with their ops inside", "[profiler]") {
  Tensor x = test::random_nonzero({4, 3}), w = test::random_nonzero({3, 2}).requires_grad_(true);
  Tensor b = zeros({2}, TensorOptions().requires_grad());
  Tensor loss = (x.matmul(w) + b).relu().mul(x.sum()).sum();
  Profile prof;
  loss.backward();
  prof.stop();
  const Recording& r = prof.events();
  for (const char* name : {"SumBackward0", "MulBackward0", "ReluBackward0", "AddBackward0"}) {
    INFO(name);
    REQUIRE(only(r, name).kind == EventKind::BackwardNode);
  }
  REQUIRE(named(r, "torch::autograd::AccumulateGrad").size() == 2);  // w and b
  // Every op of the backward pass runs inside a node, but the seed (ones_like(loss)).
  size_t ops = 0;
  for (const Event& e : r.events) {
    if (e.kind != EventKind::Op) continue;
    ++ops;
    const Event* parent = by_id(r, e.parent);
    while (parent && parent->kind == EventKind::Op) parent = by_id(r, parent->parent);
    if (!parent) {
      REQUIRE(display_name(e) == "loom::fill");
      REQUIRE(&e == &r.events.front());
      continue;
    }
    REQUIRE(parent->kind == EventKind::BackwardNode);
  }
  REQUIRE(ops == 5);
  // The whole pass in order: the seed, then each node (latest recorded first) with its kernels.
  std::vector<std::string> names;
  for (const Event& e : r.events) names.push_back(display_name(e));
  REQUIRE(names == std::vector<std::string>{"loom::fill", "SumBackward0", "MulBackward0", "loom::mul", "ReluBackward0",
                                            "loom::relu_backward", "AddBackward0", "loom::sum",
                                            "torch::autograd::AccumulateGrad", "MatmulBackward0", "loom::bmm",
                                            "torch::autograd::AccumulateGrad"});
  // The relu backward runs one relu_backward kernel.
  REQUIRE(by_id(r, only(r, "loom::relu_backward").parent) == &only(r, "ReluBackward0"));
}

TEST_CASE("profiler: optimizer step and zero_grad are ranges named as PyTorch's", "[profiler]") {
  nn::Linear fc(3, 2);
  optim::Adam adam(fc->parameters(), 1e-2);
  Profile prof;
  adam.zero_grad();
  fc(test::random_nonzero({5, 3})).sum().backward();
  adam.step();
  prof.stop();
  const Recording& r = prof.events();
  const Event& step = only(r, "Optimizer.step#Adam.step");
  REQUIRE(step.kind == EventKind::Annotation);
  REQUIRE(only(r, "Optimizer.zero_grad#Adam.zero_grad").kind == EventKind::Annotation);
  // One multi-tensor update for both parameters (same dtype and device), inside the step.
  const auto updates = named(r, "loom::adam_update");
  REQUIRE(updates.size() == 1);
  REQUIRE(updates[0]->parent == step.id);
}

TEST_CASE("profiler: the DataLoader's workers are threads of their own, the loop's waits are ranges", "[profiler]") {
  auto ds =
      std::make_shared<data::LambdaDataset<Tensor>>(12, [](size_t i) { return full({4}, static_cast<double>(i)); });
  auto stack_rows = [](std::vector<Tensor> rows) { return stack(rows, 0); };
  auto loader = data::make_data_loader(ds, stack_rows, data::DataLoaderOptions(3).num_workers(2));
  Profile prof;
  size_t batches = 0;
  for (Tensor& batch : loader) {
    Range step("consume");
    batch = batch.mul(2);
    ++batches;
  }
  prof.stop();
  const Recording& r = prof.events();
  REQUIRE(batches == 4);
  REQUIRE(named(r, "enumerate(DataLoader)#DataLoader.__next__").size() == 4);
  const auto loads = named(r, "DataLoader.load_batch");
  REQUIRE(loads.size() == 4);
  std::set<uint32_t> worker_threads;
  for (const Event* e : loads) {
    worker_threads.insert(e->thread);
    REQUIRE_THAT(r.threads.at(e->thread).name, Catch::StartsWith("DataLoader worker "));
  }
  REQUIRE(named(r, "loom::mul").size() == 4);
  const uint32_t main_thread = named(r, "loom::mul")[0]->thread;
  REQUIRE_FALSE(worker_threads.count(main_thread));
  REQUIRE(r.threads.at(main_thread).name == "main thread");
  // Each batch's collate (a stack: copies into the batch) runs inside its load, on the worker.
  size_t nested = 0;
  for (const Event& e : r.events) {
    if (e.kind != EventKind::Op || !worker_threads.count(e.thread)) continue;
    const Event* p = by_id(r, e.parent);
    while (p && p->kind == EventKind::Op) p = by_id(r, p->parent);
    REQUIRE(p != nullptr);
    REQUIRE(display_name(*p) == "DataLoader.load_batch");
    REQUIRE(p->thread == e.thread);
    ++nested;
  }
  REQUIRE(nested >= 4);
  std::set<uint64_t> os_tids;
  for (const ThreadInfo& t : r.threads) os_tids.insert(t.os_tid);
  REQUIRE(os_tids.size() == r.threads.size());
}

TEST_CASE("profiler: memory per event against the bytes allocated and freed, and the peak", "[profiler]") {
  Tensor x = test::random_nonzero({300, 10}), y;
  Profile prof({.profile_memory = true});
  Tensor kept;
  {
    Range peak("peak");
    { Tensor big = empty({1 << 20}); }  // 4 MiB, freed at once
    kept = empty({1 << 19}, kFloat64);  // 4 MiB, kept
    Tensor small = empty({1000});       // 4000 bytes, freed at the end of the range
  }
  {
    Range drop("drop");
    kept = Tensor();
  }
  {
    Range op("an op's output");
    y = x.mul(x);  // (300, 10) float32 made by Tensor::mul, filled by the kernel
    x = Tensor();  // 12000 bytes freed here, in the range
  }
  prof.stop();
  const Recording& r = prof.events();
  const KeyAverages k = prof.key_averages();
  REQUIRE(row(k, "peak").self_cpu_memory == 4 << 20);
  REQUIRE(row(k, "peak").cpu_memory_peak == (4 << 20) + 4000);
  REQUIRE(row(k, "drop").self_cpu_memory == -(4 << 20));
  REQUIRE(row(k, "drop").cpu_memory_peak == 0);
  // The output Tensor::mul made counts as the op's; the range freed x itself.
  REQUIRE(row(k, "loom::mul").self_cpu_memory == 12000);
  REQUIRE(row(k, "loom::mul").cpu_memory_peak == 12000);
  REQUIRE(row(k, "an op's output").self_cpu_memory == -12000);
  REQUIRE(row(k, "an op's output").cpu_memory == 0);
  REQUIRE(row(k, "an op's output").cpu_memory_peak == 12000);
  // Every record is a storage's bytes, made and freed at one address: all but y (kept after
  // the Profile) and x (made before it) both.
  REQUIRE(r.memory.size() == 6 + 2);
  std::map<uint64_t, int64_t> live;
  for (const MemoryRecord& m : r.memory) live[m.addr] += m.bytes;
  int64_t unbalanced = 0;
  for (const auto& [addr, bytes] : live) unbalanced += bytes;
  REQUIRE(unbalanced == 0);  // +12000 for y, -12000 for x
  const std::string table = k.table();
  REQUIRE(table.find("Self CPU Mem") != std::string::npos);
  REQUIRE(table.find("4.00 Mb") != std::string::npos);
  REQUIRE(table.find("-4.00 Mb") != std::string::npos);
}

TEST_CASE("profiler: the schedule records only the active steps, each a ProfilerStep#N", "[profiler]") {
  int handled = 0;
  size_t muls_seen = 0;
  Tensor a = test::random_nonzero({16});
  {
    Profile prof({.schedule = Schedule{.wait = 1, .warmup = 1, .active = 2}, .on_trace_ready = [&](Profile& p) {
                    ++handled;
                    muls_seen = named(p.events(), "loom::mul").size();
                  }});
    for (int step = 0; step < 6; ++step) {
      for (int i = 0; i <= step; ++i) a = a.mul(1.0);  // step s runs s + 1 multiplications
      REQUIRE(prof.is_recording() == (step >= 1 && step < 4));
      prof.step();
    }
    REQUIRE(handled == 1);
    const Recording& r = prof.events();
    REQUIRE(named(r, "ProfilerStep#0").empty());
    REQUIRE(named(r, "ProfilerStep#1").empty());  // the warmup step, thrown away
    const Event& s2 = only(r, "ProfilerStep#2");
    const Event& s3 = only(r, "ProfilerStep#3");
    REQUIRE(s2.kind == EventKind::Step);
    REQUIRE(named(r, "ProfilerStep#4").empty());
    size_t in2 = 0, in3 = 0;
    for (const Event* e : named(r, "loom::mul")) {
      if (e->parent == s2.id) ++in2;
      if (e->parent == s3.id) ++in3;
    }
    REQUIRE(in2 == 3);
    REQUIRE(in3 == 4);
    REQUIRE(named(r, "loom::mul").size() == 7);
    const KeyAverages k = prof.key_averages();
    REQUIRE(row(k, "ProfilerStep*").count == 2);
    REQUIRE(k.steps().steps == 2);
    REQUIRE(k.steps().wall_ns == s2.duration_ns() + s3.duration_ns());
    REQUIRE(k.table().find("of their wall time is inside named events") != std::string::npos);
  }
  REQUIRE(handled == 1);  // not again when it goes
  REQUIRE(muls_seen == 7);
  REQUIRE_THROWS_AS(Profile({.schedule = Schedule{.active = 0}}), ValueError);
}

TEST_CASE("profiler: one Profile at a time, the first one is unharmed", "[profiler]") {
  Profile outer;
  REQUIRE_THROWS_WITH(Profile(), Catch::Contains("already recording"));
  Tensor t = ones({3}).neg();
  outer.stop();
  REQUIRE(named(outer.events(), "loom::neg").size() == 1);
  REQUIRE_THROWS_WITH(Profile().events(), Catch::Contains("still recording"));
}

TEST_CASE("profiler: an exception inside the scope closes it, and its trace is valid", "[profiler]") {
  test::TempDir dir;
  const std::string path = dir.file("trace.json");
  Tensor x = test::random_nonzero({3, 4});
  bool thrown = false;
  try {
    Profile prof({.on_trace_ready = [&](Profile& p) { p.export_chrome_trace(path); }});
    Range step("failing step");
    Tensor y = x.exp();
    y.index_select(0, from_vector(std::vector<int64_t>{0, 7}));  // row 7 of 3: IndexError inside the kernel's check
  } catch (const IndexError&) {
    thrown = true;
  }
  REQUIRE(thrown);
  REQUIRE_FALSE(is_recording());
  std::ifstream f(path);
  const Json trace = Json::parse(f);
  bool step_unwound = false, check_unwound = false, exp_closed = false;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "failing step") step_unwound = e["args"].value("Unwound by exception", false);
    // The kernel that threw (its name is the router's, not the message's, which is gone).
    if (e["name"] == "loom::check_indices") check_unwound = e["args"].value("Unwound by exception", false);
    if (e["name"] == "loom::exp") exp_closed = !e["args"].contains("Unwound by exception");
  }
  REQUIRE(step_unwound);
  REQUIRE(check_unwound);
  REQUIRE(exp_closed);
  Profile next;  // the session ended: another one may start
  next.stop();
}

namespace {

// Checks a trace's structure: every event has its fields; the "X" events of one track nest
// (none straddles another's end); each flow arrow starts at a runtime event and ends at the
// kernel it correlates with. Returns the "X" events by category.
std::map<std::string, std::vector<Json>> check_trace(const Json& trace) {
  REQUIRE(trace["schemaVersion"] == 1);
  REQUIRE(trace["traceEvents"].is_array());
  std::map<std::string, std::vector<Json>> by_cat;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  std::map<int64_t, Json> flow_start, flow_end, kernel_of, runtime_of;
  std::set<std::pair<int64_t, int64_t>> named_tracks;
  for (const Json& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "thread_name") named_tracks.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
      continue;
    }
    REQUIRE(e["ts"].get<double>() >= 0);
    if (ph == "X") {
      REQUIRE(e["dur"].get<double>() >= 0);
      REQUIRE(e["name"].is_string());
      by_cat[e["cat"]].push_back(e);
      const double ts = e["ts"], dur = e["dur"];
      tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back({ts, ts + dur});
      if (e["cat"] == "kernel") kernel_of[e["args"]["correlation"].get<int64_t>()] = e;
      if (e["cat"] == "runtime") runtime_of[e["args"]["correlation"].get<int64_t>()] = e;
    } else if (ph == "s") {
      flow_start[e["id"].get<int64_t>()] = e;
    } else if (ph == "f") {
      REQUIRE(e["bp"] == "e");
      flow_end[e["id"].get<int64_t>()] = e;
    } else {
      REQUIRE(ph == "i");
      REQUIRE(e["name"] == "[memory]");
      by_cat["[memory]"].push_back(e);
    }
  }
  for (auto& [track, spans] : tracks) {
    INFO("track pid " << track.first << " tid " << track.second);
    REQUIRE(named_tracks.count(track));
    // Sorted by start (outer first on ties), a span must end before the open ones around it.
    std::sort(spans.begin(), spans.end(),
              [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open_ends;
    for (const auto& [begin, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= begin) open_ends.pop_back();
      if (!open_ends.empty()) REQUIRE(end <= open_ends.back() + 1e-3);
      open_ends.push_back(end);
    }
  }
  REQUIRE(flow_start.size() == flow_end.size());
  REQUIRE(flow_start.size() == kernel_of.size());
  for (const auto& [id, s] : flow_start) {
    REQUIRE(flow_end.count(id));
    REQUIRE(kernel_of.count(id));
    REQUIRE(runtime_of.count(id));
    REQUIRE(s["ts"] == runtime_of[id]["ts"]);
    REQUIRE(flow_end[id]["ts"] == kernel_of[id]["ts"]);
    REQUIRE(flow_end[id]["pid"] == kernel_of[id]["pid"]);
    REQUIRE(flow_end[id]["tid"] == kernel_of[id]["tid"]);
  }
  return by_cat;
}

}  // namespace

TEST_CASE("profiler: the Chrome trace parses, nests per track, and carries every event", "[profiler]") {
  nn::Linear fc(8, 4);
  optim::Adam adam(fc->parameters(), 1e-2);
  Tensor x = test::random_nonzero({16, 8});
  Profile prof({.record_shapes = true, .profile_memory = true, .schedule = Schedule{.active = 2}});
  for (int step = 0; step < 2; ++step) {
    adam.zero_grad();
    {
      Range r("forward");
      fc(x).relu().sum().backward();
    }
    adam.step();
    prof.step();
  }
  const Recording& r = prof.events();
  const Json trace = Json::parse(chrome_trace_json(r));
  auto by_cat = check_trace(trace);
  size_t cpu = 0, annotations = 0;
  for (const Event& e : r.events) (e.kind == EventKind::Op || e.kind == EventKind::BackwardNode ? cpu : annotations)++;
  REQUIRE(by_cat["cpu_op"].size() == cpu);
  REQUIRE(by_cat["user_annotation"].size() == annotations);
  REQUIRE(by_cat["[memory]"].size() == r.memory.size());
  REQUIRE(by_cat["kernel"].empty());  // a CPU run
  std::set<int64_t> ids;
  for (const Json& e : by_cat["cpu_op"]) {
    REQUIRE(ids.insert(e["args"]["External id"].get<int64_t>()).second);
    if (e["name"] == "loom::relu") REQUIRE(e["args"]["Input Dims"] == Json::parse("[[16, 4], [16, 4], [], [], []]"));
  }
  int64_t bytes = 0;
  for (const Json& m : by_cat["[memory]"]) bytes += m["args"]["Bytes"].get<int64_t>();
  int64_t recorded = 0;
  for (const MemoryRecord& m : r.memory) recorded += m.bytes;
  REQUIRE(bytes == recorded);
  // The HTML page holds the same events and no reference to anything outside it.
  const std::string html = timeline_html(analyze(r));
  REQUIRE(html.find("<canvas") != std::string::npos);
  REQUIRE(html.find("ProfilerStep#1") != std::string::npos);
  REQUIRE(html.find("http://") == std::string::npos);
  REQUIRE(html.find("https://") == std::string::npos);
  REQUIRE(html.find("src=") == std::string::npos);
}

#ifndef LOOM_WITH_CUDA
TEST_CASE("profiler: ops on the emulated cuda:0 get GPU spans, runtime rows and flow arrows",
          "[profiler][cuda_emulation]") {
  cuda::EmulationGuard emulate;
  const Device gpu(DeviceType::CUDA, 0);
  Tensor a = test::random_nonzero({64, 64}).to(gpu).requires_grad_(true);
  Profile prof({.profile_memory = true});
  Tensor loss = a.matmul(a).tanh().sum();
  loss.backward();
  prof.stop();
  const Recording& r = prof.events();
  size_t gpu_ops = 0;
  for (const Event& e : r.events) {
    if (e.kind != EventKind::Op) {
      REQUIRE_FALSE(e.has_gpu_time());
      continue;
    }
    REQUIRE(e.device == gpu);
    REQUIRE(e.has_gpu_time());
    ++gpu_ops;
    // The emulated device runs an op's work as it is queued: its span is inside the op's
    // (give or take the microsecond that placing it on the host clock may round away).
    REQUIRE(e.begin_ns <= e.record_begin_ns);
    REQUIRE(e.record_begin_ns <= e.record_end_ns);
    REQUIRE(e.gpu_begin_ns >= e.record_begin_ns - 1000);
    REQUIRE(e.gpu_begin_ns <= e.record_end_ns + 1000);
    REQUIRE(e.gpu_end_ns <= e.end_ns + 1000);
    REQUIRE(e.gpu_end_ns > e.gpu_begin_ns);
  }
  REQUIRE(gpu_ops > 4);
  const KeyAverages k = prof.key_averages();
  const EventAverage& tanh_backward = row(k, "TanhBackward0");
  REQUIRE(tanh_backward.self_cuda_ns == 0);
  REQUIRE(tanh_backward.cuda_total_ns > 0);
  REQUIRE(tanh_backward.cuda_total_ns == row(k, "loom::tanh_backward").cuda_total_ns);
  REQUIRE(k.self_cuda_time_total_ns() > 0);
  const std::string table = k.table({.sort_by = "self_cuda_time_total"});
  REQUIRE(table.find("Self CUDA") != std::string::npos);
  REQUIRE(table.find("Self CUDA Mem") != std::string::npos);
  bool cuda_memory = false;
  for (const MemoryRecord& m : r.memory) cuda_memory = cuda_memory || m.device == gpu;
  REQUIRE(cuda_memory);
  // In a scheduled step, the GPU time of its ops (none nested here) is the step's line.
  Profile stepped({.schedule = Schedule{.active = 1}});
  Tensor b = a.detach().mul(2).exp();
  stepped.step();
  int64_t spans = 0;
  for (const Event& e : stepped.events().events) spans += e.has_gpu_time() ? e.gpu_end_ns - e.gpu_begin_ns : 0;
  REQUIRE(stepped.key_averages().steps().gpu_ns == spans);
  REQUIRE(spans > 0);
  REQUIRE_THAT(stepped.key_averages().table(), Catch::Contains("their ops' GPU time"));
  auto by_cat = check_trace(Json::parse(chrome_trace_json(r)));
  REQUIRE(by_cat["kernel"].size() == gpu_ops);
  REQUIRE(by_cat["runtime"].size() == gpu_ops);
  for (const Json& kernel : by_cat["kernel"]) REQUIRE(kernel["pid"] == 0);
}
#endif

TEST_CASE("profiler: GPU times from CUDA events against an independent timing of the same kernels",
          "[.cuda][profiler]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  // 2048³ products: long enough that the host queues ahead of the GPU, as in a training step.
  Tensor a = test::random_nonzero({2048, 2048}).to(gpu), b = test::random_nonzero({2048, 2048}).to(gpu);
  for (int i = 0; i < 3; ++i) a = a.matmul(b).tanh();  // warm up cuBLAS
  cuda::synchronize();
  cuda::Event start(true), end(true);
  Profile prof;
  start.record();
  for (int i = 0; i < 20; ++i) a = a.matmul(b).mul(1e-3);
  end.record();
  prof.stop();
  const double reference_ms = start.elapsed_ms(end);
  const KeyAverages k = prof.key_averages();
  int64_t gpu_ns = 0;
  for (const EventAverage& row : k.rows()) gpu_ns += row.self_cuda_ns;
  INFO(k.table({.sort_by = "cuda_time_total"}));
  REQUIRE(row(k, "loom::mul").count == 20);
  // The ops' GPU spans cover the kernels between the two reference events, which a host that
  // queues ahead leaves back to back: their sum is the reference's time within 5%.
  REQUIRE(double(gpu_ns) / 1e6 <= reference_ms * 1.001 + 0.01);
  REQUIRE(double(gpu_ns) / 1e6 >= reference_ms * 0.95);
  // On one stream, spans do not overlap and come in the order the ops were called.
  const Recording& r = prof.events();
  int64_t last_end = 0;
  for (const Event& e : r.events) {
    REQUIRE(e.has_gpu_time());
    REQUIRE(e.gpu_begin_ns >= last_end - 1000);
    last_end = e.gpu_end_ns;
  }
}
