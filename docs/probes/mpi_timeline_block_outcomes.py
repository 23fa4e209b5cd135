#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_timeline_probe.sh: per node
and rank, for every block (demote) the agent put on it, how long its wait
went on after the block (block -> the end of its spin episode, i.e. its
receive), bucketed, and whether the rank's peer (the same job's rank on the
other node) was on its CPU at the block. A block whose wait ends sooner
than a block costs was premature: spinning on would have been cheaper
(the competitive rule behind SB's threshold, docs/policies/sb.md)."""
import bisect, sys

from mpi_timeline import load, pct, ranks, runs as runs_on_cpu, sorted_switches

d, t0, t1 = load(sys.argv[1])
info = {}
for n in d:
    sw = sorted_switches(n)
    for job, tid in ranks(sw).items():
        info[(n['node'], job)] = (n, tid, runs_on_cpu(sw, tid)[1])
nodes = [n['node'] for n in d]
BUCKETS = (20, 50, 100, 200, 500, 1000)
for (node, job), (n, tid, _) in sorted(info.items()):
    others = [x for x in nodes if x != node]
    peer = info.get((others[0], job)) if others else None
    acts = sorted((a for a in n['actions'] if a['tid'] == tid), key=lambda a: a['ts_ns'])
    ends = sorted(s['ts_ns'] for s in n['spins'] if s['tid'] == tid and not s['start'])
    rest, peer_on = [], 0
    for a in acts:
        if a['level'] != 'demote':
            continue
        i = bisect.bisect_right(ends, a['ts_ns'])
        if i < len(ends):
            rest.append((ends[i] - a['ts_ns']) / 1e3)
        if peer and any(s <= a['ts_ns'] < e for s, e in peer[2]):
            peer_on += 1
    counts = ", ".join(f"<{b} us {sum(r < b for r in rest)}" for b in BUCKETS)
    print(f"{node} job {job} (tid {tid}): {len(rest)} blocks, wait after the block p50 "
          f"{pct(rest, .5):.0f} / p90 {pct(rest, .9):.0f} us; {counts}; peer on its CPU at {peer_on}")
