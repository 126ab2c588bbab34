#!/usr/bin/env bash
# The one command for a GPU machine: builds Loom with its CUDA backend for sm_90 (H100 /
# H200), runs the whole test suite with the CUDA tests, runs the GPU benchmarks (Loom and
# the machine's PyTorch in the same run) and prints a short table last.
#
# Made for a machine with CUDA 13, CMake, ninja and PyTorch but no Debian dev packages and
# no network: run scripts/gpu-prep.sh on a development machine first, which copies the
# header-only dependencies and Gloo into .gpu-deps/ (carry that folder along). cuDNN and
# NCCL are taken from the system, or from the nvidia-cudnn / nvidia-nccl pip packages the
# machine's PyTorch uses. The CUDA tests include the nccl backend's (ProcessGroupNCCL: ...).
#
#   bash scripts/gpu-check.sh            # logs and JSON lines go to $OUT (or build/gpu-check)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
out=${OUT:-build/gpu-check}
mkdir -p "$out"
jobs=$(nproc)
# The device tool gives a command 600 s: the stages below run most important first
# (build, CUDA tests, benchmarks, then the CPU suite, which CI also runs) and each gets
# only the time that is left, so the summary always prints.
budget=${LOOM_GPU_CHECK_BUDGET_S:-560}
left() { echo $(( budget - ($(date +%s) - start) )); }
# A timeout of at most $1 s and at least 1 s within what is left (GNU timeout reads 0 as
# "no limit" and refuses a negative one).
within() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
# Runs the rest of the line under such a timeout, or skips it when under 10 s are left.
budgeted() { local cap=$1; shift; [ "$(left)" -ge 10 ] || { echo "skipped (out of time): $*"; return 124; }; timeout "$(within "$cap")" "$@"; }
# Each test process would otherwise keep one spinning OpenMP thread per core.
export OMP_WAIT_POLICY=PASSIVE

prefix=()
if [ -d .gpu-deps/usr ]; then
  prefix=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr")
  # oneDNN travels gzipped (40 MB as it is): unpack it where the linker and loader look.
  if [ -f .gpu-deps/usr/lib/libdnnl.so.2.6.gz ] && [ ! -f .gpu-deps/usr/lib/libdnnl.so.2.6 ]; then
    gunzip -k .gpu-deps/usr/lib/libdnnl.so.2.6.gz
    ln -sf libdnnl.so.2.6 .gpu-deps/usr/lib/libdnnl.so.2
    ln -sf libdnnl.so.2 .gpu-deps/usr/lib/libdnnl.so
  fi
  # libgloo.so, libdnnl.so and the libraries they need, for the linker and for the tests.
  export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib:$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

# cuDNN: the system's, or the one inside the nvidia-cudnn-cu13 wheel.
# (nvidia.cudnn may be a namespace package without __file__: ask for its folder.)
cudnn_root=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.cudnn"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
if [ -n "$cudnn_root" ]; then
  export CUDNN_ROOT="$cudnn_root"
  export LD_LIBRARY_PATH="$cudnn_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NCCL: the toolkit's, or the nvidia-nccl-cu13 wheel's (CMakeLists.txt looks there too).
nccl_root=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
if [ -n "$nccl_root" ]; then
  export NCCL_ROOT="$nccl_root"
  export LD_LIBRARY_PATH="$nccl_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

echo "== configure + build (sm_90, $jobs jobs)"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc_path" -DCMAKE_CUDA_ARCHITECTURES=90 -DLOOM_USE_CCACHE=OFF "${prefix[@]}" \
  ${CUDNN_ROOT:+-DCUDNN_ROOT="$CUDNN_ROOT"} >"$out/configure.log" 2>&1 \
  || { tail -40 "$out/configure.log"; exit 1; }
# A configure that found no CUDA compiler builds the CPU backend only: every CUDA test
# would then be skipped. Stop instead.
grep -q "CUDA backend ON" "$out/configure.log" || { echo "configured WITHOUT CUDA"; tail -40 "$out/configure.log"; exit 1; }
grep -i "cudnn" "$out/configure.log" | head -3
# Without NCCL the ProcessGroupNCCL tests skip themselves (exit 77): say so up front.
grep "NCCL" "$out/configure.log" | head -3
budgeted 100000 cmake --build build/gpu -j "$jobs" >"$out/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; tail -5 "$out/build.log"; exit 1; }
build_s=$(( $(date +%s) - start ))

echo "== CUDA tests ($(left) s left)"
# Two disjoint runs, each test once: the CUDA tests (label cuda) first, the CPU suite last.
budgeted 100000 ctest --test-dir build/gpu -L cuda -j 4 --timeout 300 --output-on-failure >"$out/ctest-cuda.log" 2>&1
cuda_rc=$?
# The nccl backend's tests are among them (a world of one on this GPU).
grep -E "Test +#[0-9]+: ProcessGroupNCCL" "$out/ctest-cuda.log" > "$out/nccl.txt" || echo "no ProcessGroupNCCL test ran" > "$out/nccl.txt"

echo "== benchmarks ($(left) s left)"
: >"$out/bench.jsonl"
[ -x build/gpu/bench/bench_cuda ] && budgeted 90 build/gpu/bench/bench_cuda | tee -a "$out/bench.jsonl"
[ -f bench/torch_cuda_bench.py ] && budgeted 90 python3 bench/torch_cuda_bench.py | tee -a "$out/bench.jsonl"
# The training workloads of shared/workloads.md on the GPU, Loom then PyTorch.
: >"$out/workloads.jsonl"
[ -x build/gpu/bench/loom-bench ] && budgeted 90 build/gpu/bench/loom-bench --device cuda | tee -a "$out/workloads.jsonl"
budgeted 90 python3 bench/torch_workloads.py --device cuda | tee -a "$out/workloads.jsonl"
# Two of them under the profiler (docs/profiling.md): the trace, timeline and table of their
# measured steps come back in $out/profile, and the JSON lines say how much of a step's time its
# ops' GPU spans cover (profile_gpu_ms_per_step beside ms_per_step).
[ -x build/gpu/bench/loom-bench ] && budgeted 60 build/gpu/bench/loom-bench --device cuda --steps 5 \
  --profile "$out/profile" lstm-sentiment transformer-small 2>"$out/profile-tables.txt" | tee "$out/profile.jsonl"
# The CPU-vs-GPU epoch table of the flagship (docs/benchmarks.md), on a subset to fit the time.
OUT="$out/epoch-table" budgeted 120 bash scripts/epoch-table.sh --no-build --epochs 2 --train-limit 4096 \
  --cpu-build build/gpu --cuda-build build/gpu > "$out/epoch-table.txt" 2>&1 || echo "epoch table: failed (rc $?)" >> "$out/epoch-table.txt"

echo "== CPU tests ($(left) s left)"
if [ "$(left)" -gt 30 ]; then
  budgeted 100000 ctest --test-dir build/gpu -LE cuda -j 8 --timeout 300 --output-on-failure >"$out/ctest.log" 2>&1
  cpu_rc=$?
else
  echo "not run: out of time" >"$out/ctest.log"
  cpu_rc=1
fi
tests_rc=$(( cpu_rc || cuda_rc ))
# The failures first, with the lines that say why (a GPU session has little time to rerun).
for log in "$out/ctest-cuda.log" "$out/ctest.log"; do
  sed -n '/The following tests FAILED/,$p' "$log"
  grep -E -B2 -A6 "FAILED:|with expansion|due to unexpected exception|SIGSEGV|Subprocess aborted" "$log" | head -80
done

echo "== summary"
python3 - "$out" "$build_s" "$tests_rc" <<'EOF'
import json, re, sys
out, build_s, tests_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
def counts(log):
    text = open(log).read()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    skipped = len(re.findall(r"\(Skipped\)", text))
    if not m: return "no result (see %s): %s" % (log, text.strip().splitlines()[-1:] )
    total, failed = int(m.group(3)), int(m.group(2))
    return "%d run: %d passed, %d failed, %d skipped" % (total, total - failed - skipped, failed, skipped)
print("GPU:", open(out + "/gpu.txt").read().strip())
print("build: %s s" % build_s)
print("CPU tests:  ", counts(out + "/ctest.log"))
print("CUDA tests: ", counts(out + "/ctest-cuda.log"))
print("NCCL tests: ", open(out + "/nccl.txt").read().strip().replace("\n", "\n             "))
def records(path):  # a NaN or inf in a line (a first-run symptom) must not lose the table
    for l in open(path):
        if not l.startswith("{"): continue
        try: yield json.loads(l)
        except ValueError: print("unparsed:", l.strip())
rows = list(records(out + "/bench.jsonl"))
if rows:
    print("| bench | framework | size | dtype | value | unit | of ceiling |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        frac = "%.2f" % r["fraction_of_ceiling"] if "fraction_of_ceiling" in r else ""
        print("| %s | %s | %s | %s | %.4g | %s | %s |" % (r["bench"], r["framework"], r.get("size", ""),
              r.get("dtype", ""), r["value"], r["unit"], frac))
runs = {}
for r in records(out + "/workloads.jsonl"):
    runs.setdefault(r["workload"], {})["loom" if r["framework"] == "loom" else "torch"] = r["ms_per_step"]
if runs:
    print("| workload (cuda) | Loom ms/step | PyTorch ms/step | PyTorch/Loom |")
    print("|---|---|---|---|")
    for name, r in runs.items():
        loom, torch = r.get("loom"), r.get("torch")
        ratio = "%.2fx" % (torch / loom) if loom and torch else ""
        print("| %s | %s | %s | %s |" % (name, "%.3f" % loom if loom else "-", "%.3f" % torch if torch else "-", ratio))
EOF
cat "$out/epoch-table.txt" 2>/dev/null
exit $tests_rc
