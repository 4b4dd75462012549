#!/usr/bin/env bash
# A network partition, not a killed process: two TF_CONFIG workers (samples/c/multi_worker.c) in two
# network namespaces joined by a veth pair; once the chief has written its first epoch's checkpoint
# every packet either way is dropped (a pfifo queue of length 0 on each end: the links stay up), so
# that no reset, FIN or "unreachable" ever arrives. Both workers must end with KX_E_COMM (the
# sample's exit status 3) naming the other one, within the group's timeout; a hang is ctest's TIMEOUT.
# Needs root and network namespaces (CI runs as root); exits 77 (skipped) where they are missing.
#
#   network_partition.sh MULTI_WORKER_PROGRAM DATA_DIR SCRATCH_DIR
set -uo pipefail
program=$1 data=$2 scratch=$3
tag=$$
ns0=kxpart0-$tag ns1=kxpart1-$tag
veth0=kxp0-$tag veth1=kxp1-$tag
veth0=${veth0:0:15} veth1=${veth1:0:15}
work=$scratch/network-partition-$tag

if [[ $(id -u) -ne 0 ]] || ! ip netns add "$ns0" 2>/dev/null; then
  echo "skipped: needs root and network namespaces"
  exit 77
fi
cleanup() {
  [[ -n ${pid0:-} ]] && kill -9 "$pid0" 2>/dev/null
  [[ -n ${pid1:-} ]] && kill -9 "$pid1" 2>/dev/null
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
set -e
ip netns add "$ns1"
ip link add "$veth0" type veth peer name "$veth1"
ip link set "$veth0" netns "$ns0"
ip link set "$veth1" netns "$ns1"
ip -n "$ns0" addr add 10.231.0.1/24 dev "$veth0"
ip -n "$ns1" addr add 10.231.0.2/24 dev "$veth1"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$veth0" up
ip -n "$ns1" link set "$veth1" up
mkdir -p "$work/checkpoints"
set +e

cluster='"cluster": {"worker": ["10.231.0.1:23461", "10.231.0.2:23461"]}'
args=(data="$data" epochs=10000 samples=2048 timeout_ms=5000 verbose=0 threads=1)
ip netns exec "$ns0" env TF_CONFIG="{$cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
  "$program" "${args[@]}" checkpoints="$work/checkpoints" > "$work/worker0.log" 2>&1 &
pid0=$!
ip netns exec "$ns1" env TF_CONFIG="{$cluster, \"task\": {\"type\": \"worker\", \"index\": 1}}" \
  "$program" "${args[@]}" checkpoints="$work/checkpoints" > "$work/worker1.log" 2>&1 &
pid1=$!

# Training is under way once the chief has written a checkpoint (polled; the workers may be slow).
for _ in $(seq 1 1200); do
  ls "$work/checkpoints"/*.kx > /dev/null 2>&1 && break
  kill -0 "$pid0" 2>/dev/null || break
  sleep 0.1
done
if ! ls "$work/checkpoints"/*.kx > /dev/null 2>&1; then
  echo "FAILED: no checkpoint before the cut"; cat "$work/worker0.log" "$work/worker1.log"; exit 1
fi

cut=$(date +%s.%N)
ip netns exec "$ns0" tc qdisc add dev "$veth0" root pfifo limit 0
ip netns exec "$ns1" tc qdisc add dev "$veth1" root pfifo limit 0
wait "$pid0"; status0=$?
wait "$pid1"; status1=$?
pid0= pid1=
echo "worker 0 ended $(echo "$(date +%s.%N) - $cut" | bc) s after the cut with status $status0"
echo "worker 1 status $status1"
sed 's/^/  worker 0: /' "$work/worker0.log" | tail -3
sed 's/^/  worker 1: /' "$work/worker1.log" | tail -3
failed=0
for i in 0 1; do
  status=status$i
  other=$((2 - i))  # worker i's peer is 10.231.0.<other>
  if [[ ${!status} -ne 3 ]]; then echo "FAILED: worker $i ended with status ${!status}, not 3 (KX_E_COMM)"; failed=1; fi
  if ! grep -q "KX_E_COMM" "$work/worker$i.log"; then echo "FAILED: worker $i's error is not KX_E_COMM"; failed=1; fi
  if ! grep -q "10.231.0.$other" "$work/worker$i.log"; then echo "FAILED: worker $i does not name 10.231.0.$other"; failed=1; fi
done
exit $failed
