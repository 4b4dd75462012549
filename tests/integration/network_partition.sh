#!/usr/bin/env bash
# A network partition, not a killed process: two TF_CONFIG workers (samples/c/multi_worker.c) in two
# network namespaces joined by a veth pair; once the chief has written its first epoch's checkpoint
# every packet either way is dropped (a pfifo queue of length 0 on each end: the links stay up), so
# that no reset, FIN or "unreachable" ever arrives. Both workers must end with KX_E_COMM (the
# sample's exit status 3) naming the other one, within the group's timeout; a hang is ctest's TIMEOUT.
# With parameter_server: the chief, worker 0 and the ps task in one namespace, worker 1 cut off in the
# other; the chief gives worker 1's batches to worker 0 and finishes (every task but worker 1 ends
# with 0), and worker 1 ends with KX_E_COMM.
# Needs root and network namespaces (CI runs as root); exits 77 (skipped) where they are missing.
#
#   network_partition.sh multi_worker|parameter_server PROGRAM DATA_DIR SCRATCH_DIR
set -uo pipefail
pids=()
mode=$1 program=$2 data=$3 scratch=$4
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
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
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

pids=()
start() {  # start NAMESPACE LOG TF_CONFIG-TASK ARGS...
  local ns=$1 log=$2 task=$3
  shift 3
  # KX_SHARED_MEMORY=0: the namespaces share this host's /dev/shm, where the workers would otherwise
  # sum, and the network is what this test cuts.
  ip netns exec "$ns" env TF_CONFIG="{$cluster, \"task\": $task}" KX_SHARED_MEMORY=0 "$program" "$@" > "$work/$log" 2>&1 &
  pids+=($!)
}
if [[ $mode == multi_worker ]]; then
  cluster='"cluster": {"worker": ["10.231.0.1:23461", "10.231.0.2:23461"]}'
  args=(data="$data" epochs=10000 samples=2048 timeout_ms=5000 verbose=0 threads=1 checkpoints="$work/checkpoints")
  start "$ns0" worker0.log '{"type": "worker", "index": 0}' "${args[@]}"
  start "$ns1" worker1.log '{"type": "worker", "index": 1}' "${args[@]}"
  expect=(3 3) logs=(worker0.log worker1.log) peers=(10.231.0.2 10.231.0.1)
else
  cluster='"cluster": {"chief": ["10.231.0.1:23471"], "worker": ["10.231.0.1:23472", "10.231.0.2:23473"], "ps": ["10.231.0.1:23474"]}'
  args=(data="$data" epochs=20 samples=4096 timeout_ms=5000 verbose=2 threads=1)
  start "$ns0" ps.log '{"type": "ps", "index": 0}' "${args[@]}"
  start "$ns0" worker0.log '{"type": "worker", "index": 0}' "${args[@]}"
  start "$ns1" worker1.log '{"type": "worker", "index": 1}' "${args[@]}"
  start "$ns0" chief.log '{"type": "chief", "index": 0}' "${args[@]}" checkpoints="$work/checkpoints"
  expect=(0 0 3 0) logs=(ps.log worker0.log worker1.log chief.log) peers=("" "" 10.231.0.1 10.231.0.2)
fi
pid0=${pids[0]}

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
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  status=$?
  echo "${logs[$i]%.log} ended $(echo "$(date +%s.%N) - $cut" | bc) s after the cut with status $status"
  sed "s/^/  ${logs[$i]%.log}: /" "$work/${logs[$i]}" | tail -4
  if [[ $status -ne ${expect[$i]} ]]; then echo "FAILED: ${logs[$i]%.log} ended with $status, not ${expect[$i]}"; failed=1; fi
  if [[ ${expect[$i]} -eq 3 ]]; then
    grep -q "KX_E_COMM" "$work/${logs[$i]}" || { echo "FAILED: ${logs[$i]%.log}'s error is not KX_E_COMM"; failed=1; }
  fi
  if [[ -n ${peers[$i]} ]] && ! grep -q "${peers[$i]}" "$work/${logs[$i]}"; then
    echo "FAILED: ${logs[$i]%.log} does not name ${peers[$i]}"
    failed=1
  fi
done
pids=()
exit $failed
