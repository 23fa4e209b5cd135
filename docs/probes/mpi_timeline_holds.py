#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_timeline_probe.sh: per node
and rank (the task of each job switched in most), its runs (count, median
length), and for every hold the agent put on it (demote, for SB/SY/PB-SB/
DCS-SB): how long it had spun when held, how long the hold lasted, how the
hold ended (back to normal or boosted), whether the rank ran while held, and
how long after the hold ended it got its CPU back; the policy's decisions
for it by reason (recordings of agents that note them: a hand-back without
a boost says why, `no-boost-on-cpu`, `no-boost-cpu-share`, ...; a refused
arrival boost changes no level but is noted too); then per job the share of
time both its ranks were on CPU at once (co-run)."""
import collections, sys

from mpi_timeline import load, pct, print_co_runs, ranks, runs as runs_on_cpu, sorted_switches

d, t0, t1 = load(sys.argv[1])
runs_of = {}
for n in d:
    sw = sorted_switches(n)
    for job, tid in sorted(ranks(sw).items()):
        ins, runs = runs_on_cpu(sw, tid)
        runs_of[(n['node'], job)] = runs
        acts = sorted((a for a in n['actions'] if a['tid'] == tid), key=lambda a: a['ts_ns'])
        starts = [s['ts_ns'] for s in n['spins'] if s['tid'] == tid and s['start']]
        held, spun, back, ended = [], [], collections.defaultdict(list), collections.Counter()
        for i, a in enumerate(acts[:-1]):
            if a['level'] != 'demote':
                continue
            b = acts[i + 1]
            how = 'boost' if b['level'].startswith('boost') else b['level']
            ran = any(a['ts_ns'] < t < b['ts_ns'] for t in ins)
            ended[(how, 'ran while held' if ran else 'did not run')] += 1
            held.append((b['ts_ns'] - a['ts_ns']) / 1e3)
            before = [s for s in starts if s <= a['ts_ns']]
            if before:
                spun.append((a['ts_ns'] - before[-1]) / 1e3)
            nxt = next((t for t in ins if t >= b['ts_ns']), None)
            if nxt and not ran:
                back[how].append((nxt - b['ts_ns']) / 1e3)
        lens = [(o - t) / 1e3 for t, o in runs]
        print(f"{n['node']} job {job} (tid {tid}): {len(runs)} runs, median {pct(lens, .5):.0f} us; "
              f"{len(held)} holds, spin start -> hold p50 {pct(spun, .5):.0f} us, "
              f"held p50 {pct(held, .5):.0f} / p90 {pct(held, .9):.0f} us")
        for k, v in sorted(ended.items()):
            print(f"    ended {k[0]}, {k[1]}: {v}")
        for how, v in sorted(back.items()):
            print(f"    hold ended {how} -> on CPU: p50 {pct(v, .5):.0f} / p90 {pct(v, .9):.0f} us ({len(v)})")
        why = collections.Counter(x['reason'] for x in n.get('decisions', []) if x['tid'] == tid)
        if why:
            print("    decisions: " + ", ".join(f"{r} {c}" for r, c in sorted(why.items())))
print_co_runs(runs_of, [n['node'] for n in d], t0, t1)
