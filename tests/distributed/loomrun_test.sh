#!/bin/sh
# The loomrun CTest test: the environment each rank gets, and Note [stopping a job]
# (tools/loomrun.cpp) — a failing or SIGKILLed rank stops the rest and sets the exit code,
# SIGTERM to loomrun reaches every rank, a rank that ignores SIGTERM is SIGKILLed after
# --grace. Every case runs under `timeout`, so a hang fails instead of blocking the suite.
#   loomrun_test.sh LOOMRUN WORKDIR WORKER   (WORKER: the distributed_worker program)
set -u
loomrun=$1
dir=$2
worker=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/check.sh"
elapsed_below() { awk -v a="$1" -v b="$2" -v max="$3" 'BEGIN { exit !(b - a < max) }'; }

# 1. The environment: node 1 of 2, 2 processes per node.
timeout 30 "$loomrun" --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.1.2.3 --master-port 1234 \
  sh -c 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT"' | sort > "$dir/env"
printf '2 0 4 2 10.1.2.3 1234\n3 1 4 2 10.1.2.3 1234\n' > "$dir/env.expected"
check "each rank's environment" cmp -s "$dir/env" "$dir/env.expected"
cat "$dir/env"

# 2. A rank that fails stops the others, and loomrun exits with its code.
start=$(now)
timeout 30 "$loomrun" --nproc-per-node 3 sh -c 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 60'
rc=$?
check "a failing rank's code (3, got $rc)" [ "$rc" = 3 ]
check "the other ranks stopped at once" elapsed_below "$start" "$(now)" 10

# 3. A rank killed with SIGKILL: 128 + 9.
start=$(now)
timeout 30 "$loomrun" --nproc-per-node 3 sh -c 'if [ "$RANK" = 2 ]; then kill -9 $$; fi; sleep 60'
rc=$?
check "a SIGKILLed rank gives 137 (got $rc)" [ "$rc" = 137 ]
check "the others stopped at once" elapsed_below "$start" "$(now)" 10

# 4. SIGTERM to loomrun reaches every rank (each writes a line from its trap), 128 + 15.
"$loomrun" --nproc-per-node 2 sh -c "trap 'echo term \$RANK >> $dir/terms; exit 0' TERM; sleep 60 & wait" &
pid=$!
sleep 1
kill -TERM $pid
wait $pid
rc=$?
check "loomrun exits 143 after SIGTERM (got $rc)" [ "$rc" = 143 ]
check "both ranks got SIGTERM" [ "$(sort "$dir/terms" 2>/dev/null | tr '\n' ' ')" = "term 0 term 1 " ]

# 5. A rank that ignores SIGTERM is SIGKILLed after --grace.
start=$(now)
timeout 30 "$loomrun" --grace 1 --nproc-per-node 2 sh -c 'trap "" TERM; if [ "$RANK" = 0 ]; then exit 5; fi; sleep 60'
rc=$?
check "the failing rank's code (5, got $rc)" [ "$rc" = 5 ]
check "the stubborn rank was killed after the grace period" elapsed_below "$start" "$(now)" 10

# 6. All ranks succeed: 0. A program that does not exist: 127.
timeout 30 "$loomrun" --standalone --nproc-per-node 2 true
check "all ranks exit 0" [ $? = 0 ]
timeout 30 "$loomrun" --nproc-per-node 1 /nonexistent/program 2> "$dir/missing"
rc=$?
check "a missing program gives 127 (got $rc)" [ "$rc" = 127 ]
check "and says so" grep -q "cannot run /nonexistent/program" "$dir/missing"

# 7. A real job: rank 1 throws after joining while ranks 0 and 2 wait for it in an all_reduce
#    (their timeout is 60 s): loomrun stops them at once and exits with rank 1's code.
start=$(now)
LOOM_TEST_FAIL_RANK=1 timeout 60 "$loomrun" --standalone --nproc-per-node 3 "$worker" 2> "$dir/throw"
rc=$?
check "a rank that throws: loomrun exits 1 (got $rc)" [ "$rc" = 1 ]
check "the ranks blocked in a collective stopped at once" elapsed_below "$start" "$(now)" 15
check "and the message names the rank" grep -q "rank 1 fails on purpose" "$dir/throw"

[ "$failures" = 0 ]
