#!/bin/sh
# The torchrun CTest test: the flagship under PyTorch's torchrun trains exactly as under
# loomrun. torchrun's agent serves the store on MASTER_PORT and tells the workers so
# (TORCHELASTIC_USE_AGENT_STORE=True); Loom's ranks join it over c10d's protocol. Both runs
# must end with the same weights_crc32c on both ranks, and the rendezvous (the process
# group's set-up, as rank 0 prints it) take under 1 s.
#   torchrun_test.sh LOOMRUN FLAGSHIP WORKDIR
# Runs under LOOM_TORCH_PYTHON's PyTorch, else /usr/bin/python3's (Debian's 1.13): 2.x and
# 1.13 alike; skipped (exit 77) without PyTorch.
set -eu
loomrun=$1
flagship=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/torch_python.sh"

crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1"; }
args="--distributed --threads 1 --workers 0 --train-limit 256 --epochs 2 --batch-size 16"

port=$(free_port)
# shellcheck disable=SC2086
timeout 240 "$py" -m torch.distributed.run --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 \
  --master_port "$port" $(torchrun_logs "$dir/logs") --no_python \
  "$flagship" $args --out "$dir/torchrun" > "$dir/torchrun.log" 2>&1 ||
  { torchrun_stdout "$dir/logs" "$dir/torchrun.log"; cat "$dir/torchrun.log"; echo "FAIL: the run under torchrun"; exit 1; }
torchrun_stdout "$dir/logs" "$dir/torchrun.log"
grep -q 'launched by torchrun: rank 0 (RANK) of 2 (WORLD_SIZE)' "$dir/torchrun.log" &&
  grep -q "torchrun's agent store" "$dir/torchrun.log" ||
  { cat "$dir/torchrun.log"; echo "FAIL: rank 0 did not report torchrun's environment"; exit 1; }
# shellcheck disable=SC2086
timeout 240 "$loomrun" --standalone --nproc-per-node 2 "$flagship" $args --out "$dir/loomrun" \
  > "$dir/loomrun.log" 2>&1 || { cat "$dir/loomrun.log"; echo "FAIL: the run under loomrun"; exit 1; }

t0=$(crc "$dir/torchrun/text_classification_summary.json")
t1=$(crc "$dir/torchrun/rank1/text_classification_summary.json")
l0=$(crc "$dir/loomrun/text_classification_summary.json")
echo "weights_crc32c: torchrun rank 0 $t0, rank 1 $t1; loomrun $l0"
[ -n "$t0" ] && [ "$t0" = "$t1" ] && [ "$t0" = "$l0" ] ||
  { echo "FAIL: torchrun's and loomrun's runs end with different weights"; exit 1; }
rdzv=$(sed -n 's/.*rendezvous took \([0-9.]*\) s.*/\1/p' "$dir/torchrun.log")
echo "rendezvous under torchrun: $rdzv s"
awk -v t="$rdzv" 'BEGIN { exit !(t != "" && t < 1.0) }' || { echo "FAIL: the rendezvous took 1 s or more"; exit 1; }
echo "PASS"
