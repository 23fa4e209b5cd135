#!/bin/sh
# Runs an MPI program as concurrent srun steps on the Slurm namespace
# cluster (`cargo xtask cluster up --coordinator gang --slice-ms 10 --slurm`),
# each one rank per node on all nodes, and prints each step's result line.
#
#   two-jobs.sh MODE PROGRAM [SECONDS] [PROGRAM ARGS...]
#   MODE: dedicated  one step, not coscheduled (COSCHED_SLURM=off)
#         plain      two steps at once, not coscheduled (plain Linux)
#         cosched    two steps at once, each a coscheduled job (the hook)
#
# Both steps time the same window (--start-at) and stop after SECONDS
# (--max-seconds); compare their us_per_iter with the dedicated run's.
set -eu
mode=$1 prog=$2 secs=${3:-3}
shift 2; [ $# -gt 0 ] && shift
export SLURM_CONF="${SLURM_CONF:-/run/cosched-cluster/slurm/slurm.conf}"
nodes=$(sinfo --noheader --Node --format %N | sort -u | wc -l)
subnet=${COSCHED_SUBNET:-10.201.0.0/24}
export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=$subnet OMPI_MCA_oob_tcp_if_include=$subnet
case $mode in
    dedicated) jobs=1; export COSCHED_SLURM=off ;;
    plain) jobs=2; export COSCHED_SLURM=off ;;
    cosched) jobs=2; unset COSCHED_SLURM ;;
    *) echo "two-jobs.sh: MODE is dedicated, plain or cosched" >&2; exit 2 ;;
esac
start=$(($(date +%s) + 2))
out=$(mktemp -d)
i=1
while [ $i -le $jobs ]; do
    srun -N"$nodes" -n"$nodes" --mpi=pmix "$prog" --iters 1000000000 \
        --max-seconds "$secs" --start-at "$start" "$@" >"$out/$i" 2>"$out/$i.err" &
    i=$((i + 1))
done
wait
for f in "$out"/*; do
    case $f in *.err) [ -s "$f" ] && sed "s/^/$(basename "$f" .err): /" "$f" >&2 ;; *) grep MPIBENCH "$f" | sed "s/^/$mode: /" ;; esac
done
rm -rf "$out"
