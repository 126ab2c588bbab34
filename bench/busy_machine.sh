#!/usr/bin/env bash
# How training slows down when another process keeps one core busy (issue: a training run
# must degrade gracefully). Runs each workload on an idle machine and then beside one busy
# process (a shell loop that never sleeps), for Loom's loom-bench and, when an interpreter
# with PyTorch is given, for its peer (shared/peers/torch_workloads.py), and prints one JSON
# line per run plus one summary line per workload and framework:
#   {"workload":..., "framework":..., "idle_ms":..., "busy_ms":..., "slowdown":...}
# Also times one epoch of the flagship example (examples/text_classification) both ways.
#
#   bench/busy_machine.sh [--build DIR] [--steps N] [--peer PYTHON] [--no-flagship] [WORKLOAD ...]
#
#   --build DIR     the CMake build dir with bench/loom-bench (default: build/cpu)
#   --steps N       measured steps per run (default: 20 seed-rnn / embed-mean, 5 LSTM workloads)
#   --peer PYTHON   a Python with PyTorch 2.x (e.g. /tmp/torch2/bin/python); none: Loom only
#   --threads N     threads for both (default: the machine's cores; OMP_NUM_THREADS for PyTorch)
# Workloads default to seed-rnn and lstm-sentiment. Both frameworks flush denormals
# (--flush-denormal), the strict comparison of shared/workloads.md.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build/cpu
steps=
peer=
threads=$(nproc)
flagship=1
workloads=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-flagship) flagship=0; shift ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) workloads+=("$1"); shift ;;
  esac
done
((${#workloads[@]})) || workloads=(seed-rnn lstm-sentiment)
bench=$build/bench/loom-bench
[ -x "$bench" ] || { echo "busy_machine: $bench not built (cmake --build $build --target loom_bench)" >&2; exit 1; }
peer_script=$repo/../shared/peers/torch_workloads.py
[ -f "$peer_script" ] || peer_script=$repo/bench/torch_workloads.py

busy_pid=
start_busy() { bash -c 'while :; do :; done' & busy_pid=$!; sleep 0.5; }
stop_busy() { [ -z "$busy_pid" ] || { kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; busy_pid=; }; }
trap stop_busy EXIT

steps_for() {
  if [ -n "$steps" ]; then echo "$steps"; return; fi
  case $1 in seed-rnn|embed-mean) echo 20 ;; *) echo 5 ;; esac
}
ms_of() { sed -n 's/.*"ms_per_step": *\([0-9.]*\).*/\1/p' | tail -1; }

# run FRAMEWORK WORKLOAD: prints the run's JSON line (with "machine") to stderr, ms/step to stdout.
run() {
  local framework=$1 w=$2 line
  if [ "$framework" = loom ]; then
    line=$("$bench" --threads "$threads" --steps "$(steps_for "$w")" --flush-denormal "$w" | tail -1)
  else
    line=$(OMP_NUM_THREADS=$threads "$peer" "$peer_script" --steps "$(steps_for "$w")" --flush-denormal "$w" | tail -1)
  fi
  echo "${line%\}},\"machine\":\"$machine\"}" >&2
  echo "$line" | ms_of
}

summary() {  # FRAMEWORK WORKLOAD IDLE_MS BUSY_MS
  awk -v f="$1" -v w="$2" -v i="$3" -v b="$4" -v t="$threads" 'BEGIN {
    printf "{\"workload\":\"%s\",\"framework\":\"%s\",\"threads\":%d,\"idle_ms\":%.3f,\"busy_ms\":%.3f,\"slowdown\":%.2f}\n", w, f, t, i, b, b / i }'
}

frameworks=(loom)
[ -z "$peer" ] || frameworks+=(peer)
for w in "${workloads[@]}"; do
  for f in "${frameworks[@]}"; do
    machine=idle; idle=$(run "$f" "$w")
    machine=busy; start_busy; busy=$(run "$f" "$w"); stop_busy
    name=loom
    [ "$f" = loom ] || name=pytorch-$("$peer" -c 'import torch; print(torch.__version__)')
    summary "$name" "$w" "$idle" "$busy"
  done
done

if ((flagship)); then
  example=$build/examples/text_classification
  [ -x "$example" ] || { echo "busy_machine: $example not built; skipping the flagship" >&2; exit 0; }
  out=$(mktemp -d)
  epoch_ms() { "$example" --epochs 1 --threads "$threads" --out "$out" | sed -n 's/.*time per epoch *\([0-9.]*\) s.*/\1/p' | awk '{ print $1 * 1000 }'; }
  idle=$(epoch_ms)
  start_busy; busy=$(epoch_ms); stop_busy
  summary loom flagship-epoch "$idle" "$busy"
  rm -rf "$out"
fi
