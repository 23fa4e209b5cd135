#!/bin/bash
# Measurement harness of docs/benchmarks.md "Paired gang with its slices
# announced ahead, on real MPI and synthetic (session 19)": `xtask bench mpi`
# and `xtask bench gang` write the coordinator's config themselves and have
# no option for `paired_schedule_ahead`, so this script, copied over
# target/release/cosched-coordinator for the "on" invocations, starts the
# real coordinator (COSCHED_REAL_COORDINATOR, a copy of the built binary)
# with `paired_schedule_ahead = true` prepended to the generated config.
# The bench snapshots target/release at its start; restore the binary after.
set -euo pipefail
real="${COSCHED_REAL_COORDINATOR:?path of the real cosched-coordinator}"
args=()
prev=""
for a in "$@"; do
  if [ "$prev" = "--config" ]; then
    on="${a%.toml}.ahead.toml"
    { echo "paired_schedule_ahead = true"; cat "$a"; } > "$on"
    a="$on"
  fi
  args+=("$a")
  prev="$a"
done
exec "$real" "${args[@]}"
