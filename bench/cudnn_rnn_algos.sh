#!/usr/bin/env bash
# The recurrent workloads on a GPU under each of cuDNN's algorithms (Note [cuDNN RNN
# algorithm rule] in kernels/rnn/cudnn_rnn_plan.h), to measure the rule: for every
# precision (float32, float16 and bfloat16 autocast), lstm-sentiment and lstm-2x512 with
# LOOM_CUDNN_RNN_ALGO forcing each algorithm on every layer ("auto": the rule). Prints
# loom-bench's JSON lines with "cudnn_rnn_algo" added; a configuration cuDNN refuses runs
# STANDARD (the fallback), so compare "auto" with each forced line.
#
#   bash bench/cudnn_rnn_algos.sh [BUILD_DIR] > rnn_algos.jsonl     # BUILD_DIR: build/gpu
set -euo pipefail
build=${1:-build/gpu}
bench="$build/bench/loom-bench"
[ -x "$bench" ] || { echo "cudnn_rnn_algos.sh: no $bench (build with the CUDA backend first)" >&2; exit 1; }
for amp in off fp16 bf16; do
  amp_flag=()
  [ "$amp" = off ] || amp_flag=(--amp "$amp")
  for algo in auto standard persist_static persist_static_small_h; do
    LOOM_CUDNN_RNN_ALGO=$algo "$bench" --device cuda --steps 20 "${amp_flag[@]}" lstm-sentiment lstm-2x512 |
      sed "s/}\$/,\"cudnn_rnn_algo\":\"$algo\"}/"
  done
done
