#!/usr/bin/env bash
# MPICH 4.0.2 (ch4:ucx) + UCX 1.13 over TCP: how often a job never ends in
# MPI_Finalize, with our benchmark programs as they were (MPI_Finalize right
# after the result) and as they are (ranks meet in a PMI barrier first, see
# xtask/mpi/mpibench.h). Plain Linux, no cosched: two copies of a 2-rank job
# at once (MPL 2), rank 0 of both on CPU 0, rank 1 on CPU 1, UCX restricted
# to TCP on loopback (as bench mpi restricts it to the node interface).
#
# usage: docs/probes/mpich_finalize_hang.sh [ROUNDS] [RUNS] [PROGRAM] [SECONDS]
#   ROUNDS  alternations of a batch without and a batch with the barrier (4)
#   RUNS    MPL-2 runs (two jobs each) per batch (50)
#   PROGRAM allreduce | pingpong | halo | testloop (allreduce)
#   SECONDS timed part of each job (0.2)
# A job still running 8 s after its start counts as hung; what its ranks do
# (wait channel, sockets with queued bytes, gdb backtraces) is written under
# the scratch directory printed at the end. Needs mpich, libmpich-dev, gdb.
# Hold the bench lock around it on a shared machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-4}; RUNS=${2:-50}; PROG=${3:-allreduce}; SECS=${4:-0.2}
TIMEOUT_S=8
case $PROG in
  allreduce) ARGS="--size 64 --compute-us 50" ;;
  pingpong) ARGS="--size 8 --compute-us 20" ;;
  halo) ARGS="--size 4096 --compute-us 100" ;;
  testloop) ARGS="--size 1024 --compute-us 50 --chunk-us 5" ;;
  *) echo "unknown program $PROG" >&2; exit 2 ;;
esac
ARGS="$ARGS --iters 1000000000 --max-seconds $SECS"
dir=$(mktemp -d)
# Unique process names, so that cleaning up kills only this probe's ranks.
old=mfh0_$PROG; new=mfh1_$PROG
mpicc.mpich -O2 -DMPIBENCH_NO_PMI_BARRIER -o "$dir/$old" "xtask/mpi/$PROG.c" 2>/dev/null
mpicc.mpich -O2 -o "$dir/$new" "xtask/mpi/$PROG.c" 2>/dev/null

# batch BINARY: RUNS runs of two jobs at once; prints "jobs hung".
batch() {
  local bin=$1 hung=0 jobs=0
  for i in $(seq "$RUNS"); do
    local pids=()
    for j in 1 2; do
      mpiexec.hydra -genv UCX_TLS self,tcp -genv UCX_NET_DEVICES lo \
        -n 1 taskset -c 0 "$dir/$bin" $ARGS : -n 1 taskset -c 1 "$dir/$bin" $ARGS \
        >"$dir/out.$j" 2>&1 &
      pids+=($!)
    done
    local t0=$SECONDS
    while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
      if (( SECONDS - t0 >= TIMEOUT_S )); then
        local f="$dir/hang-$bin-$i.txt"
        {
          for r in $(pgrep -x "$bin"); do
            echo "== rank $r $(ps -o stat= -p "$r") wchan $(cat "/proc/$r/wchan")"
          done
          ss -tnpoi | grep -A1 "$bin"
          for r in $(pgrep -x "$bin"); do
            echo "== backtrace $r"
            timeout 20 gdb -p "$r" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E '^#|^Thread'
          done
        } >"$f" 2>&1
        break
      fi
      sleep 0.1
    done
    for p in "${pids[@]}"; do
      jobs=$((jobs + 1))
      if kill -0 "$p" 2>/dev/null; then
        hung=$((hung + 1))
        kill -KILL "$p" $(pgrep -P "$p") 2>/dev/null
      fi
      wait "$p" 2>/dev/null
    done
    pkill -KILL -x "$bin" 2>/dev/null
  done
  echo "$jobs $hung"
}

tot_old=(0 0); tot_new=(0 0)
for r in $(seq "$ROUNDS"); do
  read -r j h < <(batch "$old"); tot_old=($((tot_old[0] + j)) $((tot_old[1] + h)))
  echo "round $r: MPI_Finalize right away: $h of $j jobs hung"
  read -r j h < <(batch "$new"); tot_new=($((tot_new[0] + j)) $((tot_new[1] + h)))
  echo "round $r: PMI barrier first:       $h of $j jobs hung"
done
echo "$PROG: MPI_Finalize right away ${tot_old[1]}/${tot_old[0]} jobs hung; PMI barrier first ${tot_new[1]}/${tot_new[0]} (snapshots in $dir)"
