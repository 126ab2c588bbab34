#!/bin/sh
# The torchrun_restart CTest test: a two-rank flagship under `torchrun --max-restarts 1`
# loses a rank mid-epoch; torchrun restarts the job (TORCHELASTIC_RESTART_COUNT=1), every
# rank resumes from the newest complete checkpoint, and the job ends with the weights
# (weights_crc32c) of a run never interrupted:
#   1. rank 1 SIGKILLed in the second epoch: the restart resumes from the first epoch's end;
#   2. rank 1 alone SIGTERMed in the second epoch: both ranks stop after the same step (the
#      flag is or'ed over the ranks), rank 0 writes the epoch's position, both exit 143, and
#      the restart resumes mid-epoch, skipping exactly the batches consumed.
#   torchrun_restart_test.sh LOOMRUN FLAGSHIP WORKDIR
# Runs under LOOM_TORCH_PYTHON's PyTorch, else /usr/bin/python3's (Debian's 1.13): 2.x and
# 1.13 alike; skipped (exit 77) without PyTorch.
set -u
loomrun=$1
flagship=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/torch_python.sh"
. "$(dirname "$0")/check.sh"
crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1/text_classification_summary.json" 2>/dev/null; }
args="--distributed --threads 1 --workers 0 --train-limit 2048 --epochs 2 --batch-size 16"  # 64 steps an epoch

# shellcheck disable=SC2086
timeout 240 "$loomrun" --standalone --nproc-per-node 2 "$flagship" $args --out "$dir/whole" > "$dir/whole.log" 2>&1
whole=$(crc "$dir/whole")
check "the uninterrupted run under loomrun (weights_crc32c $whole)" [ -n "$whole" ]

# The worker of RANK $2 that torchrun's agent (pid $1) started first (restart 0).
worker() {
  for p in $(ps -o pid= --ppid "$1"); do
    env=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null)
    echo "$env" | grep -qx "RANK=$2" && echo "$env" | grep -qx "TORCHELASTIC_RESTART_COUNT=0" && { echo "$p"; return; }
  done
}

# interrupt NAME SIGNAL: torchrun --max-restarts 1; after the first epoch's checkpoint and
# 0.3 s into the second, SIGNAL to rank 1; sets rc (torchrun's status).
interrupt() {
  name=$1; sig=$2
  # shellcheck disable=SC2086
  "$py" -m torch.distributed.run --nnodes 1 --nproc_per_node 2 --max_restarts 1 --master_addr 127.0.0.1 \
    --master_port "$(free_port)" $(torchrun_logs "$dir/$name.logs") --no_python "$flagship" $args --checkpoint "$dir/$name.safetensors" \
    --out "$dir/$name" > "$dir/$name.log" 2>&1 &
  agent=$!
  while [ ! -f "$dir/$name.safetensors" ] && kill -0 $agent 2>/dev/null; do sleep 0.02; done
  sleep 0.3
  victim=$(worker $agent 1)
  echo "$name: SIG$sig to rank 1 (pid ${victim:-none}) in the second epoch"
  [ -n "$victim" ] && kill -"$sig" "$victim"
  wait $agent
  rc=$?
  torchrun_stdout "$dir/$name.logs" "$dir/$name.log"
}

start=$(date +%s)
interrupt killed KILL
check "SIGKILL: torchrun restarted the job and it ended well (status $rc)" [ "$rc" = 0 ]
check "SIGKILL: the restart resumed from the first epoch's end" \
  grep -q 'resumed from .*killed.safetensors at epoch 1, step 64$' "$dir/killed.log"
check "SIGKILL: the uninterrupted run's weights, rank 0 ($(crc "$dir/killed"))" [ "$(crc "$dir/killed")" = "$whole" ]
check "SIGKILL: rank 1 too" [ "$(crc "$dir/killed/rank1")" = "$whole" ]

interrupt stopped TERM
check "SIGTERM: torchrun restarted the job and it ended well (status $rc)" [ "$rc" = 0 ]
check "SIGTERM: both ranks stopped after the same step (rank 1's signal)" \
  grep -q '^stopped by another rank.s signal after step' "$dir/stopped.log"
batch=$(sed -n 's/.*resumed from .*stopped.safetensors at epoch 1, step [0-9]*, batch \([0-9]*\) of 64$/\1/p' "$dir/stopped.log" | head -n 1)
check "SIGTERM: the restart resumed mid-epoch (batch ${batch:-none} of 64)" \
  awk -v b="${batch:-0}" 'BEGIN { exit !(b > 0 && b < 64) }'
check "SIGTERM: the uninterrupted run's weights, rank 0 ($(crc "$dir/stopped"))" [ "$(crc "$dir/stopped")" = "$whole" ]
check "SIGTERM: rank 1 too" [ "$(crc "$dir/stopped/rank1")" = "$whole" ]
echo "both interrupted jobs with their restarts: $(( $(date +%s) - start )) s"

[ "$failures" = 0 ] || { tail -30 "$dir/stopped.log"; exit 1; }
