#!/usr/bin/env bash
# A `bench local` invocation with timeline recordings of both agents taken
# over and over while it runs (TSECS each, one every ~PAUSE s): to catch a
# state that shows in some repetitions only (e.g. one of two identical
# fine-spin jobs running far ahead) and see what the agents did in it. The
# bench's progress lines (each repetition's per-job slowdown and pace, see
# `bench local`) go to OUT/bench.log with a unix time in front; each
# recording is OUT/tl-<unix ns>.json with its summary in .txt, so a
# repetition's recordings are those between its line and the one before.
# With each recording, OUT/sched-<unix ns>.txt holds /proc/PID/sched of every
# cosched-synth process (policy, weight, voluntary and involuntary switches,
# vruntime): whether a rank that does not run is asleep or waits its turn.
#
# usage: docs/probes/synth_timeline_loop.sh BENCH-LOCAL-ARGS...
#   e.g. docs/probes/synth_timeline_loop.sh --reps 5 --duration 2 --mpl 2 \
#        --workloads fine-spin --policies local,dcs-sb:dcs.end_on_wait=false
# Run from a built tree (xtask and cosched built), as root, under the bench
# lock. Env: OUT (default $TMPDIR/synth-timeline), TSECS (0.3), PAUSE (0.7).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-${TMPDIR:-/tmp}/synth-timeline}
rm -rf "$OUT"; mkdir -p "$OUT"
target/release/xtask bench local --no-build "$@" --json "$OUT/bench.json" \
    2> >(while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done >"$OUT/bench.log") \
    >"$OUT/bench.txt" &
bench=$!
while kill -0 "$bench" 2>/dev/null; do
    if [ -S /run/cosched-cluster/n0/agent.sock ] && [ -S /run/cosched-cluster/n1/agent.sock ]; then
        at=$(date +%s%N)
        target/release/cosched timeline --agent-socket /run/cosched-cluster/n0/agent.sock \
            --agent-socket /run/cosched-cluster/n1/agent.sock --seconds "${TSECS:-0.3}" \
            --json-file "$OUT/tl-$at.json" >"$OUT/tl-$at.txt" 2>&1 || true
        for pid in $(pgrep -x cosched-synth || true); do
            { echo "== $pid $(cat /proc/"$pid"/stat 2>/dev/null | cut -d' ' -f3)"; cat /proc/"$pid"/sched; } 2>/dev/null
        done >"$OUT/sched-$at.txt"
    fi
    sleep "${PAUSE:-0.7}"
done
wait "$bench"
echo "$OUT"
