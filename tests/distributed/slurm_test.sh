#!/bin/sh
# The slurm CTest test: a real one-node Slurm (Debian's slurm-wlm and munge) started in a
# temporary folder (its own munged with its own key and socket, slurmctld and slurmd on free
# ports, state and logs in the folder, proctrack/linuxproc, task/none, no cgroups), then
#   srun --ntasks 2 FLAGSHIP --distributed ...
# must end with the weights_crc32c of the same run under loomrun, on both ranks: the ranks
# find each other from SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_NODELIST alone. Everything
# started is stopped on the way out, failed or not. Where Slurm cannot start (not root, no
# packages, a daemon that will not come up), the test is skipped (exit 77) with the reason.
#   slurm_test.sh LOOMRUN FLAGSHIP WORKDIR
set -u
loomrun=$1
flagship=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
skip() { echo "slurm: skipped: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || skip "slurmd launches tasks as root here (SlurmdUser=root); run as root"
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" > /dev/null 2>&1 ||
    skip "$tool not found (Debian's slurm-wlm and munge: scripts/install-deps.sh slurm)"
done

# State in a short path: a UNIX socket's path has at most 107 bytes.
state=$(mktemp -d /tmp/loom-slurm.XXXXXX)
pids=""
cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for p in $pids; do
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$p" 2>/dev/null
  done
  cp "$state"/*.log "$dir"/ 2>/dev/null
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
logs() { for f in "$state"/*.log; do echo "--- $f"; tail -n 15 "$f"; done; }

start=$(now)
# munged: its own key, socket and files, as root (--force: root is allowed here).
dd if=/dev/urandom of="$state/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$state/munge.key"
munged --force --key-file="$state/munge.key" --socket="$state/munge.socket" --pid-file="$state/munged.pid" \
  --log-file="$state/munged.log" --seed-file="$state/munged.seed" > "$state/munged.out.log" 2>&1 ||
  { logs; skip "munged would not start"; }
pids="$(cat "$state/munged.pid" 2>/dev/null)"

host=$(hostname)
getent hosts "$host" > /dev/null || skip "the hostname $host does not resolve"
ports=$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
cat > "$state/slurm.conf" <<CONF
ClusterName=loomtest
SlurmctldHost=$host
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=loomtest Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
mkdir -p "$state/ctld" "$state/d"
export SLURM_CONF="$state/slurm.conf"
slurmctld -D -c -f "$SLURM_CONF" > "$state/slurmctld.out.log" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" -N "$host" > "$state/slurmd.out.log" 2>&1 &
pids="$pids $!"
i=0
until [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ]; do
  i=$((i + 1))
  [ $i -le 150 ] || { logs; skip "the node did not become idle in 30 s (node state: $(sinfo -h -o %T 2>&1))"; }
  sleep 0.2
done
echo "Slurm $(sinfo -V | cut -d' ' -f2) up, node $host idle, in $(since "$start") s"

crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1"; }
args="--distributed --threads 1 --workers 0 --train-limit 256 --epochs 2 --batch-size 16"
t=$(now)
# shellcheck disable=SC2086
timeout 120 srun --ntasks 2 --overcommit --kill-on-bad-exit=1 --time 5 "$flagship" $args --out "$dir/srun" \
  > "$dir/srun.log" 2>&1 || { cat "$dir/srun.log"; logs; fail "the run under srun"; }
echo "srun --ntasks 2 trained in $(since "$t") s"
grep -q 'launched by slurm: rank 0 (SLURM_PROCID) of 2 (SLURM_NTASKS)' "$dir/srun.log" ||
  { cat "$dir/srun.log"; fail "rank 0 did not report Slurm's environment"; }
grep 'launched by slurm' "$dir/srun.log"
# shellcheck disable=SC2086
timeout 120 "$loomrun" --standalone --nproc-per-node 2 "$flagship" $args --out "$dir/loomrun" \
  > "$dir/loomrun.log" 2>&1 || { cat "$dir/loomrun.log"; fail "the run under loomrun"; }
s0=$(crc "$dir/srun/text_classification_summary.json")
s1=$(crc "$dir/srun/rank1/text_classification_summary.json")
l0=$(crc "$dir/loomrun/text_classification_summary.json")
echo "weights_crc32c: srun rank 0 $s0, rank 1 $s1; loomrun $l0"
[ -n "$s0" ] && [ "$s0" = "$s1" ] && [ "$s0" = "$l0" ] || fail "srun's and loomrun's runs end with different weights"
echo "PASS (the whole test: $(since "$start") s)"
