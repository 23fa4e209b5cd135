#!/bin/sh
# The real agents' clock-offset estimates against the truth (issue 15 item
# 4): on a one-machine cluster every node shares CLOCK_MONOTONIC, so the
# true offset of every agent against the coordinator is 0 and whatever the
# coordinator estimates is its error. Brings up 2 nodes with a gang
# coordinator (10 ms slices), samples `cosched nodes --json` every 0.5 s for
# SECONDS s idle, then as long with a CPU hog on every CPU (time-shared,
# as the benches' jobs), and tears down. Run as root from the repository,
# with the release binaries built, under the bench lock:
#
#   flock /tmp/cosched-bench.lock sh sim/calibration/agent_clock_offset.sh [SECONDS] > offsets.jsonl
#   python3 sim/calibration/agent_clock_offset.py offsets.jsonl
set -eu
SECS=${1:-30}
BIN=${BIN:-target/release}
SOCK=/run/cosched-cluster/coordinator/coordinator.sock
"$BIN/xtask" cluster up --nodes 2 --coordinator gang --slice-ms 10 >&2
trap '"$BIN/xtask" cluster down >&2 || true' EXIT
sleep 3
sample() {
    phase=$1
    n=$((SECS * 2))
    i=0
    while [ $i -lt $n ]; do
        printf '{"phase":"%s","nodes":' "$phase"
        "$BIN/cosched" --socket "$SOCK" --json nodes | tr -d '\n'
        printf '}\n'
        sleep 0.5
        i=$((i + 1))
    done
}
sample idle
hogs=""
for cpu in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$cpu" sh -c 'while :; do :; done' &
    hogs="$hogs $!"
done
sample loaded
kill $hogs
