#!/usr/bin/env bash
# Plain Linux, with and without cosched on the machine: the `mix` MPL 3 cell of
# `bench local` (one fine-grain spinning UDP ring job + two compute-only jobs
# per node, 2 nodes), launched straight into the node namespaces (no agent
# launches or adopts them), each process in its own session (autogroup), as
# the agents' launches are.
#
# usage: docs/probes/plain_linux_mix.sh none|idle [ROUNDS]
#   none: the cluster's agents are stopped first (no eBPF attached at all)
#   idle: the agents run (programs attached) but manage nothing
# Run from a built tree (cargo xtask build); prints the fine-spin job's
# iterations/s per run (dedicated: ~33,000/s on the development VM).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?none|idle}; ROUNDS=${2:-2}
SYN=$PWD/target/release/cosched-synth
cargo xtask cluster down >/dev/null 2>&1 || true
cargo xtask cluster up --nodes 2 --policy local >/dev/null
trap 'cargo xtask cluster down >/dev/null 2>&1' EXIT
if [ "$MODE" = none ]; then
  pkill -TERM -f 'cosched-agent --config /run/cosched-cluster' || true
  sleep 1
fi
A0=10.201.0.10; A1=10.201.0.11
out=$(mktemp -d)
for _ in $(seq "$ROUNDS"); do
  start=$(( $(date +%s%N) + 700000000 ))
  pids=()
  for n in 0 1; do
    setsid ip netns exec cosched-n$n taskset -c $n "$SYN" --rank $n --size 2 \
      --peers $A0:7501,$A1:7501 --job fs --proto udp --pattern ring --recv spin \
      --compute-us 20 --duration 2 --start-at-unix-ns $start >"$out/fs-$n.json" 2>/dev/null &
    pids+=($!)
    for j in 1 2; do
      setsid ip netns exec cosched-n$n taskset -c $n "$SYN" --rank $n --size 2 \
        --peers $A0:751$j,$A1:751$j --job c$j --proto udp --pattern barrier \
        --compute-us 1000 --duration 2 --start-at-unix-ns $start >/dev/null 2>&1 &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['iterations_per_s']))" "$out/fs-0.json"
done
rm -rf "$out"
