// core/cpu_features.h against what Linux says of the same CPU (/proc/cpuinfo's flags, which
// the kernel clears for a feature whose registers it does not save, as cpu_features does),
// the kernels' checks built on it, and loom-cpu-info's feature line.
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "test_util.h"
#include "core/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_report.h"

using namespace loom;
namespace kcpu = loom::kernels::cpu;

namespace {

using Flags = std::initializer_list<std::pair<std::string, bool>>;

// The first processor's flags; empty where there is no /proc/cpuinfo (or no x86 flags line).
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

}  // namespace

TEST_CASE("cpu_features: the flags Linux reports for this CPU", "[cpu_features]") {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) {
    WARN("no x86 flags in /proc/cpuinfo: nothing to compare");
    return;
  }
  const CpuFeatures& f = cpu_features();
  // Flags every kernel that runs Loom knows: the same both ways.
  for (const auto& [flag, has] : Flags{{"sse4_2", f.sse42}, {"fma", f.fma}, {"avx2", f.avx2}, {"avx512f", f.avx512f},
                                       {"avx512bw", f.avx512bw}, {"avx512dq", f.avx512dq}, {"avx512vl", f.avx512vl}}) {
    INFO(flag);
    REQUIRE(has == (flags.count(flag) == 1));
  }
  // Newer flags (Linux 5.3 to 5.16) that an older kernel does not print although the CPU has
  // them (and saves their registers): only a flag Linux prints must be here.
  for (const auto& [flag, has] : Flags{{"avx512_bf16", f.avx512_bf16}, {"avx512_fp16", f.avx512_fp16},
                                       {"amx_bf16", f.amx_bf16}, {"amx_tile", f.amx_tile}}) {
    INFO(flag);
    if (flags.count(flag)) REQUIRE(has);
  }
}

TEST_CASE("cpu_features: the kernels' checks and loom-cpu-info's feature line", "[cpu_features]") {
  const CpuFeatures& f = cpu_features();
  REQUIRE(kcpu::cpu_has_avx2() == (f.avx2 && f.fma));
  REQUIRE(kcpu::cpu_has_avx512() == (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.fma));
  REQUIRE(kcpu::cpu_has_avx512_bf16() == (kcpu::cpu_has_avx512() && f.avx512_bf16));
  if (kcpu::cpu_has_amx_bf16()) REQUIRE((f.amx_bf16 && f.amx_tile));
  const std::string report = kcpu::cpu_gemm_report();
  const std::string features = report.substr(0, report.find('\n'));
  INFO(features);
  for (const auto& [name, has] : Flags{{"avx2", f.avx2}, {"avx512f", f.avx512f}, {"avx512_bf16", f.avx512_bf16},
                                       {"avx512_fp16", f.avx512_fp16}, {"amx_bf16", f.amx_bf16}, {"amx_tile", f.amx_tile}})
    REQUIRE_THAT(features, Catch::Contains(name + (has ? " yes" : " no")));
}
