// All-reduce bandwidth of distributed/'s Gloo process group, in the terms of nccl-tests: run
// it under loomrun, N ranks on one machine (the loopback), and rank 0 prints one JSON line per
// tensor size.
//
//   loomrun --standalone --nproc-per-node 2 build/cpu/bench/loom-bench-allreduce [--iters K] [--warmup W] [--sizes-mb 1,25,100]
//
// For each size (MB = 10^6 bytes of float32), W untimed all_reduce(SUM) calls, then K timed
// ones. Each timed call starts after a barrier and ends when wait() returns; its time is the
// slowest rank's (an all_reduce(MAX) of every rank's times at the end), and the figure is the
// median over the K calls. Fields: bench, impl ("loom-gloo"), bytes, ranks, iters,
// seconds (median per op), algbw = bytes / seconds and busbw = algbw × 2(n−1)/n in GB/s
// (10^9 bytes/s; busbw is the nccl-tests figure for a ring all-reduce, comparable across
// rank counts), and load1. bench/torch_allreduce.py measures the same with torch.distributed.
//
// Before timing, one all_reduce of rank-dependent values is checked against its closed form,
// so a wrong result is an error here rather than a fast figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "distributed/distributed.h"
#include "loom.h"

using namespace loom;
namespace dist = loom::distributed;

namespace {

struct Options {
  int iters = 10;
  int warmup = 3;
  std::vector<double> sizes_mb = {1, 25, 100};
};

[[noreturn]] void usage(const char* argv0, const std::string& problem) {
  std::fprintf(stderr,
               "loom-bench-allreduce: %s\nusage: loomrun --standalone --nproc-per-node N %s [--iters K] [--warmup W] "
               "[--sizes-mb 1,25,100]\n",
               problem.c_str(), argv0);
  std::exit(2);
}

int count(const char* flag, const char* value, int min, const char* argv0) {
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || n < min || n > 100000)
    usage(argv0, std::string(flag) + " expects an integer >= " + std::to_string(min) + ", got '" + value + "'");
  return int(n);
}

std::vector<double> sizes(const char* value, const char* argv0) {
  std::vector<double> out;
  std::string s = value;
  for (size_t start = 0; start <= s.size();) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(start, comma - start);
    char* end = nullptr;
    const double mb = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(mb > 0) || mb > 4096)
      usage(argv0, "--sizes-mb expects positive sizes in MB separated by commas, got '" + s + "'");
    out.push_back(mb);
    start = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--iters" && has_value) {
      o.iters = count("--iters", argv[++i], 1, argv[0]);
    } else if (arg == "--warmup" && has_value) {
      o.warmup = count("--warmup", argv[++i], 0, argv[0]);
    } else if (arg == "--sizes-mb" && has_value) {
      o.sizes_mb = sizes(argv[++i], argv[0]);
    } else if (arg == "-h" || arg == "--help") {
      usage(argv[0], "all_reduce(SUM) bandwidth of the Gloo process group");
    } else {
      usage(argv[0], "unknown argument '" + arg + "'");
    }
  }
  return o;
}

// One all_reduce(SUM) of value (rank + 1) at every element; each must be n(n+1)/2.
void check_sum(Tensor t, int rank, int world) {
  t.fill_(double(rank + 1));
  dist::all_reduce(t, dist::ReduceOp::SUM)->wait();
  const float want = float(world * (world + 1) / 2);
  const float* p = t.data_ptr<float>();
  const int64_t n = t.numel();
  for (int64_t i : {int64_t(0), n / 2, n - 1})
    LOOM_CHECK(p[i] == want, dist::DistributedError, "loom-bench-allreduce: rank ", rank, ": element ", i,
               " of the check all_reduce is ", p[i], ", expected ", want);
}

// The median over the timed calls of the slowest rank's seconds.
double time_all_reduce(const Tensor& t, const Options& o) {
  for (int i = 0; i < o.warmup; ++i) dist::all_reduce(t)->wait();
  Tensor times = zeros({o.iters}, TensorOptions().dtype(kFloat64));
  double* seconds = times.data_ptr<double>();
  for (int i = 0; i < o.iters; ++i) {
    dist::barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    dist::all_reduce(t)->wait();
    seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  dist::all_reduce(times, dist::ReduceOp::MAX)->wait();
  std::vector<double> sorted(seconds, seconds + o.iters);
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::minutes(5)));
    const int rank = dist::get_rank(), world = dist::get_world_size();
    for (double mb : o.sizes_mb) {
      const int64_t n = std::max<int64_t>(1, int64_t(mb * 1e6 / sizeof(float)));
      const int64_t bytes = n * int64_t(sizeof(float));
      Tensor t = zeros({n});  // float32
      check_sum(t, rank, world);
      t.fill_(0.0);  // repeated sums of zeros stay finite (and cost the same)
      const double seconds = time_all_reduce(t, o);
      const double algbw = double(bytes) / seconds / 1e9;
      const double busbw = algbw * 2.0 * (world - 1) / world;
      if (rank == 0) {
        std::printf("{\"bench\":\"allreduce\",\"impl\":\"loom-gloo\",\"op\":\"sum\",\"dtype\":\"float32\","
                    "\"bytes\":%lld,\"ranks\":%d,\"iters\":%d,\"seconds\":%.6g,\"algbw_gbps\":%.4g,"
                    "\"busbw_gbps\":%.4g,\"load1\":%.2f}\n",
                    static_cast<long long>(bytes), world, o.iters, seconds, algbw, busbw, bench::load1());
        std::fflush(stdout);
      }
    }
    dist::barrier()->wait();
    dist::destroy_process_group();
  } catch (const Error& e) {
    std::fprintf(stderr, "loom-bench-allreduce: %s\n", e.what());
    return 1;
  }
  return 0;
}
