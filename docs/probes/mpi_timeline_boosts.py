#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_timeline_probe.sh for a
boosting policy (PB, DCS): per node and rank, its runs, its boosts (how many,
whether the rank was in a spin episode when boosted, how long the boost
lasted, how soon the rank got the CPU), what each boost displaced (the rank
of the other job on the CPU: spinning or not, and whether its own peer on
the other node was on CPU at that moment, i.e. whether the boost broke a
co-run), and per job the co-run share."""
import bisect, collections, sys

from mpi_timeline import load, pct, print_co_runs, ranks, runs as runs_on_cpu, sorted_switches

d, t0, t1 = load(sys.argv[1])
runs_of, rank_of, spins_of = {}, {}, {}
for n in d:
    sw = sorted_switches(n)
    for job, tid in ranks(sw).items():
        rank_of[(n['node'], job)] = tid
    for (node, job), tid in rank_of.items():
        if node != n['node']:
            continue
        _, runs_of[(node, job)] = runs_on_cpu(sw, tid)
        sp = sorted((s['ts_ns'], s['start']) for s in n['spins'] if s['tid'] == tid)
        spins_of[(node, job)] = sp
    changes = sum(1 for a, b in zip(
        [s for s in sw if s['next_job']], [s for s in sw if s['next_job']][1:])
        if a['next_job'] != b['next_job'])
    secs = (n['end_ns'] - n['start_ns']) / 1e9
    print(f"{n['node']}: {changes / secs:.0f} job changes/s, {len(sw) / secs:.0f} switches/s")


def on_cpu(key, t):
    runs = runs_of.get(key, [])
    i = bisect.bisect_right(runs, (t, float('inf'))) - 1
    return i >= 0 and runs[i][0] <= t < runs[i][1]


def spinning(key, t):
    sp = spins_of.get(key, [])
    i = bisect.bisect_right(sp, (t, True)) - 1
    return i >= 0 and sp[i][1]


nodes = [n['node'] for n in d]
for n in d:
    node = n['node']
    other_node = [x for x in nodes if x != node]
    for (nd, job), tid in sorted(rank_of.items()):
        if nd != node:
            continue
        others = [j for (x, j) in rank_of if x == node and j != job]
        acts = sorted((a for a in n['actions'] if a['tid'] == tid), key=lambda a: a['ts_ns'])
        lens = [(o - t) / 1e3 for t, o in runs_of[(node, job)]]
        boosts = [(a, acts[i + 1] if i + 1 < len(acts) else None)
                  for i, a in enumerate(acts) if a['level'].startswith('boost')]
        stats = collections.Counter()
        dur, to_cpu = [], []
        for a, b in boosts:
            t = a['ts_ns']
            stats['boosted while spinning' if spinning((node, job), t) else 'boosted not spinning'] += 1
            stats['already on CPU' if on_cpu((node, job), t) else 'off CPU'] += 1
            if b:
                dur.append((b['ts_ns'] - t) / 1e3)
            ins = [r[0] for r in runs_of[(node, job)] if r[0] >= t]
            if ins and not on_cpu((node, job), t):
                to_cpu.append((ins[0] - t) / 1e3)
            for oj in others:
                if on_cpu((node, oj), t):
                    sp = 'spinning' if spinning((node, oj), t) else 'not spinning'
                    peer = any(on_cpu((x, oj), t) for x in other_node)
                    stats[f'displaced job {oj} {sp}, its peer {"ON" if peer else "off"} CPU'] += 1
        print(f"{node} job {job} (tid {tid}): {len(lens)} runs, median {pct(lens, .5):.0f} us; "
              f"{len(boosts)} boosts, lasted p50 {pct(dur, .5):.0f} / p90 {pct(dur, .9):.0f} us, "
              f"boost -> on CPU p50 {pct(to_cpu, .5):.0f} us")
        for k, v in sorted(stats.items()):
            print(f"    {k}: {v}")


print_co_runs(runs_of, nodes, t0, t1)
