#!/usr/bin/env python3
"""Other work on the ranks' CPUs, from real timelines: how often something
that is neither a rank nor the agent takes a rank's CPU, for how long, and
which task runs when it (or the agent) leaves — the rank it took the CPU
from, or another one. Compares the simulator's noise model (`noise_per_s`,
`noise_ns`, `noise_long_*`; after an interruption the scheduler picks
afresh) with the machine.

    docs/probes/synth_timeline_loop.sh --reps 1 --duration 3 --mpl 3 \\
        --workloads fine-spin --policies local,dcs          # as root, under the lock
    python3 sim/calibration/timeline_other_work.py OUT

OUT holds the probe's tl-<ns>.json recordings (`cosched timeline
--json-file`); recordings of a node with fewer than two jobs (the
dedicated runs) are left out. The agent is each node's most frequent
unmanaged thread.
"""
import collections
import glob
import json
import sys


def main():
    out = sys.argv[1]
    lengths, after = [], collections.Counter()
    cpu_s = 0.0
    for path in sorted(glob.glob(f"{out}/tl-*.json")):
        nodes = json.load(open(path))
        for n in nodes:
            if len(n["jobs"]) < 2:
                # A dedicated run: one rank per CPU, nothing to choose from.
                continue
            cpu_s += (n["end_ns"] - n["start_ns"]) / 1e9 * len(n["cpus"])
            switches = sorted(n["switches"], key=lambda s: s["ts_ns"])
            unmanaged = collections.Counter(
                s["next_tid"] for s in switches if s["next_job"] == 0 and s["next_tid"] != 0
            )
            agent = unmanaged.most_common(1)[0][0] if unmanaged else None
            per_cpu = collections.defaultdict(list)
            for s in switches:
                per_cpu[s["cpu"]].append(s)
            for seq in per_cpu.values():
                for into, out_of in zip(seq, seq[1:]):
                    # A rank's CPU taken by an unmanaged thread, until it leaves.
                    if into["prev_job"] == 0 or into["next_job"] != 0 or into["next_tid"] == 0:
                        continue
                    if out_of["prev_tid"] != into["next_tid"]:
                        continue
                    who = "agent" if into["next_tid"] == agent else "other work"
                    if who == "other work":
                        lengths.append((out_of["ts_ns"] - into["ts_ns"]) / 1e3)
                    if out_of["next_job"] != 0:
                        same = out_of["next_tid"] == into["prev_tid"]
                        after[(who, "the same rank" if same else "another rank")] += 1
    lengths.sort()
    n = len(lengths)
    if not n:
        print("no other work on a rank's CPU recorded")
        return
    long = [x for x in lengths if x > 200]
    short = [x for x in lengths if x <= 200]
    print(f"{cpu_s:.2f} CPU-s recorded; other work took a rank's CPU {n} times, {n / cpu_s:.1f}/s per CPU")
    print(
        f"length µs: p50 {lengths[n // 2]:.1f}, p90 {lengths[int(n * 0.9)]:.1f}, "
        f"p99 {lengths[int(n * 0.99)]:.1f}, mean {sum(lengths) / n:.1f}"
    )
    print(
        f"over 200 µs: {len(long) / n:.3f} of them, mean {sum(long) / max(1, len(long)):.0f} µs; "
        f"the others mean {sum(short) / max(1, len(short)):.1f} µs"
    )
    for (who, which), count in sorted(after.items()):
        total = sum(c for (w, _), c in after.items() if w == who)
        print(f"after {who}: {which} {count} ({count / total:.0%})")


if __name__ == "__main__":
    main()
