#include "train/profiler/chrome_trace.h"

#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/cuda.h"
#include "train/profiler/profile_table.h"

namespace loom::profiler {
namespace {

using Json = nlohmann::ordered_json;

double micros(int64_t ns, int64_t origin_ns) { return double(ns - origin_ns) / 1e3; }

// The CPU process's pid in the trace: the OS's, moved out of the way of the GPUs' (which are
// their device indices, as in Kineto's traces) when it is that small (a container's init).
int64_t cpu_pid() {
  const int64_t pid = ::getpid();
  return pid < 1024 ? pid + (int64_t(1) << 22) : pid;
}

Json metadata(const char* what, int64_t pid, int64_t tid, Json args) {
  return Json{{"name", what}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// A complete ("X") event: ts and dur from steady-clock nanoseconds, t0 being the trace's 0.
Json complete(const char* cat, const std::string& name, int64_t pid, int64_t tid, int64_t begin_ns, int64_t end_ns,
              int64_t t0, Json args) {
  return Json{{"ph", "X"},
              {"cat", cat},
              {"name", name},
              {"pid", pid},
              {"tid", tid},
              {"ts", micros(begin_ns, t0)},
              {"dur", micros(end_ns, begin_ns)},
              {"args", std::move(args)}};
}

// One end of a flow arrow: "s" where it leaves, "f" (bound to the enclosing slice) where it lands.
Json flow(const char* ph, uint64_t id, int64_t pid, int64_t tid, int64_t ns, int64_t t0) {
  Json f = {{"ph", ph},      {"id", id},      {"pid", pid}, {"tid", tid}, {"ts", micros(ns, t0)},
            {"cat", "ac2g"}, {"name", "ac2g"}};
  if (std::string(ph) == "f") f["bp"] = "e";
  return f;
}

}  // namespace

std::string chrome_trace_json(const Recording& r) {
  const int64_t pid = cpu_pid();
  const int64_t t0 = r.begin_ns;
  // One event per line, appended as it is made (a trace holds millions of them).
  std::string body;
  const auto emit = [&body](const Json& e) {
    if (!body.empty()) body += ",\n";
    body += e.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  emit(metadata("process_name", pid, 0, {{"name", "Loom (CPU)"}}));
  emit(metadata("process_sort_index", pid, 0, {{"sort_index", 0}}));
  for (size_t t = 0; t < r.threads.size(); ++t) {
    const int64_t tid = int64_t(r.threads[t].os_tid);
    emit(metadata("thread_name", pid, tid, {{"name", r.threads[t].name}}));
    emit(metadata("thread_sort_index", pid, tid, {{"sort_index", int64_t(t)}}));
  }

  std::map<std::pair<int, uint64_t>, int64_t> stream_tid;  // (device, stream handle) -> track
  std::set<int> gpus;
  for (const Event& e : r.events) {
    const int64_t tid = int64_t(r.threads.at(e.thread).os_tid);
    Json args = {{"External id", e.id}};
    if (!e.input_shapes.empty()) {
      args["Input Dims"] = Json::parse(e.input_shapes);
      args["Input type"] = Json::parse(e.input_dtypes);
    }
    if (e.kind == EventKind::Op) args["Device"] = e.device.str();
    if (e.unwound) args["Unwound by exception"] = true;
    const bool op = e.kind == EventKind::Op || e.kind == EventKind::BackwardNode;
    emit(complete(op ? "cpu_op" : "user_annotation", display_name(e), pid, tid, e.begin_ns, e.end_ns, t0,
                  std::move(args)));
    if (!e.has_gpu_time()) continue;
    const int device = e.device.index;
    gpus.insert(device);
    auto [it, added] = stream_tid.emplace(std::make_pair(device, e.stream), int64_t(stream_tid.size()) + 1);
    const int64_t stream = it->second;
    if (added) {
      emit(metadata("thread_name", device, stream,
                    {{"name", e.stream == 0 ? std::string("default stream") : "stream " + std::to_string(stream)}}));
    }
    emit(complete("runtime", "cudaEventRecord", pid, tid, e.record_begin_ns, e.record_end_ns, t0,
                  {{"correlation", e.id}, {"External id", e.id}}));
    emit(complete("kernel", display_name(e), device, stream, e.gpu_begin_ns, e.gpu_end_ns, t0,
                  {{"device", device}, {"stream", stream}, {"correlation", e.id}, {"External id", e.id}}));
    emit(flow("s", e.id, pid, tid, e.record_begin_ns, t0));
    emit(flow("f", e.id, device, stream, e.gpu_begin_ns, t0));
  }
  Json device_properties = Json::array();
  for (const int device : gpus) {
    emit(metadata("process_name", device, 0, {{"name", "GPU " + std::to_string(device)}}));
    emit(metadata("process_sort_index", device, 0, {{"sort_index", 1 + device}}));
    device_properties.push_back({{"id", device}, {"name", cuda::device_name(device)}});
  }

  for (const MemoryRecord& m : r.memory) {
    emit(Json{{"ph", "i"},
              {"cat", "cpu_instant_event"},
              {"s", "t"},
              {"name", "[memory]"},
              {"pid", pid},
              {"tid", int64_t(r.threads.at(m.thread).os_tid)},
              {"ts", micros(m.ns, t0)},
              {"args",
               {{"Total Allocated", m.total_allocated},
                {"Bytes", m.bytes},
                {"Addr", m.addr},
                {"Device Type", m.device.is_cuda() ? 1 : 0},
                {"Device Id", m.device.is_cuda() ? m.device.index : -1}}}});
  }

  return "{\n\"schemaVersion\": 1,\n\"deviceProperties\": " + device_properties.dump() +
         ",\n\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": " + std::to_string(r.begin_unix_ns) +
         ",\n\"traceEvents\": [\n" + body + "\n]\n}\n";
}

}  // namespace loom::profiler
