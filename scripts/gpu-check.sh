#!/usr/bin/env bash
# The GPU check's second half, run ON THE GPU MACHINE (CUDA driver, PyTorch with its
# nvidia-* pip packages, no network, no Debian dev packages). It compiles nothing: it
# unpacks what scripts/gpu-pack.sh built here (.gpu-pack/loom-gpu.tar.xz), then runs
#   1. the CUDA tests (ctest -L cuda: every "[.cuda]" test case and the examples on cuda:0),
#      then deterministic mode's GPU checks again by name, their measurements in the summary,
#   2. Loom's GPU benchmarks beside PyTorch's, same GPU, same run (bench_cuda and
#      torch_cuda_bench.py; loom-bench and torch_workloads.py in float32, bf16 and fp16 autocast,
#      and replayed as CUDA graphs with --cuda-graph; transformer-1k and lstm-sentiment with
#      their activations recomputed in backward, against without: peak memory and step),
#   3. the CPU-vs-GPU epoch table of the flagship (on a subset),
#   4. compute-sanitizer: memcheck over every CUDA test case, racecheck and initcheck over
#      the attention, reduction and sort tests,
# and prints a short table last. Logs, JSON lines and traces go to build/gpu-check/; with the
# device tool (which returns at most 8 files from $OUT) they come back packed in one file,
# $OUT/gpu-check.tar.gz, beside $OUT/summary.txt (the table).
#
#   here:  bash scripts/gpu-pack.sh
#   there: device run, carry [".gpu-pack"], command "bash scripts/gpu-check.sh"
#
# Each stage gets only what is left of LOOM_GPU_CHECK_BUDGET_S (default 540 s, inside the
# device tool's 600 s per command), most important first, so the summary always prints.
# LOOM_GPU_CHECK_SKIP="sanitizers epoch" leaves stages out (names: tests bench epoch sanitizers).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
out=build/gpu-check
rm -rf "$out"
mkdir -p "$out"
budget=${LOOM_GPU_CHECK_BUDGET_S:-540}
skip=" ${LOOM_GPU_CHECK_SKIP:-} "
left() { echo $(( budget - ($(date +%s) - start) )); }
# Runs the rest of the line under a timeout of at most $1 s within what is left, or skips
# it when under 10 s are left (GNU timeout reads 0 as "no limit" and refuses a negative one).
budgeted() {
  local cap=$1 l; shift
  l=$(left)
  [ "$l" -ge 10 ] || { echo "skipped (out of time): $*"; return 124; }
  timeout "$(( l < cap ? l : cap ))" "$@"
}
wanted() { [[ "$skip" != *" $1 "* ]]; }
# Each test process would otherwise keep one spinning OpenMP thread per core.
export OMP_WAIT_POLICY=PASSIVE

# ---- unpack and resolve the build's absolute paths ------------------------------------------
pack=.gpu-pack/loom-gpu.tar.xz
[ -f "$pack" ] || { echo "gpu-check: no $pack: run scripts/gpu-pack.sh on the development machine and carry .gpu-pack"; exit 2; }
tmp=$(mktemp -d)
tar -C "$tmp" -xJf "$pack" || { echo "gpu-check: could not unpack $pack"; exit 2; }
# shellcheck disable=SC1091
. "$tmp/manifest.env"
build=$pack_build_dir
rm -rf "$build"
mkdir -p "$(dirname "$build")"
mv "$tmp/$build" "$build"
mv "$tmp/lib" "$build/lib"
cp "$tmp/manifest.env" "$out/"
rm -rf "$tmp"
# The programs were built in $pack_source_dir: the tests and examples find their data
# there (compiled-in paths), CTest's files name it. Link that path to this tree when it is
# free (commands run as root on the device machine), and rewrite CTest's files either way.
if [ "$pack_source_dir" != "$PWD" ]; then
  if [ ! -e "$pack_source_dir" ]; then
    mkdir -p "$(dirname "$pack_source_dir")" 2>/dev/null && ln -s "$PWD" "$pack_source_dir" 2>/dev/null \
      || echo "gpu-check: cannot link $pack_source_dir to this tree: programs that read data by their compiled-in path will miss it"
  fi
  find "$build" -name '*.cmake' -exec sed -i "s|$pack_source_dir|$PWD|g" {} +
fi

# Libraries: the packed ones (Gloo, oneDNN, ...), then every lib/ folder of the machine's
# nvidia-* pip packages (cuDNN, NCCL, cuBLAS, the CUDA runtime) that PyTorch uses.
nvidia_libs=$(python3 - <<'EOF' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = []
for root in nvidia.__path__:
    for d, _, files in os.walk(root):
        if os.path.basename(d) == "lib" and any(".so" in f for f in files):
            dirs.append(d)
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH="$PWD/$build/lib${nvidia_libs:+:$nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd "$build/loom_tests" "$build/bench/loom-bench" | grep "not found" | sort -u)
[ -z "$missing" ] || { echo "gpu-check: libraries not found:"; echo "$missing"; exit 2; }
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "pack: commit $pack_commit (+$pack_modified_files modified files), sm_$pack_arch, built $pack_date"
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1
  ldd "$build/loom_tests" | awk '/libcudnn\.|libnccl|libcublas\.|libcudart/ { print $1, $3 }'
} | tee "$out/machine.txt"

# ---- 1. CUDA tests -----------------------------------------------------------------------------
tests_rc=0
if wanted tests; then
  echo "== CUDA tests ($(left) s left)"
  budgeted 240 ctest --test-dir "$build" -L cuda -j 4 --timeout 200 --output-on-failure >"$out/ctest-cuda.log" 2>&1
  tests_rc=$?
  sed -n '/The following tests FAILED/,$p' "$out/ctest-cuda.log"
  grep -E -B2 -A6 "FAILED:|with expansion|due to unexpected exception|SIGSEGV|Subprocess aborted" "$out/ctest-cuda.log" | head -60
  # Deterministic mode's GPU checks by name (tests/test_deterministic_cuda.cpp): cuDNN
  # attention's backward and a cuDNN LSTM bit for bit over two runs, and how many of dq's
  # elements the default cuDNN backward changed between two runs ("measured:" lines).
  budgeted 60 "$build/loom_tests" "cuda deterministic*" >"$out/deterministic-cuda.log" 2>&1
  grep -E "^measured:|test cases|FAILED" "$out/deterministic-cuda.log"
fi

# ---- 2. benchmarks, Loom then PyTorch ------------------------------------------------------------
: >"$out/bench.jsonl"
: >"$out/workloads.jsonl"
: >"$out/workloads-graph.jsonl"
if wanted bench; then
  echo "== benchmarks ($(left) s left)"
  budgeted 90 "$build/bench/bench_cuda" >>"$out/bench.jsonl" 2>"$out/bench_cuda.err"
  budgeted 90 python3 bench/torch_cuda_bench.py >>"$out/bench.jsonl" 2>"$out/torch_cuda_bench.err"
  # Eager in float32, bf16 and fp16 autocast, then replayed as CUDA graphs (--cuda-graph:
  # train::GraphedStep beside torch.cuda.graph with capturable Adam) in float32 and bf16.
  for mode in off bf16 fp16 graph graph-bf16; do
    amp_args=()
    case "$mode" in
      bf16|fp16) amp_args=(--amp "$mode") ;;
      graph) amp_args=(--cuda-graph) ;;
      graph-bf16) amp_args=(--cuda-graph --amp bf16) ;;
    esac
    lines="$out/workloads.jsonl"
    [[ "$mode" != graph* ]] || lines="$out/workloads-graph.jsonl"
    budgeted 60 "$build/bench/loom-bench" --device cuda "${amp_args[@]}" >>"$lines" 2>>"$out/loom-bench.err"
    budgeted 90 python3 bench/torch_workloads.py --device cuda "${amp_args[@]}" >>"$lines" 2>>"$out/torch_workloads.err"
  done
  # Two of them under the profiler (docs/profiling.md): the trace, timeline and table of their
  # measured steps land in profile/, and the JSON lines say how much of a step's time its ops'
  # GPU spans cover (profile_gpu_ms_per_step beside ms_per_step).
  budgeted 60 "$build/bench/loom-bench" --device cuda --steps 5 --profile "$out/profile" lstm-sentiment \
    transformer-small 2>"$out/profile-tables.txt" >"$out/profile.jsonl"
  # Activation checkpointing on the GPU (docs/benchmarks.md): peak tensor memory and step of
  # transformer-1k plain and with each layer's blocks nested in its checkpoint, attention kept;
  # lstm-sentiment plain and recomputed 16 time steps at a time.
  for flags in "transformer-1k" "transformer-1k --checkpoint-activations --checkpoint-blocks --checkpoint-keep-attention" \
               "lstm-sentiment" "lstm-sentiment --checkpoint-every 16"; do
    # shellcheck disable=SC2086  # the workload and its flags, split on purpose
    budgeted 40 "$build/bench/loom-bench" --device cuda --steps 5 $flags >>"$out/checkpoint.jsonl" 2>>"$out/loom-bench.err"
  done
fi

# ---- 3. the flagship's CPU-vs-GPU epoch table (docs/benchmarks.md), on a subset ---------------------
if wanted epoch; then
  echo "== epoch table ($(left) s left)"
  OUT="$out/epoch-table" budgeted 100 bash scripts/epoch-table.sh --no-build --epochs 2 --train-limit 4096 \
    --cpu-build "$build" --cuda-build "$build" >"$out/epoch-table.txt" 2>&1 || echo "epoch table: failed or cut short (rc $?)" >>"$out/epoch-table.txt"
fi

# ---- 4. compute-sanitizer ------------------------------------------------------------------------
# memcheck over every CUDA test case in one process; racecheck and initcheck over the kernels
# that share memory between threads (attention, reductions and softmax, sort).
shared_memory_tests="cuda sdpa*,cuda attention*,cuda reductions*,cuda softmax*,cuda layer norm*,cuda sort*"
if wanted sanitizers; then
  if [ -z "$sanitizer" ]; then
    echo "no compute-sanitizer on this machine" | tee "$out/memcheck.txt" "$out/racecheck.txt" "$out/initcheck.txt"
  else
    echo "== compute-sanitizer ($(left) s left)"
    budgeted 150 "$sanitizer" --tool memcheck --log-file "$out/memcheck.txt" "$build/loom_tests" "[cuda]" >"$out/memcheck-run.log" 2>&1
    budgeted 120 "$sanitizer" --tool racecheck --log-file "$out/racecheck.txt" "$build/loom_tests" "$shared_memory_tests" >"$out/racecheck-run.log" 2>&1
    budgeted 90 "$sanitizer" --tool initcheck --log-file "$out/initcheck.txt" "$build/loom_tests" "cuda sdpa*,cuda attention*" >"$out/initcheck-run.log" 2>&1
  fi
fi

# ---- summary -------------------------------------------------------------------------------------
echo "== summary ($(( $(date +%s) - start )) s)"
python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import json, os, re, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name)
    return open(p, errors="replace").read() if os.path.exists(p) else None
print(read("machine.txt").strip())
text = read("ctest-cuda.log")
if text is None:
    print("CUDA tests: not run")
else:
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    skipped = len(re.findall(r"\*\*\*Skipped", text))
    if m:
        total, failed = int(m.group(3)), int(m.group(2))
        print("CUDA tests: %d run: %d passed, %d failed, %d skipped" % (total, total - failed - skipped, failed, skipped))
    else:
        print("CUDA tests: no result (cut short?):", (text.strip().splitlines() or [""])[-1])
    nccl = re.findall(r"Test +#\d+: (ProcessGroupNCCL[^.]*?) \.+\W*(\w+)", text)
    print("NCCL tests: " + (", ".join("%s: %s" % (s, n[:60]) for n, s in nccl) if nccl else "none ran"))
text = read("deterministic-cuda.log")
if text is not None:
    result = re.findall(r"(All tests passed.*|test cases:.*)", text)
    print("deterministic GPU checks (cuda deterministic*): " + (result[-1].strip() if result else "no result (cut short?)"))
    for line in re.findall(r"^measured: .*$", text, re.M):
        print("  " + line)
for tool in ("memcheck", "racecheck", "initcheck"):
    text = read(tool + ".txt")
    if text is None:
        continue
    if text.startswith("no compute-sanitizer"):
        print("%s: not run (no compute-sanitizer on this machine)" % tool)
        continue
    summary = re.findall(r"ERROR SUMMARY: (\d+) error", text) or re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text)
    api = len(re.findall(r"Program hit ", text))
    kernels = sorted(set(re.findall(r"(?:Invalid|Race reported|Uninitialized)[^\n]*\n[^\n]*?at [^\n]*? in ([^\n(]+)", text)))
    hazards = len(re.findall(r"(?:Invalid __|Race reported|Uninitialized __)", text))
    done = "complete" if summary else "cut short or failed (see %s-run.log)" % tool
    print("%s: %s; %s reported, %d of them API errors (Program hit ...), %d access/race/init reports%s" % (
        tool, done, "+".join(summary) or "?", api, hazards, (" in " + ", ".join(k.strip() for k in kernels[:6])) if kernels else ""))
def records(name):
    for l in (read(name) or "").splitlines():
        if l.startswith("{"):
            try: yield json.loads(l)
            except ValueError: print("unparsed:", l.strip())
rows = list(records("bench.jsonl"))
if rows:
    pairs = {}
    for r in rows:
        key = (r["bench"], r.get("size", ""), r.get("dtype", ""), r.get("tier", r.get("backend", "")))
        pairs.setdefault(key, {})[r["framework"]] = r
    print("| bench | size | dtype | tier/backend | Loom | PyTorch | unit | Loom/PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    for (bench, size, dtype, tier), f in pairs.items():
        lo, pt = f.get("loom"), f.get("pytorch")
        unit = (lo or pt)["unit"]
        ratio = "%.2f" % (lo["value"] / pt["value"]) if lo and pt and pt["value"] else ""
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (bench, size, dtype, tier, "%.4g" % lo["value"] if lo else "-",
              "%.4g" % pt["value"] if pt else "-", unit, ratio))
checkpointed = list(records("checkpoint.jsonl"))
if checkpointed:
    print("| activation checkpointing (cuda) | flags | Loom ms/step | peak MB |")
    print("|---|---|---|---|")
    for r in checkpointed:
        flags = [f for f in ("checkpoint_activations", "checkpoint_blocks", "checkpoint_keep_attention") if r.get(f)]
        if r.get("checkpoint_every"):
            flags.append("checkpoint_every %d" % r["checkpoint_every"])
        print("| %s | %s | %.3f | %.1f |" % (r["workload"], " ".join(flags) or "-", r["ms_per_step"], r.get("peak_mem_bytes", 0) / 1e6))
runs = {}
for source in ("workloads.jsonl", "workloads-graph.jsonl"):
    for r in records(source):
        name = r["workload"] + ("" if r.get("amp", "off") in ("off", None) else ", %s autocast" % r["amp"])
        if source != "workloads.jsonl":  # asked for --cuda-graph: say so where it ran eagerly
            name += ", cuda graph" if r.get("cuda_graph") else ", cuda graph refused (%s)" % r["framework"][:5]
        runs.setdefault(name, {})["loom" if r["framework"] == "loom" else "torch"] = r["ms_per_step"]
if runs:
    print("| workload (cuda) | Loom ms/step | PyTorch ms/step | PyTorch/Loom |")
    print("|---|---|---|---|")
    for name, r in runs.items():
        lo, pt = r.get("loom"), r.get("torch")
        print("| %s | %s | %s | %s |" % (name, "%.3f" % lo if lo else "-", "%.3f" % pt if pt else "-",
              "%.2fx" % (pt / lo) if lo and pt else ""))
EOF
cat "$out/epoch-table.txt" 2>/dev/null | tee -a "$out/summary.txt"
if [ -n "${OUT:-}" ]; then
  cp "$out/summary.txt" "$OUT/summary.txt"
  tar -C "$(dirname "$out")" -czf "$OUT/gpu-check.tar.gz" "$(basename "$out")"
fi
exit $tests_rc
