#!/bin/sh
# The distributed_hang CTest test: a peer stopped with SIGSTOP does not hang the job.
# hang_worker's rank 1 stops itself after a first all_reduce; rank 0's next one (timeout
# 2 s) must fail within the timeout plus 10 s, naming the collective, its number and rank 1,
# and the job must end non-zero (loomrun then stops the stopped rank: SIGTERM, SIGKILL).
#   hang_test.sh LOOMRUN HANG_WORKER WORKDIR
set -eu
loomrun=$1
worker=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
start=$(date +%s)
code=0
timeout 60 "$loomrun" --standalone --nproc-per-node 2 --grace 1 "$worker" > "$dir/log" 2>&1 || code=$?
took=$(( $(date +%s) - start ))
cat "$dir/log"
echo "exit code $code after $took s"
[ "$code" -ne 0 ] && [ "$code" -ne 124 ] || { echo "FAIL: the job did not end non-zero on its own"; exit 1; }
grep -q 'rank 0 failed after' "$dir/log" || { echo "FAIL: rank 0 reported no error"; exit 1; }
grep 'rank 0 failed after' "$dir/log" | grep -q 'all_reduce #1 (gloo, timeout 2000 ms) failed' ||
  { echo "FAIL: the error does not name the collective and its number"; exit 1; }
grep 'rank 0 failed after' "$dir/log" | grep -q 'rank 1 did not arrive (last collective entered: #0)' ||
  { echo "FAIL: the error does not name the rank that did not arrive"; exit 1; }
secs=$(sed -n 's/^rank 0 failed after \([0-9.]*\) s.*/\1/p' "$dir/log")
awk -v t="$secs" 'BEGIN { exit !(t < 12) }' || { echo "FAIL: rank 0 took $secs s (timeout 2 s + 10 s)"; exit 1; }
echo "PASS"
