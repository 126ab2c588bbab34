#include "train/profiler/profile_table.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace loom::profiler {

std::string display_name(const Event& e) {
  return e.kind == EventKind::Op ? std::string("loom::") + e.name : std::string(e.name);
}

Analysis analyze(const Recording& r) {
  const size_t n = r.events.size();
  std::vector<EventStats> stats(n);
  std::unordered_map<uint64_t, size_t> index;  // event id -> position
  index.reserve(n);
  for (size_t i = 0; i < n; ++i) index.emplace(r.events[i].id, i);
  std::vector<size_t> parent(n, SIZE_MAX);
  for (size_t i = 0; i < n; ++i) {
    auto it = index.find(r.events[i].parent);
    if (r.events[i].parent != 0 && it != index.end()) parent[i] = it->second;
  }
  // Depths top-down (a parent begins before its children, so comes first), then the sums
  // bottom-up (backwards).
  for (size_t i = 0; i < n; ++i) stats[i].depth = parent[i] == SIZE_MAX ? 0 : stats[parent[i]].depth + 1;
  std::vector<int64_t> children_cpu(n, 0), children_cuda(n, 0);
  for (size_t i = n; i-- > 0;) {
    const Event& e = r.events[i];
    EventStats& s = stats[i];
    s.self_cpu_ns = e.duration_ns() - children_cpu[i];
    if (e.has_gpu_time()) {
      s.cuda_total_ns = e.gpu_end_ns - e.gpu_begin_ns;
      s.self_cuda_ns = std::max<int64_t>(0, s.cuda_total_ns - children_cuda[i]);
    } else {
      s.cuda_total_ns = children_cuda[i];
    }
    if (parent[i] != SIZE_MAX) {
      children_cpu[parent[i]] += e.duration_ns();
      children_cuda[parent[i]] += s.cuda_total_ns;
    }
  }
  // Memory: each record is the innermost event's own; totals and peaks walk up its ancestors.
  std::vector<int64_t> live_cpu(n, 0), live_cuda(n, 0);
  for (const MemoryRecord& m : r.memory) {
    auto it = index.find(m.event);
    if (m.event == 0 || it == index.end()) continue;
    const bool cuda = m.device.is_cuda();
    (cuda ? stats[it->second].self_cuda_memory : stats[it->second].self_cpu_memory) += m.bytes;
    for (size_t a = it->second; a != SIZE_MAX; a = parent[a]) {
      int64_t& live = cuda ? live_cuda[a] : live_cpu[a];
      int64_t& peak = cuda ? stats[a].cuda_memory_peak : stats[a].cpu_memory_peak;
      live += m.bytes;
      peak = std::max(peak, live);
      (cuda ? stats[a].cuda_memory : stats[a].cpu_memory) += m.bytes;
    }
  }
  return {r, std::move(stats)};
}

StepCoverage step_coverage(const Analysis& a) {
  const Recording& r = a.recording;
  StepCoverage c;
  std::unordered_map<uint64_t, const Event*> by_id;
  for (const Event& e : r.events) {
    by_id.emplace(e.id, &e);
    if (e.kind != EventKind::Step) continue;
    ++c.steps;
    c.wall_ns += e.duration_ns();
  }
  const auto parent = [&](const Event& e) -> const Event* {
    auto it = by_id.find(e.parent);
    return e.parent != 0 && it != by_id.end() ? it->second : nullptr;
  };
  const std::vector<EventStats>& stats = a.stats;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    const Event* p = parent(e);
    if (p && p->kind == EventKind::Step) c.named_ns += e.duration_ns();
    if (!e.has_gpu_time()) continue;
    while (p && p->kind != EventKind::Step) p = parent(*p);
    if (p) c.gpu_ns += stats[i].self_cuda_ns;
  }
  return c;
}

namespace {

// A time as torch.profiler prints it: "812.000us", "3.456ms", "1.234s".
std::string format_time(int64_t ns) {
  char buf[32];
  const double us = double(ns) / 1e3;
  if (us >= 1e6 || us <= -1e6)
    std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3 || us <= -1e3)
    std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

// Bytes as torch.profiler prints them: "12.00 Mb", "-4.00 Kb", "512 b".
std::string format_memory(int64_t bytes) {
  char buf[32];
  const double b = double(bytes), a = std::abs(b);
  if (a >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f Gb", b / (1024.0 * 1024 * 1024));
  else if (a >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f Mb", b / (1024.0 * 1024));
  else if (a >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f Kb", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%" PRId64 " b", bytes);
  return buf;
}

std::string format_percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

int64_t mean(int64_t total, int64_t count) { return count > 0 ? total / count : 0; }

using SortKey = std::function<double(const EventAverage&)>;

const std::vector<std::pair<const char*, SortKey>>& sort_keys() {
  static const std::vector<std::pair<const char*, SortKey>> keys = {
      {"self_cpu_time_total", [](const EventAverage& a) { return double(a.self_cpu_ns); }},
      {"cpu_time_total", [](const EventAverage& a) { return double(a.cpu_total_ns); }},
      {"cpu_time", [](const EventAverage& a) { return double(mean(a.cpu_total_ns, a.count)); }},
      {"self_cuda_time_total", [](const EventAverage& a) { return double(a.self_cuda_ns); }},
      {"cuda_time_total", [](const EventAverage& a) { return double(a.cuda_total_ns); }},
      {"cuda_time", [](const EventAverage& a) { return double(mean(a.cuda_total_ns, a.count)); }},
      {"self_cpu_memory_usage", [](const EventAverage& a) { return double(a.self_cpu_memory); }},
      {"cpu_memory_usage", [](const EventAverage& a) { return double(a.cpu_memory); }},
      {"self_cuda_memory_usage", [](const EventAverage& a) { return double(a.self_cuda_memory); }},
      {"cuda_memory_usage", [](const EventAverage& a) { return double(a.cuda_memory); }},
      {"cpu_memory_peak", [](const EventAverage& a) { return double(a.cpu_memory_peak); }},
      {"cuda_memory_peak", [](const EventAverage& a) { return double(a.cuda_memory_peak); }},
      {"count", [](const EventAverage& a) { return double(a.count); }},
  };
  return keys;
}

const SortKey& sort_key(const std::string& name) {
  std::string known;
  for (const auto& [key, fn] : sort_keys()) {
    if (name == key) return fn;
    known += (known.empty() ? "" : ", ") + std::string(key);
  }
  throw ValueError("key_averages().table: cannot sort by '" + name + "'; the columns are " + known);
}

struct Column {
  const char* title;
  std::function<std::string(const EventAverage&)> cell;
};

}  // namespace

KeyAverages::KeyAverages(const Analysis& a, bool group_by_input_shape) : by_shape_(group_by_input_shape) {
  const Recording& r = a.recording;
  const std::vector<EventStats>& stats = a.stats;
  has_memory_ = r.profile_memory;
  std::map<std::pair<std::string, std::string>, size_t> row_of;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    const EventStats& s = stats[i];
    std::pair<std::string, std::string> key{e.kind == EventKind::Step ? "ProfilerStep*" : display_name(e),
                                            group_by_input_shape ? e.input_shapes : std::string()};
    auto [it, added] = row_of.emplace(key, rows_.size());
    if (added) rows_.push_back({key.first, key.second, e.kind});
    EventAverage& a = rows_[it->second];
    ++a.count;
    a.self_cpu_ns += s.self_cpu_ns;
    a.cpu_total_ns += e.duration_ns();
    a.self_cuda_ns += s.self_cuda_ns;
    a.cuda_total_ns += s.cuda_total_ns;
    a.self_cpu_memory += s.self_cpu_memory;
    a.cpu_memory += s.cpu_memory;
    a.self_cuda_memory += s.self_cuda_memory;
    a.cuda_memory += s.cuda_memory;
    a.cpu_memory_peak = std::max(a.cpu_memory_peak, s.cpu_memory_peak);
    a.cuda_memory_peak = std::max(a.cuda_memory_peak, s.cuda_memory_peak);
    self_cpu_total_ += s.self_cpu_ns;
    self_cuda_total_ += s.self_cuda_ns;
    has_cuda_ = has_cuda_ || e.has_gpu_time();
  }
  steps_ = step_coverage(a);
}

std::string KeyAverages::table(const TableOptions& options) const {
  const SortKey& key = sort_key(options.sort_by);
  std::vector<const EventAverage*> sorted;
  for (const EventAverage& a : rows_) sorted.push_back(&a);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const EventAverage* a, const EventAverage* b) { return key(*a) > key(*b); });
  if (options.row_limit > 0 && sorted.size() > options.row_limit) sorted.resize(options.row_limit);

  const int64_t cpu_total = self_cpu_total_, cuda_total = self_cuda_total_;
  std::vector<Column> columns = {
      {"Self CPU %", [=](const EventAverage& a) { return format_percent(a.self_cpu_ns, cpu_total); }},
      {"Self CPU", [](const EventAverage& a) { return format_time(a.self_cpu_ns); }},
      {"CPU total %", [=](const EventAverage& a) { return format_percent(a.cpu_total_ns, cpu_total); }},
      {"CPU total", [](const EventAverage& a) { return format_time(a.cpu_total_ns); }},
      {"CPU time avg", [](const EventAverage& a) { return format_time(mean(a.cpu_total_ns, a.count)); }},
  };
  if (has_cuda_) {
    columns.push_back({"Self CUDA", [](const EventAverage& a) { return format_time(a.self_cuda_ns); }});
    columns.push_back(
        {"Self CUDA %", [=](const EventAverage& a) { return format_percent(a.self_cuda_ns, cuda_total); }});
    columns.push_back({"CUDA total", [](const EventAverage& a) { return format_time(a.cuda_total_ns); }});
    columns.push_back(
        {"CUDA time avg", [](const EventAverage& a) { return format_time(mean(a.cuda_total_ns, a.count)); }});
  }
  if (has_memory_) {
    columns.push_back({"CPU Mem", [](const EventAverage& a) { return format_memory(a.cpu_memory); }});
    columns.push_back({"Self CPU Mem", [](const EventAverage& a) { return format_memory(a.self_cpu_memory); }});
    columns.push_back({"CPU Peak", [](const EventAverage& a) { return format_memory(a.cpu_memory_peak); }});
    if (has_cuda_) {
      columns.push_back({"CUDA Mem", [](const EventAverage& a) { return format_memory(a.cuda_memory); }});
      columns.push_back({"Self CUDA Mem", [](const EventAverage& a) { return format_memory(a.self_cuda_memory); }});
      columns.push_back({"CUDA Peak", [](const EventAverage& a) { return format_memory(a.cuda_memory_peak); }});
    }
  }
  columns.push_back({"# of Calls", [](const EventAverage& a) { return std::to_string(a.count); }});
  if (by_shape_) columns.push_back({"Input Shapes", [](const EventAverage& a) { return a.input_shapes; }});

  size_t name_width = 4;
  for (const EventAverage* a : sorted) name_width = std::max(name_width, a->key.size());
  name_width = std::min(name_width, std::max<size_t>(options.max_name_column_width, 8));
  std::vector<size_t> widths;
  for (const Column& c : columns) {
    size_t w = std::max<size_t>(12, std::string(c.title).size());
    for (const EventAverage* a : sorted) w = std::max(w, c.cell(*a).size());
    widths.push_back(w);
  }
  std::string rule(name_width, '-');
  for (size_t w : widths) rule += "  " + std::string(w, '-');
  rule += "\n";
  const auto pad_left = [](const std::string& s, size_t w) {
    return std::string(w > s.size() ? w - s.size() : 0, ' ') + s;
  };
  std::string out = rule + pad_left("Name", name_width);
  for (size_t c = 0; c < columns.size(); ++c) out += "  " + pad_left(columns[c].title, widths[c]);
  out += "\n" + rule;
  for (const EventAverage* a : sorted) {
    std::string name = a->key.size() > name_width ? a->key.substr(0, name_width - 3) + "..." : a->key;
    out += pad_left(name, name_width);
    for (size_t c = 0; c < columns.size(); ++c) out += "  " + pad_left(columns[c].cell(*a), widths[c]);
    out += "\n";
  }
  out += rule;
  out += "Self CPU time total: " + format_time(self_cpu_total_) + "\n";
  if (has_cuda_) out += "Self CUDA time total: " + format_time(self_cuda_total_) + "\n";
  if (steps_.steps > 0) {
    char line[240];
    const int n =
        std::snprintf(line, sizeof line, "Steps: %" PRId64 ", %s each on average; %.1f%% of their wall time is inside named events",
                      steps_.steps, format_time(steps_.wall_ns / steps_.steps).c_str(), 100.0 * steps_.fraction());
    if (has_cuda_)
      std::snprintf(line + n, sizeof line - size_t(n), "; their ops' GPU time: %s each",
                    format_time(steps_.gpu_ns / steps_.steps).c_str());
    out += line;
    out += "\n";
  }
  return out;
}

}  // namespace loom::profiler
