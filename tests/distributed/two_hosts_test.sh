#!/bin/sh
# The distributed_two_hosts CTest test: two "hosts" on one machine — two network
# namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2, no loopback between them) —
# run `loomrun --nnodes 2 --node-rank R` one node each, training the flagship data-parallel
# for one short epoch. Both must succeed and end with bitwise equal weights (the
# weights_crc32c of each rank's summary). Needs root and iproute2's `ip netns`; where
# namespaces cannot be made the test says so and exits 77, which CTest reports as skipped.
#   two_hosts_test.sh LOOMRUN FLAGSHIP WORKDIR
set -u
loomrun=$1
flagship=$2
dir=$3
tag=loom$$  # unique names: parallel runs and leftovers of a killed run do not collide
a=${tag}a
b=${tag}b
rm -rf "$dir" && mkdir -p "$dir"

cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
skip() { echo "distributed_two_hosts: skipped: $*"; exit 77; }

command -v ip >/dev/null 2>&1 || skip "iproute2's ip is not installed"
ip netns add "$a" 2>"$dir/netns.err" || skip "cannot create a network namespace ($(cat "$dir/netns.err"))"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add "${a}v" netns "$a" type veth peer name "${b}v" netns "$b" || skip "cannot create a veth pair"
ip -n "$a" addr add 10.77.0.1/24 dev "${a}v" && ip -n "$b" addr add 10.77.0.2/24 dev "${b}v" &&
  ip -n "$a" link set "${a}v" up && ip -n "$b" link set "${b}v" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || skip "cannot configure the veth pair"

# Each node runs one rank; rank 0 (node 0) serves the store at 10.77.0.1. Gloo binds to
# the veth (GLOO_SOCKET_IFNAME): the machine's hostname means nothing inside a namespace.
node() {  # node RANK NAMESPACE IFACE
  ip netns exec "$2" env GLOO_SOCKET_IFNAME="$3" timeout 240 "$loomrun" --nnodes 2 --node-rank "$1" \
    --nproc-per-node 1 --master-addr 10.77.0.1 --master-port 29531 \
    "$flagship" --distributed --train-limit 384 --epochs 1 --batch-size 16 --threads 1 --workers 0 \
    --out "$dir/node$1" >"$dir/node$1.log" 2>&1
}
node 0 "$a" "${a}v" &
pid0=$!
node 1 "$b" "${b}v" &
pid1=$!
wait $pid0
rc0=$?
wait $pid1
rc1=$?
echo "node 0 exited $rc0, node 1 exited $rc1"
tail -n 3 "$dir/node0.log" "$dir/node1.log"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { echo "FAIL: a node failed"; exit 1; }

crc() { sed -n 's/.*"weights_crc32c":\([0-9.]*\).*/\1/p' "$1"; }
crc0=$(crc "$dir/node0/text_classification_summary.json")
crc1=$(crc "$dir/node1/rank1/text_classification_summary.json")
echo "weights_crc32c: host 0 $crc0, host 1 $crc1"
[ -n "$crc0" ] && [ "$crc0" = "$crc1" ] || { echo "FAIL: the hosts' weights differ"; exit 1; }
grep -q "held-out accuracy" "$dir/node0.log" || { echo "FAIL: node 0 did not finish training"; exit 1; }
echo "PASS: two hosts trained data-parallel and hold bitwise equal weights"
