#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_timeline_probe.sh: per node
and rank (the task of each job switched in most), its runs (count, median
length), and for every hold the agent put on it (demote, for SB/SY/PB-SB/
DCS-SB): how long it had spun when held, how long the hold lasted, how the
hold ended (back to normal or boosted), whether the rank ran while held, and
how long after the hold ended it got its CPU back; then per job the share of
time both its ranks were on CPU at once (co-run)."""
import collections, json, sys


def pct(xs, p):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


d = json.load(open(sys.argv[1] + '/timeline.json'))
runs_of = {}
for n in d:
    sw = sorted(n['switches'], key=lambda s: s['ts_ns'])
    cnt = collections.Counter((s['next_tid'], s['next_job']) for s in sw if s['next_job'])
    ranks = {}
    for (tid, job), _ in cnt.most_common():
        ranks.setdefault(job, tid)
    for job, tid in sorted(ranks.items()):
        ins = [s['ts_ns'] for s in sw if s['next_tid'] == tid]
        outs = [s['ts_ns'] for s in sw if s['prev_tid'] == tid]
        runs = []
        for t in ins:
            o = next((u for u in outs if u > t), None)
            if o:
                runs.append((t, o))
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
t0 = max(n['start_ns'] for n in d)
t1 = min(n['end_ns'] for n in d)


def overlap(a, b):
    i = j = tot = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0], t0), min(a[i][1], b[j][1], t1)
        tot += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


nodes = [n['node'] for n in d]
for job in sorted({j for _, j in runs_of}):
    if len(nodes) == 2 and all((nd, job) in runs_of for nd in nodes):
        co = overlap(runs_of[(nodes[0], job)], runs_of[(nodes[1], job)]) / (t1 - t0)
        print(f"job {job}: co-run {co:.2f} of the recording")
