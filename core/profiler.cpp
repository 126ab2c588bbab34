// The profiler's recording (Note [profiler recording] in core/profiler.h).
#include "core/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/cuda.h"
#include "core/error.h"
#include "core/memory.h"

namespace loom::profiler {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t os_thread_id() { return static_cast<uint64_t>(::syscall(SYS_gettid)); }

// The two timing events around one op on a CUDA device.
struct GpuMarks {
  cuda::Event begin{true}, end{true};
  cuda::Stream stream;
  int device = 0;
};

// One thread's share of a session: what it recorded. Its owner appends; stop() takes it all.
struct ThreadLog {
  std::mutex mutex;
  uint32_t thread = 0;
  std::vector<Event> events;
  std::vector<MemoryRecord> memory;
  std::vector<GpuMarks> gpu;  // Event::gpu_begin_ns holds the index until stop() reads them
};

struct OpenFrame {
  uint64_t id = 0, parent = 0, session = 0;
  const char* name = "";
  EventKind kind = EventKind::Op;
  Device device = kCPU;
  int64_t begin_ns = 0;
  int uncaught = 0;  // std::uncaught_exceptions() when it opened
  int gpu = -1;      // index into the log's GpuMarks
  int64_t record_begin_ns = 0, record_end_ns = 0;
  std::string input_shapes, input_dtypes;
};

struct ThreadState {
  uint64_t session = 0;  // the session `log` belongs to
  std::shared_ptr<ThreadLog> log;
  std::vector<OpenFrame> open;
  // Allocations since this thread's last op closed, not yet adopted by an op: (address, index
  // in log->memory). A few at most (an op's outputs); bounded all the same.
  std::vector<std::pair<uint64_t, size_t>> unadopted;
  uint64_t os_tid = os_thread_id();
  std::string name;
};

// This thread's state; null while the thread exits, once it has been destroyed (a storage
// held by another thread_local may be freed after it).
thread_local bool thread_exiting = false;
struct ThreadStateHolder {
  ThreadState state;
  ~ThreadStateHolder() { thread_exiting = true; }
};
ThreadState* this_thread() {
  if (thread_exiting) return nullptr;
  thread_local ThreadStateHolder holder;
  return &holder.state;
}

// The session: which one is on (an id that every start and stop changes) and the logs of the
// threads that recorded in it.
struct Session {
  std::mutex mutex;
  std::atomic<uint64_t> id{0};
  SessionOptions options;
  int64_t begin_ns = 0, begin_unix_ns = 0;
  std::vector<std::shared_ptr<ThreadLog>> logs;
  std::vector<ThreadInfo> threads;
};

Session& session() {
  static Session* s = new Session;  // never destroyed: threads may record while the process exits
  return *s;
}

std::atomic<uint64_t> next_event_id{0};

// This thread's log for the session that is on, attaching the thread to it on first use;
// null when none is on (it may have stopped since the caller's check).
ThreadLog* current_log(ThreadState* state) {
  if (!state) return nullptr;
  ThreadState& t = *state;
  Session& s = session();
  const uint64_t id = s.id.load(std::memory_order_acquire);
  if (t.session == id && t.log) return t.log.get();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!is_recording() || s.id.load() != id) return nullptr;
  t.session = id;
  t.open.clear();  // frames of an earlier session close without recording
  t.unadopted.clear();
  t.log = std::make_shared<ThreadLog>();
  t.log->thread = uint32_t(s.threads.size());
  s.logs.push_back(t.log);
  std::string name = t.name;
  if (name.empty()) name = t.os_tid == uint64_t(::getpid()) ? "main thread" : "thread " + std::to_string(t.os_tid);
  s.threads.push_back({t.os_tid, std::move(name)});
  return t.log.get();
}

}  // namespace

const char* intern(std::string_view name) {
  static std::mutex* mutex = new std::mutex;
  static auto* names = new std::unordered_set<std::string>;  // nodes: the strings never move
  std::lock_guard<std::mutex> lock(*mutex);
  return names->emplace(name).first->c_str();
}

void set_thread_name(std::string name) {
  ThreadState* state = this_thread();
  if (!state) return;
  ThreadState& t = *state;
  t.name = std::move(name);
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (t.log && t.session == s.id.load() && t.log->thread < s.threads.size()) s.threads[t.log->thread].name = t.name;
}

void ScopedEvent::open(const char* name, EventKind kind, Device device) {
  ThreadLog* log = current_log(this_thread());
  if (!log) return;
  ThreadState& t = *this_thread();
  OpenFrame f;
  f.id = next_event_id.fetch_add(1, std::memory_order_relaxed) + 1;
  f.parent = t.open.empty() ? 0 : t.open.back().id;
  f.session = t.session;
  f.name = name;
  f.kind = kind;
  f.device = device;
  f.uncaught = std::uncaught_exceptions();
  f.begin_ns = now_ns();
  if (device.is_cuda()) {
    GpuMarks marks;
    marks.device = device.index;
    marks.stream = cuda::Stream::current(device.index);
    f.record_begin_ns = now_ns();
    marks.begin.record(marks.stream);
    f.record_end_ns = now_ns();
    std::lock_guard<std::mutex> lock(log->mutex);
    log->gpu.push_back(std::move(marks));
    f.gpu = int(log->gpu.size()) - 1;
  }
  t.open.push_back(std::move(f));
  id_ = t.open.back().id;
}

void ScopedEvent::set_inputs(std::string shapes, std::string dtypes) {
  ThreadState* t = this_thread();
  if (id_ == 0 || !t) return;
  for (auto it = t->open.rbegin(); it != t->open.rend(); ++it) {
    if (it->id == id_) {
      it->input_shapes = std::move(shapes);
      it->input_dtypes = std::move(dtypes);
      return;
    }
  }
}

void ScopedEvent::adopt_allocation(const void* addr) {
  ThreadState* t = this_thread();
  if (id_ == 0 || !t || !t->log) return;
  const auto key = reinterpret_cast<uintptr_t>(addr);
  for (auto it = t->unadopted.begin(); it != t->unadopted.end(); ++it) {
    if (it->first != key) continue;
    std::lock_guard<std::mutex> lock(t->log->mutex);
    if (it->second < t->log->memory.size()) t->log->memory[it->second].event = id_;
    t->unadopted.erase(it);
    return;
  }
}

void ScopedEvent::close() noexcept {
  ThreadState* state = this_thread();
  if (!state) return;
  ThreadState& t = *state;
  // Normally the innermost frame; a frame closed out of order (a ProfilerStep range around
  // frames that outlive it) is taken from wherever it is.
  auto it = std::find_if(t.open.rbegin(), t.open.rend(), [&](const OpenFrame& f) { return f.id == id_; });
  if (it == t.open.rend()) return;  // its session ended and a new one began
  OpenFrame f = std::move(*it);
  t.open.erase(std::next(it).base());
  if (f.kind == EventKind::Op) t.unadopted.clear();
  if (f.session != session().id.load(std::memory_order_acquire) || !t.log) return;
  try {
    bool timed = false;
    if (f.gpu >= 0) {
      std::lock_guard<std::mutex> lock(t.log->mutex);
      if (size_t(f.gpu) < t.log->gpu.size()) {
        GpuMarks& marks = t.log->gpu[size_t(f.gpu)];
        marks.end.record(marks.stream);
        timed = true;
      }
    }
    Event e;
    e.end_ns = now_ns();
    e.name = f.name;
    e.kind = f.kind;
    e.thread = t.log->thread;
    e.id = f.id;
    e.parent = f.parent;
    e.begin_ns = f.begin_ns;
    e.device = f.device;
    e.unwound = std::uncaught_exceptions() > f.uncaught;
    if (timed) e.gpu_begin_ns = f.gpu;  // the marks' index, until stop() reads them
    e.record_begin_ns = f.record_begin_ns;
    e.record_end_ns = f.record_end_ns;
    e.input_shapes = std::move(f.input_shapes);
    e.input_dtypes = std::move(f.input_dtypes);
    std::lock_guard<std::mutex> lock(t.log->mutex);
    t.log->events.push_back(std::move(e));
  } catch (...) {
    // Out of memory, or a CUDA error recording the event: this one event is lost, and the
    // error surfaces at the op's next CUDA call.
  }
}

void record_memory(const void* addr, int64_t bytes, Device device) {
  ThreadLog* log = current_log(this_thread());
  if (!log) return;
  ThreadState& t = *this_thread();
  MemoryRecord r;
  r.ns = now_ns();
  r.thread = log->thread;
  r.event = t.open.empty() ? 0 : t.open.back().id;
  r.addr = reinterpret_cast<uintptr_t>(addr);
  r.bytes = bytes;
  r.device = device;
  r.total_allocated = int64_t(device.is_cpu() ? cpu::memory_allocated() : cuda::memory_allocated(device.index));
  size_t index;
  {
    std::lock_guard<std::mutex> lock(log->mutex);
    index = log->memory.size();
    log->memory.push_back(r);
  }
  if (bytes > 0) {
    if (t.unadopted.size() >= 64) t.unadopted.erase(t.unadopted.begin());
    t.unadopted.emplace_back(r.addr, index);
  } else {
    // Freed before any op took it: an op's output made later at the same address (the
    // caching allocators reuse blocks) must not adopt this record.
    std::erase_if(t.unadopted, [&](const std::pair<uint64_t, size_t>& u) { return u.first == r.addr; });
  }
}

namespace detail {

void start(const SessionOptions& options) {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  LOOM_CHECK(!is_recording(), ValueError,
             "profiler: a Profile is already recording; one at a time (stop it before starting another)");
  s.options = options;
  s.logs.clear();
  s.threads.clear();
  s.begin_unix_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  s.begin_ns = now_ns();
  s.id.fetch_add(1);
  flags.store(kRecording | (options.record_shapes ? kShapes : 0) | (options.profile_memory ? kMemory : 0));
}

namespace {

// Places each op's GPU span on the host clock (Note [profiler recording]); `marks` are the
// logs' timing events, by thread.
void read_gpu_marks(std::vector<Event>& events, const std::map<uint32_t, std::vector<GpuMarks>>& marks) {
  std::map<int, std::pair<int64_t, cuda::Event>> ends;  // per device: host now, and a last event
  for (const auto& [thread, list] : marks)
    for (const GpuMarks& m : list) {
      if (ends.count(m.device)) continue;
      cuda::synchronize(m.device);
      cuda::Event last(true);
      last.record(cuda::Stream::current(m.device));
      last.synchronize();
      ends.emplace(m.device, std::make_pair(now_ns(), std::move(last)));
    }
  for (Event& e : events) {
    if (e.gpu_begin_ns < 0) continue;
    const GpuMarks& m = marks.at(e.thread)[size_t(e.gpu_begin_ns)];
    const auto& [host_now, last] = ends.at(m.device);
    e.gpu_end_ns = host_now - int64_t(double(m.end.elapsed_ms(last)) * 1e6);
    e.gpu_begin_ns = e.gpu_end_ns - int64_t(double(m.begin.elapsed_ms(m.end)) * 1e6);
    e.stream = reinterpret_cast<uintptr_t>(m.stream.handle());
  }
}

}  // namespace

Recording stop() {
  Session& s = session();
  Recording r;
  std::map<uint32_t, std::vector<GpuMarks>> marks;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_recording()) return r;
    flags.store(0);
    s.id.fetch_add(1);  // frames still open close without recording
    r.end_ns = now_ns();
    r.begin_ns = s.begin_ns;
    r.begin_unix_ns = s.begin_unix_ns;
    r.record_shapes = s.options.record_shapes;
    r.profile_memory = s.options.profile_memory;
    r.threads = std::move(s.threads);
    for (const std::shared_ptr<ThreadLog>& log : s.logs) {
      std::lock_guard<std::mutex> log_lock(log->mutex);
      r.events.insert(r.events.end(), std::make_move_iterator(log->events.begin()),
                      std::make_move_iterator(log->events.end()));
      r.memory.insert(r.memory.end(), log->memory.begin(), log->memory.end());
      if (!log->gpu.empty()) marks[log->thread] = std::move(log->gpu);
    }
    s.logs.clear();
  }
  read_gpu_marks(r.events, marks);
  std::stable_sort(r.events.begin(), r.events.end(), [](const Event& a, const Event& b) {
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.id < b.id;
  });
  std::stable_sort(r.memory.begin(), r.memory.end(),
                   [](const MemoryRecord& a, const MemoryRecord& b) { return a.ns < b.ns; });
  return r;
}

}  // namespace detail

}  // namespace loom::profiler
