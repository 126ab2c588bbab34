#!/usr/bin/env bash
# The CPU check: what issue 34 (bfloat16 on the CPU's matrix engines) asks of each kind of
# CPU, measured in one run on the machine at hand (an AMX Xeon, an AVX512-BF16 EPYC, an
# AVX2-only one), its table printed last:
#   1. the machine: the CPU's model and the features that pick a kernel, and loom-cpu-info
#      (the GEMM chosen per dtype, oneDNN's pick for a bfloat16 product);
#   2. the GEMM, autocast, attention and recurrent tests once per bfloat16 kernel this CPU
#      runs (LOOM_CPU_BF16_GEMM=onednn|avx512_bf16|float32), and the [avx512bf16] and
#      [onednn_bf16] tests, reported Skipped where the CPU lacks what they need;
#   3. bench_core: every GEMM kernel's GFLOP/s on squares and the workloads' products beside
#      oneDNN's matmul primitive called directly (the practical ceiling), and the FMA peak;
#   4. the workloads, Loom beside PyTorch 2.x, one process a workload and framework, Loom then
#      PyTorch, in float32 and under bfloat16 autocast (Loom once per bfloat16 kernel),
#      denormals flushed in both (loom-bench --flush-denormal, torch.set_flush_denormal);
#   5. with --scaling, bench/scaling.sh over sequence length and batch (about 20 minutes);
# then the summary: the GEMM table (Loom / direct), the workloads table in the issue's
# columns and each of the issue's goals met or not. Everything goes to <build>/cpu-check/.
#
#   bash scripts/cpu-check.sh [--build DIR] [--threads N] [--steps N] [--quick] [--scaling]
#                             [--peer-venv DIR] [WORKLOAD ...]
#
#   --build DIR       the CPU build with loom_tests, bench_core, loom-bench, loom-cpu-info
#                     (default build/cpu: cmake --preset cpu && cmake --build --preset cpu)
#   --threads N       threads for Loom and PyTorch (default 2)
#   --steps N         measured steps per workload (default: each workload's own)
#   --quick           bench_core --quick, 2 measured steps: a smoke test, not figures
#   --peer-venv DIR   PyTorch 2.x from this virtual environment, made with
#                     `pip install torch numpy` where it has none (about 2.7 GB; never in CI).
#                     Default: LOOM_TORCH_PYTHON's interpreter. Without either, Loom alone.
#   WORKLOAD          default: seed-rnn embed-mean lstm-sentiment lstm-2x512 transformer-small
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build=build/cpu
threads=2
steps=
quick=0
scaling=0
peer_venv=
workloads=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --scaling) scaling=1; shift ;;
    --peer-venv) peer_venv=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "cpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) workloads+=("$1"); shift ;;
  esac
done
((${#workloads[@]})) || workloads=(seed-rnn embed-mean lstm-sentiment lstm-2x512 transformer-small)
((quick)) && [ -z "$steps" ] && steps=2
for program in loom_tests bench/bench_core bench/loom-bench loom-cpu-info; do
  [ -x "$build/$program" ] || { echo "cpu-check: $build/$program not found: cmake --preset cpu && cmake --build --preset cpu" >&2; exit 2; }
done
out=$build/cpu-check
rm -rf "$out" && mkdir -p "$out"

python=
if [ -n "$peer_venv" ]; then
  if ! "$peer_venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "cpu-check: creating $peer_venv with PyTorch 2.x from PyPI (about 2.7 GB)" >&2
    python3 -m venv "$peer_venv" && "$peer_venv/bin/pip" install --quiet torch numpy >&2
  fi
  python=$peer_venv/bin/python
elif [ -n "${LOOM_TORCH_PYTHON:-}" ]; then
  python=$LOOM_TORCH_PYTHON
fi
if [ -n "$python" ] && ! "$python" -c 'import torch' 2>/dev/null; then
  echo "cpu-check: $python cannot import torch: Loom alone" >&2
  python=
fi

# ---- 1. the machine ------------------------------------------------------------------------------
{
  lscpu | sed -n 's/^Model name: *//p'
  echo "cores: $(nproc); features: $(grep -m1 -o -w -E 'avx2|avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  "$build/loom-cpu-info"
  [ -n "$python" ] && "$python" -c 'import torch; print("peer: torch", torch.__version__, "threads", torch.get_num_threads())'
} 2>&1 | tee "$out/machine.txt"
kernels=$(sed -n 's/.*bfloat16 GEMM kernels this CPU runs: *//p' "$out/machine.txt")
[ -n "$kernels" ] || kernels=float32

# ---- 2. the tests, once per bfloat16 kernel ---------------------------------------------------------
: >"$out/tests.txt"
for k in onednn avx512_bf16 float32; do
  if [[ " $kernels " != *" $k "* ]]; then
    echo "LOOM_CPU_BF16_GEMM=$k: Skipped (this CPU cannot run that kernel)" >>"$out/tests.txt"
    continue
  fi
  LOOM_CPU_BF16_GEMM=$k "$build/loom_tests" "[gemm],[gemm_bf16],[amp],[attention],[rnn],[addmm]" >"$out/tests-$k.log" 2>&1
  rc=$?
  echo "LOOM_CPU_BF16_GEMM=$k: $(grep -E '^All tests passed|^test cases:' "$out/tests-$k.log" | tail -1) (exit $rc)" >>"$out/tests.txt"
done
for tag in avx512bf16 onednn_bf16; do
  "$build/loom_tests" "[$tag]" >"$out/tests-$tag.log" 2>&1
  rc=$?
  if [ $rc = 77 ]; then
    echo "[$tag]: Skipped ($(grep -m1 '^SKIPPED' "$out/tests-$tag.log"))" >>"$out/tests.txt"
  else
    echo "[$tag]: $(grep -E '^All tests passed|^test cases:' "$out/tests-$tag.log" | tail -1) (exit $rc)" >>"$out/tests.txt"
  fi
done
cat "$out/tests.txt"

# ---- 3. bench_core -----------------------------------------------------------------------------
bench_args=(--threads "$threads")
((quick)) && bench_args+=(--quick)
echo "== bench_core (load $(cut -d' ' -f1 /proc/loadavg))"
"$build/bench/bench_core" "${bench_args[@]}" >"$out/bench_core.jsonl" 2>"$out/bench_core.err" \
  || echo "cpu-check: bench_core failed (see $out/bench_core.err)"

# ---- 4. the workloads, Loom then PyTorch ----------------------------------------------------------
common=(--threads "$threads" --flush-denormal)
[ -n "$steps" ] && common+=(--steps "$steps")
: >"$out/workloads.jsonl"
for w in "${workloads[@]}"; do
  echo "== $w (load $(cut -d' ' -f1 /proc/loadavg))"
  "$build/bench/loom-bench" "${common[@]}" "$w" >>"$out/workloads.jsonl" 2>>"$out/loom-bench.err"
  for k in $kernels; do
    LOOM_CPU_BF16_GEMM=$k "$build/bench/loom-bench" "${common[@]}" --amp bf16 "$w" >>"$out/workloads.jsonl" 2>>"$out/loom-bench.err"
  done
  if [ -n "$python" ]; then
    OMP_NUM_THREADS=$threads "$python" bench/torch_workloads.py "${common[@]}" "$w" >>"$out/workloads.jsonl" 2>>"$out/torch.err"
    OMP_NUM_THREADS=$threads "$python" bench/torch_workloads.py "${common[@]}" --amp bf16 "$w" >>"$out/workloads.jsonl" 2>>"$out/torch.err"
  fi
done

# ---- 5. the sweep ---------------------------------------------------------------------------------
if ((scaling)); then
  echo "== bench/scaling.sh (load $(cut -d' ' -f1 /proc/loadavg))"
  LOOM_TORCH_PYTHON=${python:-} bash bench/scaling.sh --threads "$threads" --build "$build" --out "$out/scaling" \
    >"$out/scaling.txt" 2>&1 || echo "cpu-check: scaling.sh failed (see $out/scaling.txt)"
fi

# ---- summary --------------------------------------------------------------------------------------
python3 scripts/cpu_check_summary.py "$out" | tee "$out/summary.md"
