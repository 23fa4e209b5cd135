#!/usr/bin/env bash
# Two copies of a bundled MPI benchmark (one rank per node, 2 nodes) run as
# coordinator jobs (`cosched attach` around the library's launcher) under
# gang slices, with a kernel trace of the timed part (a tracefs instance:
# sched_switch, sched_wakeup, signal_generate (the agents' SIGSTOP/SIGCONT),
# the ranks' sends and receives). Analyse with docs/probes/mpi_gang_trace.py
# OUTDIR [MARGIN_S]: per slice and node, when the job's rank got the CPU after its
# SIGCONT, when it first sent, how far the two nodes' switches lie apart,
# and which other tasks took the CPU inside the slice.
#
# usage: docs/probes/mpi_gang_trace.sh LIB PROG [PROG ARGS...]
#   e.g. docs/probes/mpi_gang_trace.sh openmpi pingpong
# Run from a built tree (cargo xtask build), as root, under the bench lock.
# Env: OUT (output dir, default $TMPDIR/mpi-gang-trace-LIB-PROG), POLICY
# (gang), SLICE_MS (10), SECS (timed seconds per job, 1.5), TSECS (traced
# seconds, 0.3), TSTART (trace from the common start + this, 0.4 s), TBUF_KB (16384), NJOBS (2; 1 = the job alone, the dedicated case), YIELD=1 (OpenMPI's mpi_yield_when_idle, for comparison).
set -euo pipefail
cd "$(dirname "$0")/../.."
LIB=${1:?lib}; PROG=${2:?prog}; shift 2
OUT=${OUT:-${TMPDIR:-/tmp}/mpi-gang-trace-$LIB-$PROG}
T=/sys/kernel/tracing/instances/cosched-mpi-gang-probe
EVENTS="sched/sched_switch sched/sched_wakeup signal/signal_generate syscalls/sys_enter_writev syscalls/sys_exit_readv syscalls/sys_enter_sendmsg syscalls/sys_enter_sendto syscalls/sys_exit_recvfrom syscalls/sys_exit_recvmsg"
CL=/run/cosched-cluster
mkdir -p "$OUT"
cargo xtask cluster down >/dev/null 2>&1 || true
cargo xtask cluster up --nodes 2 --coordinator "${POLICY:-gang}" --slice-ms "${SLICE_MS:-10}" >"$OUT/up.log" 2>&1
cleanup() {
    for e in $EVENTS; do echo 0 >"$T/events/$e/enable" 2>/dev/null || true; done
    rmdir "$T" 2>/dev/null || true
    cargo xtask cluster down >/dev/null 2>&1 || true
}
trap cleanup EXIT
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BIN="$TARGET/mpi/$LIB/$PROG"
[ -x "$BIN" ] || { echo "no $BIN: run cargo xtask bench mpi --quick once" >&2; exit 1; }
# The nodes as `cluster up` made them (cluster.json).
read -r HOSTS SUBNET IFACE <<<"$(python3 -c '
import json; c = json.load(open("'$CL'/cluster.json"))
print(",".join(n["address"] + ":1" for n in c["nodes"]), c["gateway"].rsplit(".", 1)[0] + ".0/" + str(c["prefix_len"]), c["bridge"])')"
CASES=$(python3 -c '
import json; c = json.load(open("'$CL'/cluster.json"))
for n in c["nodes"]:
    print("    %s) netns=%s; cpu=%s; cgroup=%s; sock=%s ;;" % (n["address"], n["netns"], n["cpu"], n["cgroup"], n["control_socket"]))')
NODEDIRS=$(python3 -c 'import json; print(" ".join(n["cgroup"] for n in json.load(open("'$CL'/cluster.json"))["nodes"]))')
# The launch agent, as xtask's bench writes it (xtask/src/mpi/launch.rs).
AGENT="$OUT/launch-agent.sh"
cat >"$AGENT" <<EOF
#!/bin/sh
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case "\$host" in
$CASES
    *) exit 255 ;;
esac
job="\$cgroup/\$COSCHED_MPI_JOB_CGROUP"; mkdir -p "\$job" && echo \$\$ > "\$job/cgroup.procs" || exit 255
export COSCHED_AGENT_SOCKET="\$sock"
cmd="\$*"
if [ -n "\$COSCHED_MPI_PREFIX_JOIN_DAEMON" ]; then cmd="\$COSCHED_JOIN_DAEMON \$cmd"; fi
exec setsid --wait nsenter --net=/run/netns/"\$netns" taskset --cpu-list "\$cpu" sh -c "\$cmd"
EOF
chmod +x "$AGENT"
CLI="$TARGET/release/cosched"
START=$(python3 -c 'import time; print(time.time() + 3.0)')
for j in $(seq 1 "${NJOBS:-2}"); do
    mkdir -p "$OUT/w$j"
    if [ "$LIB" = openmpi ]; then
        Y=(); [ -n "${YIELD:-}" ] && Y=(--mca mpi_yield_when_idle 1)
        (cd "$OUT/w$j" && COSCHED_MPI_JOB_CGROUP=mpi-g$j OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            "$CLI" --socket $CL/coordinator/coordinator.sock attach --name g$j --nodes n0,n1 -- \
            mpirun.openmpi --allow-run-as-root -np 2 --host "$HOSTS" \
            --mca plm_rsh_agent "$AGENT" --mca routed direct --mca btl tcp,self \
            --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
            --bind-to none --mca rtc ^hwloc "${Y[@]}" "$BIN" "$@" --start-at "$START" \
            --iters 1000000000 --max-seconds "${SECS:-1.5}") >"$OUT/job$j.log" 2>&1 &
    else
        (cd "$OUT/w$j" && COSCHED_MPI_JOB_CGROUP=mpi-g$j COSCHED_MPI_PREFIX_JOIN_DAEMON=1 \
            "$CLI" --socket $CL/coordinator/coordinator.sock attach --name g$j --nodes n0,n1 -- \
            mpiexec.hydra -launcher ssh -launcher-exec "$AGENT" -iface "$IFACE" \
            -hosts "$HOSTS" -np 2 -genv UCX_TLS self,tcp -genv UCX_NET_DEVICES eth0 \
            "$BIN" "$@" --start-at "$START" --iters 1000000000 --max-seconds "${SECS:-1.5}") >"$OUT/job$j.log" 2>&1 &
    fi
done
mkdir -p "$T"
echo 0 >"$T/tracing_on"; echo "${TBUF_KB:-16384}" >"$T/buffer_size_kb"; echo >"$T/trace"
for e in $EVENTS; do echo 1 >"$T/events/$e/enable"; done
sleep "$(python3 -c "import time; print(max(0, $START + ${TSTART:-0.4} - time.time()))")"
# Which process is whose: every task of each job's cgroup on each node.
for j in $(seq 1 "${NJOBS:-2}"); do n=0; for d in $NODEDIRS; do
    for p in $(cat "$d/mpi-g$j/cgroup.procs" 2>/dev/null); do
        for t in /proc/$p/task/*; do echo "g$j n$n $p ${t##*/} $(cat $t/comm)"; done
    done
    n=$((n + 1))
done; done >"$OUT/tasks.txt"
pgrep -f cosched-agent | while read -r p; do for t in /proc/$p/task/*; do echo "agent $p ${t##*/} $(cat $t/comm)"; done; done >"$OUT/agents.txt" || true
echo 1 >"$T/tracing_on"; sleep "${TSECS:-0.3}"; echo 0 >"$T/tracing_on"
cp "$T/trace" "$OUT/trace.txt"
wait
grep -h MPIBENCH "$OUT"/job*.log || true
echo "$OUT"
