#!/usr/bin/env bash
# Two copies of a bundled MPI benchmark (one rank per node, 2 nodes),
# adopted by the node agents under POLICY, with a timeline recording of both
# agents (switches, spin episodes, the agents' level changes; see
# docs/timeline.md) over TSECS of the timed part, and the agents' decision
# counters (by reason) after the run. Analyse with
# docs/probes/mpi_timeline_holds.py OUTDIR.
#
# usage: docs/probes/mpi_timeline_probe.sh POLICY LIB PROG [PROG ARGS...]
#   e.g. docs/probes/mpi_timeline_probe.sh sy openmpi pingpong --size 8 --compute-us 20
# Run from a built tree, as root, under the bench lock.
# Env: OUT (default $TMPDIR/mpi-timeline-POLICY-LIB-PROG), SECS (timed
# seconds per job, 1.5), TSECS (recorded seconds, 0.5).
set -euo pipefail
cd "$(dirname "$0")/../.."
POL=${1:?policy}; LIB=${2:?lib}; PROG=${3:?prog}; shift 3
OUT=${OUT:-${TMPDIR:-/tmp}/mpi-timeline-$POL-$LIB-$PROG}
rm -rf "$OUT"; mkdir -p "$OUT"
cargo xtask cluster down >/dev/null 2>&1 || true
cargo xtask cluster up --nodes 2 --policy "$POL" >"$OUT/up.log" 2>&1
trap 'cargo xtask cluster down >/dev/null 2>&1 || true' EXIT
scrape() {
    for n in 0 1; do
        ip netns exec cosched-n$n curl -s localhost:9464/metrics |
            grep -E '^cosched_(policy_decisions|actions|agent_event)' | sed "s/^/n$n /"
    done
}
START=$(python3 -c 'import time; print(time.time() + 4.0)')
for j in 1 2; do
    cargo xtask cluster mpirun --lib "$LIB" --adopt $j -- "$PROG" "$@" --start-at "$START" \
        --iters 1000000000 --max-seconds "${SECS:-1.5}" >"$OUT/job$j.log" 2>&1 &
done
sleep "$(python3 -c "import time; print(max(0, $START + 0.4 - time.time()))")"
target/release/cosched timeline --agent-socket /run/cosched-cluster/n0/agent.sock \
    --agent-socket /run/cosched-cluster/n1/agent.sock --seconds "${TSECS:-0.5}" \
    --json-file "$OUT/timeline.json" --svg "$OUT/timeline.svg" >"$OUT/timeline-summary.txt" 2>&1
wait
scrape >"$OUT/metrics-after.txt"
grep -h MPIBENCH "$OUT"/job*.log || true
echo "$OUT"
