#!/bin/sh
# The preemption CTest test: the flagship stopped by SIGTERM or SIGUSR1 mid-epoch finishes
# its step, writes a checkpoint holding the epoch's position and exits 143 within one step's
# time plus the write; `--resume auto` then ends with the weights (weights_crc32c) of a run
# never stopped. A second signal ends the run at once, writing nothing; a run SIGKILLed
# mid-epoch resumes from the last epoch's checkpoint, also to the same weights.
#   preemption_test.sh FLAGSHIP WORKDIR
set -u
flagship=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/check.sh"
crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1/text_classification_summary.json" 2>/dev/null; }
args="--threads 1 --workers 0 --train-limit 2048 --batch-size 16"  # 128 steps an epoch
# train OUT ARGS...: a run of 2 epochs (EPOCHS), its output in OUT.log. The runs a test signals
# start without `timeout`, whose process would take the signal (CTest's TIMEOUT bounds them).
train() { out=$1; shift; timeout 120 "$flagship" $args --epochs "${EPOCHS:-2}" --out "$dir/$out" "$@" > "$dir/$out.log" 2>&1; }

# 0. The run never stopped.
train whole
whole=$(crc "$dir/whole")
check "the uninterrupted run ends (weights_crc32c $whole)" [ -n "$whole" ]

# stop_mid_epoch NAME SIGNAL: starts a run with --checkpoint NAME.safetensors, waits for the
# first epoch's checkpoint, sends SIGNAL 0.3 s into the second epoch; sets rc and elapsed.
stop_mid_epoch() {
  name=$1; sig=$2; shift 2
  ckpt="$dir/$name.safetensors"
  "$flagship" $args --epochs 2 --checkpoint "$ckpt" --out "$dir/$name" "$@" > "$dir/$name.log" 2>&1 &
  pid=$!
  while [ ! -f "$ckpt" ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
  sleep 0.3
  start=$(now)
  kill -"$sig" $pid
  wait $pid
  rc=$?
  elapsed=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
}

# 1. SIGTERM mid-epoch: 143, a checkpoint at the stop, within one step plus the write.
stop_mid_epoch term TERM
check "SIGTERM: exit status 143 (got $rc)" [ "$rc" = 143 ]
line=$(grep '^stopped by SIGTERM after step' "$dir/term.log")
check "SIGTERM: says where it stopped and what it wrote" [ -n "$line" ]
echo "$line"
write=$(echo "$line" | sed -n 's/.* written in \([0-9.]*\) s.*/\1/p')
# One step here takes ~12 ms (the epoch's 128 in ~1.5 s): 1 s covers it with the process's exit.
echo "SIGTERM to exit: $elapsed s (the checkpoint's write $write s)"
check "SIGTERM: exit within one step plus the write (+1 s)" \
  awk -v e="$elapsed" -v w="${write:-99}" 'BEGIN { exit !(e < w + 1.0) }'
train term_resumed --checkpoint "$dir/term.safetensors" --resume auto
batch=$(sed -n 's/^resumed from .* at epoch 1, step [0-9]*, batch \([0-9]*\) of 128$/\1/p' "$dir/term_resumed.log")
check "--resume auto: mid-epoch 2, at batch ${batch:-none} of 128" \
  awk -v b="${batch:-0}" 'BEGIN { exit !(b > 0 && b < 128) }'
check "SIGTERM + --resume auto: the uninterrupted run's weights ($(crc "$dir/term_resumed"))" \
  [ "$(crc "$dir/term_resumed")" = "$whole" ]

# 2. SIGUSR1 (Slurm's --signal=USR1@...): the same.
stop_mid_epoch usr1 USR1
check "SIGUSR1: exit status 143 (got $rc)" [ "$rc" = 143 ]
check "SIGUSR1: says so" grep -q '^stopped by SIGUSR1 after step' "$dir/usr1.log"

# 3. No --checkpoint: the work goes to --out's preempted.safetensors, which --resume takes.
"$flagship" $args --epochs 2 --out "$dir/nockpt" > "$dir/nockpt.log" 2>&1 &
pid=$!
sleep 1  # in the first epoch
kill -TERM $pid
wait $pid
rc=$?
check "no --checkpoint: exit status 143 (got $rc)" [ "$rc" = 143 ]
check "no --checkpoint: written under --out" [ -f "$dir/nockpt/preempted.safetensors" ]
train nockpt_resumed --resume "$dir/nockpt/preempted.safetensors"
check "no --checkpoint: resumed to the uninterrupted run's weights" [ "$(crc "$dir/nockpt_resumed")" = "$whole" ]

# 4. A second signal: at once, nothing written. Big steps (about 1 s here), so that the
#    second SIGTERM, 0.1 s after the first, lands in the step the first lets finish (or in its write).
"$flagship" --threads 1 --workers 0 --train-limit 1024 --epochs 1 --batch-size 256 --hidden 512 \
  --checkpoint "$dir/twice.safetensors" --out "$dir/twice" > "$dir/twice.log" 2>&1 &
pid=$!
# The metrics files appear just before the handlers are installed and training starts.
while [ ! -f "$dir/twice/text_classification_steps.csv" ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
sleep 0.3
kill -TERM $pid
sleep 0.1
start=$(now)
kill -TERM $pid
wait $pid
rc=$?
elapsed=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
echo "second SIGTERM to exit: $elapsed s"
check "two SIGTERMs: killed by the second (143, got $rc)" [ "$rc" = 143 ]
check "two SIGTERMs: at once (under 0.5 s)" awk -v e="$elapsed" 'BEGIN { exit !(e < 0.5) }'
check "two SIGTERMs: no checkpoint written" [ ! -f "$dir/twice.safetensors" ]
check "two SIGTERMs: no stop reported" sh -c "! grep -q '^stopped by' '$dir/twice.log'"

# 5. SIGKILL mid-epoch: nothing to finish; --resume auto takes the first epoch's checkpoint.
stop_mid_epoch kill KILL
check "SIGKILL: 137 (got $rc)" [ "$rc" = 137 ]
train kill_resumed --checkpoint "$dir/kill.safetensors" --resume auto
check "SIGKILL + --resume auto: from the epoch's end" grep -q '^resumed from .* at epoch 1, step 128$' "$dir/kill_resumed.log"
check "SIGKILL + --resume auto: the uninterrupted run's weights" [ "$(crc "$dir/kill_resumed")" = "$whole" ]

# 6. --resume auto with no checkpoint yet starts over; without --checkpoint it is an error.
EPOCHS=1 train fresh --checkpoint "$dir/fresh.safetensors" --resume auto
check "--resume auto, no file yet: starts from scratch" grep -q '^no checkpoint at .* yet: starting from scratch' "$dir/fresh.log"
EPOCHS=1 train noarg --resume auto
rc=$?
check "--resume auto without --checkpoint: exit 2 (got $rc)" [ "$rc" = 2 ]
check "and says why" grep -q 'no --checkpoint was given' "$dir/noarg.log"

[ "$failures" = 0 ]
