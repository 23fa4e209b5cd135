#!/usr/bin/env bash
# Two copies of a bundled MPI benchmark (OpenMPI, one rank per node, 2 nodes),
# adopted by the node agents under POLICY, with a 0.3 s kernel trace of the
# timed part (a tracefs instance: sched_switch, sched_wakeup, the agents'
# sched_setattr calls, the ranks' writev/readv), plus the agents' metrics
# before and after. Analyse with docs/probes/mpi_sched_trace.py OUTDIR.
#
# usage: docs/probes/mpi_sched_trace.sh POLICY PROG [PROG ARGS...]
#   e.g. docs/probes/mpi_sched_trace.sh sb pingpong --size 8 --compute-us 20
# Run from a built tree (cargo xtask build), as root, under the bench lock.
# Env: OUT (output dir, default $TMPDIR/mpi-sched-trace-POLICY-PROG),
# SECS (timed seconds per job, 1.5), TSECS (traced seconds, 0.3).
set -euo pipefail
cd "$(dirname "$0")/../.."
POL=${1:?policy}; PROG=${2:?prog}; shift 2
OUT=${OUT:-${TMPDIR:-/tmp}/mpi-sched-trace-$(echo "$POL" | tr ':=' '__')-$PROG}
T=/sys/kernel/tracing/instances/cosched-mpi-probe
EVENTS="sched/sched_switch sched/sched_wakeup syscalls/sys_enter_sched_setattr syscalls/sys_enter_writev syscalls/sys_exit_readv"
mkdir -p "$OUT"
cargo xtask cluster down >/dev/null 2>&1 || true
cargo xtask cluster up --nodes 2 --policy "$POL" >"$OUT/up.log" 2>&1
cleanup() {
    for e in $EVENTS; do echo 0 >"$T/events/$e/enable" 2>/dev/null || true; done
    rmdir "$T" 2>/dev/null || true
    cargo xtask cluster down >/dev/null 2>&1 || true
}
trap cleanup EXIT
scrape() {
    for n in 0 1; do
        ip netns exec cosched-n$n curl -s localhost:9464/metrics |
            grep -E '^cosched_(policy_decisions|actions|agent_event|ebpf_forced)' | sed "s/^/n$n /"
    done
}
scrape >"$OUT/metrics-before.txt"
START=$(python3 -c 'import time; print(time.time() + 3.0)')
for j in 1 2; do
    cargo xtask cluster mpirun --adopt $j -- "$PROG" "$@" --start-at "$START" \
        --iters 1000000000 --max-seconds "${SECS:-1.5}" >"$OUT/job$j.log" 2>&1 &
done
mkdir -p "$T"
echo 0 >"$T/tracing_on"; echo 8192 >"$T/buffer_size_kb"; echo >"$T/trace"
for e in $EVENTS; do echo 1 >"$T/events/$e/enable"; done
sleep "$(python3 -c "import time; print(max(0, $START + 0.5 - time.time()))")"
echo 1 >"$T/tracing_on"; sleep "${TSECS:-0.3}"; echo 0 >"$T/tracing_on"
cp "$T/trace" "$OUT/trace.txt"
wait
scrape >"$OUT/metrics-after.txt"
grep -h MPIBENCH "$OUT"/job*.log
echo "$OUT"
