#!/usr/bin/env bash
# The CPU-vs-GPU epoch table: trains the flagship (examples/text_classification, the bundled
# movie-review sentences) for a few epochs on the CPU in float32 and under bfloat16 autocast,
# and, when a GPU is usable, on cuda:0 in float32 and under float16 and bfloat16 autocast,
# each eagerly and with every step replayed as a CUDA graph (--cuda-graph, "graphed" rows);
# then prints one Markdown row per run: time per epoch, tokens/s, speed-up over the CPU's
# float32 row and held-out accuracy. Without a GPU it prints the CPU rows and says why the
# GPU rows were not run. JSON lines of the same go to $OUT/epoch-table.jsonl.
#
#   bash scripts/epoch-table.sh [--epochs N] [--train-limit N] [--cpu-build DIR] [--cuda-build DIR] [--no-build]
#
# --train-limit N trains on the first N texts only (a quick check; CTest runs it so);
# --cpu-build DIR takes the CPU program from DIR (default build/cpu, built first unless
# --no-build).
#
# Time per epoch is the mean over the epochs after the first (which also pays for warm-up:
# the allocator's first blocks, cuDNN's plans); with --epochs 1 it is the first.
# The GPU rows need a CUDA build of Loom (scripts/gpu-pack.sh makes build/gpu) and a GPU
# that nvidia-smi lists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
epochs=3
train_limit=0
cpu_build=build/cpu
cuda_build=build/gpu
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --train-limit) train_limit=$2; shift 2 ;;
    --cpu-build) cpu_build=$2; shift 2 ;;
    --cuda-build) cuda_build=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "epoch-table: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
out=${OUT:-build/epoch-table}
mkdir -p "$out"
: > "$out/epoch-table.jsonl"

if [ "$build" = 1 ]; then
  bash scripts/install-deps.sh >/dev/null
  cmake --preset cpu >/dev/null
  cmake --build --preset cpu --target text_classification >/dev/null
fi

# run LABEL DEVICE PRECISION PROGRAM AMP [FLAG...]: one training run, its summary as a JSON line.
run() {
  local label=$1 device=$2 precision=$3 program=$4 amp=$5 dir="$out/$1"
  shift 5
  rm -rf "$dir"
  "$program" --device "$device" --amp "$amp" --epochs "$epochs" --train-limit "$train_limit" --out "$dir" "$@" \
    > "$dir.log" 2>&1 || { echo "epoch-table: the $label run failed:" >&2; tail -5 "$dir.log" >&2; return 1; }
  if grep -q 'running the step eagerly' "$dir.log"; then  # a --cuda-graph run that could not capture
    echo "epoch-table: the $label run fell back to eager steps:" >&2
    grep 'running the step eagerly' "$dir.log" >&2
  fi
  python3 - "$dir/text_classification_summary.json" "$device" "$precision" >> "$out/epoch-table.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
times = s["epoch_seconds"][1:] or s["epoch_seconds"]
per_epoch = sum(times) / len(times)
tokens_per_epoch = s["items"] / s["epochs"]
print(json.dumps({"device": sys.argv[2], "precision": sys.argv[3], "epochs": s["epochs"],
                  "seconds_per_epoch": per_epoch, "tokens_per_second": tokens_per_epoch / per_epoch,
                  "test_accuracy": s["metrics"]["test_accuracy"]}))
PY
}

cpu_program=$cpu_build/examples/text_classification
run cpu-float32 cpu float32 "$cpu_program" off
run cpu-bf16 cpu "bf16 autocast" "$cpu_program" bf16

gpu_note=""
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  gpu_note="GPU rows not run: no usable GPU (nvidia-smi lists none)."
elif [ ! -x "$cuda_build/examples/text_classification" ]; then
  gpu_note="GPU rows not run: no CUDA build at $cuda_build (scripts/gpu-pack.sh makes one; or --cuda-build DIR)."
else
  gpu_program=$cuda_build/examples/text_classification
  run cuda-float32 cuda float32 "$gpu_program" off
  run cuda-float32-graph cuda "float32, graphed" "$gpu_program" off --cuda-graph
  run cuda-fp16 cuda "fp16 autocast + GradScaler" "$gpu_program" fp16
  run cuda-fp16-graph cuda "fp16 autocast + GradScaler, graphed" "$gpu_program" fp16 --cuda-graph
  run cuda-bf16 cuda "bf16 autocast" "$gpu_program" bf16
  run cuda-bf16-graph cuda "bf16 autocast, graphed" "$gpu_program" bf16 --cuda-graph
fi

python3 - "$out/epoch-table.jsonl" "$epochs" "$train_limit" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
base = rows[0]["seconds_per_epoch"]
limit = f", first {sys.argv[3]} training texts" if sys.argv[3] != "0" else ""
print(f"flagship text_classification, {sys.argv[2]} epochs{limit}, time per epoch = mean of the epochs after the first")
print("| device | precision | time per epoch | tokens/s | speed-up over CPU float32 | held-out accuracy |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['device']} | {r['precision']} | {r['seconds_per_epoch']:.2f} s | {r['tokens_per_second'] / 1000:.1f}k "
          f"| {base / r['seconds_per_epoch']:.2f}x | {r['test_accuracy']:.4f} |")
PY
[ -n "$gpu_note" ] && echo "$gpu_note"
exit 0
