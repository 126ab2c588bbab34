#!/usr/bin/env bash
# The one command for a GPU machine: builds Loom with its CUDA backend for sm_90 (H100 /
# H200), runs the whole test suite with the CUDA tests, runs the GPU benchmarks (Loom and
# the machine's PyTorch in the same run) and prints a short table last.
#
# Made for a machine with CUDA 13, CMake, ninja and PyTorch but no Debian dev packages and
# no network: run scripts/gpu-prep.sh on a development machine first, which copies the
# header-only dependencies into .gpu-deps/ (carry that folder along). cuDNN is taken from
# the system, or from the nvidia-cudnn pip package the machine's PyTorch uses.
#
#   bash scripts/gpu-check.sh            # logs and JSON lines go to $OUT (or build/gpu-check)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
out=${OUT:-build/gpu-check}
mkdir -p "$out"
jobs=$(nproc)

prefix=()
[ -d .gpu-deps/usr ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr")

# cuDNN: the system's, or the one inside the nvidia-cudnn-cu13 wheel.
# (nvidia.cudnn may be a namespace package without __file__: ask for its folder.)
cudnn_root=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.cudnn"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
if [ -n "$cudnn_root" ]; then
  export CUDNN_ROOT="$cudnn_root"
  export LD_LIBRARY_PATH="$cudnn_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

echo "== configure + build (sm_90, $jobs jobs)"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DLOOM_USE_CCACHE=OFF "${prefix[@]}" \
  ${CUDNN_ROOT:+-DCUDNN_ROOT="$CUDNN_ROOT"} >"$out/configure.log" 2>&1 \
  || { tail -40 "$out/configure.log"; exit 1; }
cmake --build build/gpu -j "$jobs" >"$out/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
build_s=$(( $(date +%s) - start ))

echo "== tests"
# Two disjoint runs: the CPU suite, then the CUDA tests (label cuda), each test once.
ctest --test-dir build/gpu -LE cuda -j "$jobs" --timeout 300 --output-on-failure >"$out/ctest.log" 2>&1
cpu_rc=$?
ctest --test-dir build/gpu -L cuda -j 4 --timeout 300 --output-on-failure >"$out/ctest-cuda.log" 2>&1
cuda_rc=$?
tests_rc=$(( cpu_rc || cuda_rc ))
# The failures first, with the lines that say why (a GPU session has little time to rerun).
for log in "$out/ctest.log" "$out/ctest-cuda.log"; do
  sed -n '/The following tests FAILED/,$p' "$log"
  grep -E -B2 -A6 "FAILED:|with expansion|due to unexpected exception|SIGSEGV|Subprocess aborted" "$log" | head -80
done

echo "== benchmarks"
: >"$out/bench.jsonl"
for b in build/gpu/bench/bench_cuda; do
  [ -x "$b" ] && "$b" | tee -a "$out/bench.jsonl"
done
[ -f bench/torch_cuda_bench.py ] && python3 bench/torch_cuda_bench.py | tee -a "$out/bench.jsonl"
# The training workloads of shared/workloads.md on the GPU, Loom then PyTorch.
: >"$out/workloads.jsonl"
[ -x build/gpu/bench/loom-bench ] && timeout 120 build/gpu/bench/loom-bench --device cuda | tee -a "$out/workloads.jsonl"
timeout 120 python3 bench/torch_workloads.py --device cuda | tee -a "$out/workloads.jsonl"

echo "== summary"
python3 - "$out" "$build_s" "$tests_rc" <<'EOF'
import json, re, sys
out, build_s, tests_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
def counts(log):
    text = open(log).read()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    skipped = len(re.findall(r"\(Skipped\)", text))
    if not m: return "no result (see %s)" % log
    total, failed = int(m.group(3)), int(m.group(2))
    return "%d run: %d passed, %d failed, %d skipped" % (total, total - failed - skipped, failed, skipped)
print("GPU:", open(out + "/gpu.txt").read().strip())
print("build: %s s" % build_s)
print("CPU tests:  ", counts(out + "/ctest.log"))
print("CUDA tests: ", counts(out + "/ctest-cuda.log"))
rows = [json.loads(l) for l in open(out + "/bench.jsonl") if l.startswith("{")]
if rows:
    print("| bench | framework | size | dtype | value | unit | of ceiling |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        frac = "%.2f" % r["fraction_of_ceiling"] if "fraction_of_ceiling" in r else ""
        print("| %s | %s | %s | %s | %.4g | %s | %s |" % (r["bench"], r["framework"], r.get("size", ""),
              r.get("dtype", ""), r["value"], r["unit"], frac))
runs = {}
for l in open(out + "/workloads.jsonl"):
    if l.startswith("{"):
        r = json.loads(l)
        runs.setdefault(r["workload"], {})["loom" if r["framework"] == "loom" else "torch"] = r["ms_per_step"]
if runs:
    print("| workload (cuda) | Loom ms/step | PyTorch ms/step | PyTorch/Loom |")
    print("|---|---|---|---|")
    for name, r in runs.items():
        loom, torch = r.get("loom"), r.get("torch")
        ratio = "%.2fx" % (torch / loom) if loom and torch else ""
        print("| %s | %s | %s | %s |" % (name, "%.3f" % loom if loom else "-", "%.3f" % torch if torch else "-", ratio))
EOF
exit $tests_rc
