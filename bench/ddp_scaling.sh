#!/usr/bin/env bash
# Data-parallel benchmarks, Loom beside PyTorch, in one run on one machine (docs/benchmarks.md,
# "Data parallel"):
#   1. all_reduce(SUM) bandwidth at 2 ranks on the loopback: loom-bench-allreduce under loomrun
#      ("loom-gloo") and bench/torch_allreduce.py under torchrun ("torch-gloo", Gloo's own);
#   2. lstm-sentiment under DistributedDataParallel at 1 and 2 ranks x 1 thread
#      (OMP_NUM_THREADS=1): bench/torch_ddp_lstm_sentiment.py ("torch-ddp-gloo"), and Loom's
#      own data-parallel lstm-sentiment when loom-bench has one (see loom_ddp below), else a
#      "skipped" line.
# Prints the JSON lines, then one summary line per implementation: loom-gloo/torch-gloo busbw
# per size, and samples/s at 2 ranks / samples/s at 1 rank (ideal 2) for each DDP.
#
#   bench/ddp_scaling.sh [--build DIR] [--peer-venv DIR] [--steps S] [--iters K] [--sizes-mb LIST]
#                        [--flush-denormal] [--no-allreduce] [--no-ddp]
#
#   --build DIR        the CMake build dir with loomrun and bench/loom-bench-allreduce
#                      (default: build/cpu, else build)
#   --peer-venv DIR    PyTorch 2.x from PyPI (default /tmp/torch2; shared/workloads.md)
#   --steps S          timed DDP steps after 2 warm-up steps (default 5)
#   --iters K          timed all_reduce calls per size (default 10), --sizes-mb (default 1,25,100)
#   --flush-denormal   both DDP runs flush denormals (the strict comparison; off by default)
#
# Environment: LOOM_DDP_BENCH (the program with Loom's DDP workload, default
# <build>/bench/loom-bench), LOOM_DDP_WORKLOAD (its name; default: the first workload that
# program lists whose name has both "ddp" and "lstm-sentiment", e.g. lstm-sentiment-ddp).
# Raw JSON lines are kept in <build>/ddp-scaling-<time>.jsonl.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build/cpu
[[ -d $build ]] || build=$repo/build
peer_venv=/tmp/torch2
steps=5
iters=10
sizes_mb=1,25,100
flush=()
do_allreduce=1
do_ddp=1
while (($#)); do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --peer-venv) peer_venv=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --sizes-mb) sizes_mb=$2; shift 2 ;;
    --flush-denormal) flush=(--flush-denormal); shift ;;
    --no-allreduce) do_allreduce=0; shift ;;
    --no-ddp) do_ddp=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ddp_scaling.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

loomrun=$build/loomrun
loom_allreduce=$build/bench/loom-bench-allreduce
torchrun=$peer_venv/bin/torchrun
for f in "$loomrun" "$torchrun"; do
  if [[ ! -x $f ]]; then
    echo "ddp_scaling.sh: $f not found (build loomrun with 'cmake --build $build --target loomrun';" \
         "make the venv with 'python3 -m venv $peer_venv && $peer_venv/bin/pip install torch numpy')" >&2
    exit 1
  fi
done

results=$build/ddp-scaling-$(date +%Y%m%d-%H%M%S).jsonl
: > "$results"
load() { cut -d' ' -f1 /proc/loadavg; }
# Runs "$@" and keeps its JSON lines (rank 0's) in $results; a failure is reported, not fatal.
record() {
  local what=$1
  shift
  echo "ddp_scaling.sh: $what (load $(load))" >&2
  "$@" | grep '^{' | tee -a "$results" || echo "ddp_scaling.sh: $what failed" >&2
}
skipped() {  # a JSON line saying what did not run, and why
  printf '{"bench":"%s","impl":"%s","skipped":true,"reason":"%s"}\n' "$1" "$2" "$3" | tee -a "$results"
}

echo "ddp_scaling.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(hostname) resolves to" \
     "$(getent hosts "$(hostname)" | awk '{print $1}' | paste -sd, -)" \
     "(torch's gloo binds there, Loom's to 127.0.0.1 when MASTER_ADDR is a loopback address${GLOO_SOCKET_IFNAME:+;" \
     "both take GLOO_SOCKET_IFNAME=$GLOO_SOCKET_IFNAME instead})" >&2

# ---- 1. all_reduce bandwidth, 2 ranks ---------------------------------------------------------
if ((do_allreduce)); then
  if [[ -x $loom_allreduce ]]; then
    record "all_reduce, loom-gloo, 2 ranks" \
      "$loomrun" --standalone --nproc-per-node 2 "$loom_allreduce" --iters "$iters" --sizes-mb "$sizes_mb"
  else
    skipped allreduce loom-gloo "$loom_allreduce not built (cmake --build $build --target bench_allreduce)"
  fi
  record "all_reduce, torch-gloo, 2 ranks" \
    env OMP_NUM_THREADS=1 "$torchrun" --standalone --nproc-per-node 2 "$repo/bench/torch_allreduce.py" \
      --iters "$iters" --sizes-mb "$sizes_mb"
fi

# ---- 2. DDP lstm-sentiment, 1 and 2 ranks x 1 thread ------------------------------------------
if ((do_ddp)); then
  for n in 1 2; do
    record "DDP lstm-sentiment, torch-ddp-gloo, $n rank(s) x 1 thread, $steps steps" \
      env OMP_NUM_THREADS=1 "$torchrun" --standalone --nproc-per-node "$n" \
        "$repo/bench/torch_ddp_lstm_sentiment.py" --threads 1 --steps "$steps" ${flush[@]+"${flush[@]}"}
  done

  # ---- Loom's own DDP lstm-sentiment: the slot ------------------------------------------------
  # Runs `loomrun --standalone --nproc-per-node N <loom-bench> --threads 1 --steps S
  # [--flush-denormal] <workload>` at N = 1 and 2 once the program lists such a workload
  # (loom-bench prints its workloads with --help: "workloads: a, b, ..."). Its JSON line,
  # printed by rank 0 only, should carry "ranks" and "samples_per_s" over all ranks, as
  # torch_ddp_lstm_sentiment.py's does (the summary falls back to tokens_per_s).
  loom_ddp() {
    local bench=${LOOM_DDP_BENCH:-$build/bench/loom-bench} workload=${LOOM_DDP_WORKLOAD:-}
    if [[ ! -x $bench ]]; then
      skipped ddp loom-ddp-gloo "$bench not built"
      return
    fi
    if [[ -z $workload ]]; then
      workload=$( ("$bench" --help 2>&1 || true) | sed -n 's/^workloads: *//p' | tr ',' '\n' |
                  sed 's/ (default.*//; s/^ *//; s/ *$//' | grep ddp | grep lstm-sentiment | head -n1 || true)
    fi
    if [[ -z $workload ]]; then
      skipped ddp loom-ddp-gloo "$(basename "$bench") lists no DDP lstm-sentiment workload yet"
      return
    fi
    for n in 1 2; do
      record "DDP lstm-sentiment, loom ($workload), $n rank(s) x 1 thread, $steps steps" \
        env OMP_NUM_THREADS=1 "$loomrun" --standalone --nproc-per-node "$n" \
          "$bench" --threads 1 --steps "$steps" ${flush[@]+"${flush[@]}"} "$workload"
    done
  }
  loom_ddp
fi

# ---- summary ------------------------------------------------------------------------------------
python3 - "$results" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print()
ar = {}
for r in lines:
    if r.get("bench") == "allreduce" and not r.get("skipped"):
        ar.setdefault(r["impl"], {})[r["bytes"]] = r
for impl, rows in ar.items():
    print(f"allreduce {impl} ({next(iter(rows.values()))['ranks']} ranks), busbw GB/s: " +
          ", ".join(f"{b / 1e6:g} MB {r['busbw_gbps']:.3g}" for b, r in sorted(rows.items())))
if "loom-gloo" in ar and "torch-gloo" in ar:
    common = sorted(set(ar["loom-gloo"]) & set(ar["torch-gloo"]))
    print("allreduce loom-gloo / torch-gloo busbw: " +
          ", ".join(f"{b / 1e6:g} MB {ar['loom-gloo'][b]['busbw_gbps'] / ar['torch-gloo'][b]['busbw_gbps']:.2f}x"
                    for b in common))
ddp = {}
for r in lines:
    if r.get("skipped"):
        print(f"{r['bench']} {r['impl']}: skipped: {r['reason']}")
    elif r.get("bench") == "ddp" or "ddp" in str(r.get("workload", "")):
        impl = r.get("impl") or f"{r.get('framework', 'loom')}-ddp"
        ddp.setdefault(impl, {})[r.get("ranks", 1)] = r.get("samples_per_s") or r.get("tokens_per_s")
for impl, by_ranks in ddp.items():
    figures = ", ".join(f"{n} rank(s) {v:.1f}/s" for n, v in sorted(by_ranks.items()))
    if 1 in by_ranks and 2 in by_ranks:
        print(f"ddp lstm-sentiment {impl}: {figures}; scaling 2 ranks / 1 rank = {by_ranks[2] / by_ranks[1]:.2f} (ideal 2)")
    else:
        print(f"ddp lstm-sentiment {impl}: {figures}; no scaling (a run is missing)")
EOF
echo "raw results: $results" >&2
