#!/usr/bin/env bash
# How a training step's cost grows: the lstm-sentiment workload of loom-bench over sequence
# length (64 ... 1024 at batch 64) and batch (8 ... 256 at sequence length 256), float32 and
# bfloat16 autocast, beside PyTorch (bench/torch_workloads.py, the same shapes) in the same
# run: for each point Loom then PyTorch, so both see about the same machine load. Writes the
# JSON lines and two log-log charts (ms per step against sequence length; against batch), and
# prints the table with peer / loom (> 1: Loom is faster). docs/cpu-performance.md shows a run.
#
#   bench/scaling.sh [--quick] [--threads N] [--steps N] [--out DIR] [--build DIR] [--no-flush-denormal]
#                    [--batch B --seq-lens "T1 T2 ..."] [--seq-len T --batches "B1 B2 ..."] [--dtypes "fp32 bf16"]
#
#   --quick               2 points per axis on small shapes, 2 measured steps: a smoke test
#   --threads N           threads for both (default 2; OMP_NUM_THREADS for PyTorch)
#   --steps N             measured steps per point after 2 warm-up steps (default 3)
#   --out DIR             where scaling.jsonl, scaling_seq.svg and scaling_batch.svg go
#                         (default: <build>/scaling)
#   --build DIR           the CMake build dir with bench/loom-bench and bench/scaling_plot
#                         (default: build/cpu)
#   --no-flush-denormal   leave denormal floats on in both (each framework's default)
#   --batch, --seq-lens   the first axis: these sequence lengths at this batch (64; 64 ... 1024)
#   --seq-len, --batches  the second: these batches at this sequence length (256; 8 ... 256);
#                         smaller sweeps where PyTorch's steps are slow (docs/cpu-performance.md)
#   --dtypes LIST         fp32 (float32), bf16 (bfloat16 autocast) or both (the default)
#
# Denormals are flushed to zero in both by default (loom-bench --flush-denormal,
# torch.set_flush_denormal(True)): the LSTM's backward sends gradients into denormals, which
# slow PyTorch's GEMMs ~15x (Loom flushes inside its recurrent sweeps either way), so the
# flushed run is the strict comparison (shared/workloads.md). The output says which ran.
#
# PyTorch: the interpreter in LOOM_TORCH_PYTHON (PyTorch 2.x). Unset, or without torch: Loom's
# curves only, and the output says so.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build/cpu
out=
threads=2
steps=3
quick=0
flush=(--flush-denormal)
batch_arg= seq_len_arg= seqs_arg=() batches_arg=() dtypes=(fp32 bf16)
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --no-flush-denormal) flush=(); shift ;;
    --batch) batch_arg=$2; shift 2 ;;
    --seq-len) seq_len_arg=$2; shift 2 ;;
    --seq-lens) read -r -a seqs_arg <<< "$2"; shift 2 ;;
    --batches) read -r -a batches_arg <<< "$2"; shift 2 ;;
    --dtypes) read -r -a dtypes <<< "$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "scaling.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ((quick)); then
  batch=8 seq_len=32 seqs=(16 32) batches=(4 8) steps=2
else
  batch=64 seq_len=256 seqs=(64 128 256 512 1024) batches=(8 16 32 64 128 256)
fi
batch=${batch_arg:-$batch} seq_len=${seq_len_arg:-$seq_len}
((${#seqs_arg[@]})) && seqs=("${seqs_arg[@]}")
((${#batches_arg[@]})) && batches=("${batches_arg[@]}")
out=${out:-$build/scaling}
mkdir -p "$out"
loom_bench=$build/bench/loom-bench
plot=$build/bench/scaling_plot
for program in "$loom_bench" "$plot"; do
  [[ -x $program ]] || { echo "scaling.sh: $program not found: build loom_bench and scaling_plot in $build" >&2; exit 1; }
done

python=${LOOM_TORCH_PYTHON:-}
if [[ -n $python ]] && "$python" -c 'import torch' 2>/dev/null; then
  echo "scaling.sh: PyTorch $("$python" -c 'import torch; print(torch.__version__)') from $python beside Loom" >&2
else
  echo "scaling.sh: no PyTorch (LOOM_TORCH_PYTHON ${python:+=$python cannot import torch}${python:-is unset}): Loom's curves only" >&2
  python=
fi

# The points: every sequence length at the fixed batch, every batch at the fixed length (the
# shared point once).
points=()
for t in "${seqs[@]}"; do points+=("$batch $t"); done
for b in "${batches[@]}"; do [[ $b == "$batch" && " ${seqs[*]} " == *" $seq_len "* ]] || points+=("$b $seq_len"); done

results=$out/scaling.jsonl
: > "$results"
for point in "${points[@]}"; do
  read -r b t <<< "$point"
  for dtype in "${dtypes[@]}"; do
    case $dtype in
      fp32) amp=off amp_flag=() ;;
      bf16) amp=bf16 amp_flag=(--amp bf16) ;;
      *) echo "scaling.sh: --dtypes takes fp32 and bf16, not $dtype" >&2; exit 2 ;;
    esac
    shape=(--steps "$steps" --threads "$threads" --batch "$b" --seq-len "$t" ${flush[@]+"${flush[@]}"} ${amp_flag[@]+"${amp_flag[@]}"})
    echo "scaling.sh: batch $b, seq $t, amp $amp: loom (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "$loom_bench" "${shape[@]}" lstm-sentiment >> "$results"
    if [[ -n $python ]]; then
      echo "scaling.sh: batch $b, seq $t, amp $amp: pytorch (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      OMP_NUM_THREADS=$threads "$python" "$repo/bench/torch_workloads.py" "${shape[@]}" lstm-sentiment >> "$results"
    fi
  done
done

"$plot" --in "$results" --out "$out" --batch "$batch" --seq-len "$seq_len"
flushed=$(grep -o '"flush_denormal": \{0,1\}[a-z]*' "$results" | sed 's/.*: \{0,1\}//' | sort -u | tr '\n' ' ')
case $flushed in
  "true ") echo "denormals: flushed to zero (FTZ/DAZ) in $([[ -n $python ]] && echo "both" || echo "Loom")" ;;
  "false ") echo "denormals: not flushed (each framework's default; Loom still flushes inside its recurrent sweeps)" ;;
  *) echo "denormals: mixed (flush_denormal $flushed)" ;;
esac
[[ -n $python ]] || echo "PyTorch: not run (set LOOM_TORCH_PYTHON to a Python with torch 2.x): Loom's curves only"
echo "results: $results; charts: $out/scaling_seq.svg, $out/scaling_batch.svg"
