#!/bin/sh
# The example_text_classification_distributed CTest test: the flagship under
# `loomrun --nproc-per-node 2 ... --distributed` on the loopback.
#   1. three of four epochs with gradient accumulation (no_sync) and a checkpoint, which
#      rank 0 alone writes; the training loss must fall;
#   2. a resume of that checkpoint for the last epoch, which every rank loads;
#   3. the same four epochs without a stop, which must end where the resumed run ended;
# after each, both ranks hold bitwise equal weights (weights_crc32c of their summaries).
#   flagship_test.sh LOOMRUN FLAGSHIP WORKDIR
set -eu
loomrun=$1
flagship=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"

crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1"; }
same_weights() {  # same_weights OUT_DIR
  c0=$(crc "$1/text_classification_summary.json")
  c1=$(crc "$1/rank1/text_classification_summary.json")
  echo "weights_crc32c: rank 0 $c0, rank 1 $c1"
  [ -n "$c0" ] && [ "$c0" = "$c1" ] || { echo "FAIL: the ranks' weights differ ($1)"; exit 1; }
}
run() { timeout 240 "$loomrun" --standalone --nproc-per-node 2 "$flagship" --distributed --threads 1 --workers 0 "$@"; }

run --train-limit 512 --epochs 4 --stop-after 3 --accum-steps 2 --batch-size 16 --checkpoint "$dir/run.safetensors" \
  --out "$dir/first" > "$dir/first.log" 2>&1 || { cat "$dir/first.log"; echo "FAIL: the distributed run"; exit 1; }
loss() { sed -n "s/^epoch $1: train loss \([0-9.]*\).*/\1/p" "$dir/first.log"; }
echo "train loss: epoch 1 $(loss 1), epoch 3 $(loss 3)"
awk -v a="$(loss 1)" -v b="$(loss 3)" 'BEGIN { exit !(b < a) }' || { echo "FAIL: the loss did not fall"; exit 1; }
same_weights "$dir/first"
[ -f "$dir/run.safetensors" ] || { echo "FAIL: rank 0 wrote no checkpoint"; exit 1; }

run --train-limit 512 --epochs 4 --accum-steps 2 --batch-size 16 --resume "$dir/run.safetensors" --out "$dir/resumed" \
  > "$dir/resumed.log" 2>&1 || { cat "$dir/resumed.log"; echo "FAIL: the distributed resume"; exit 1; }
grep -q '^resumed from .* at epoch 3' "$dir/resumed.log" || { cat "$dir/resumed.log"; echo "FAIL: no resume"; exit 1; }
grep -q '^epoch 4:' "$dir/resumed.log" || { echo "FAIL: the resumed run trained no epoch"; exit 1; }
same_weights "$dir/resumed"

run --train-limit 512 --epochs 4 --accum-steps 2 --batch-size 16 --out "$dir/whole" > "$dir/whole.log" 2>&1 ||
  { cat "$dir/whole.log"; echo "FAIL: the uninterrupted run"; exit 1; }
same_weights "$dir/whole"
[ "$(crc "$dir/whole/text_classification_summary.json")" = "$(crc "$dir/resumed/text_classification_summary.json")" ] ||
  { echo "FAIL: stopping and resuming did not end where the uninterrupted run ended"; exit 1; }
echo "PASS"
