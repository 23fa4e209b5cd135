#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_timeline_probe.sh for a
boosting policy (PB, DCS): per node and rank, its runs, its boosts (how many,
whether the rank was in a spin episode when boosted, how long the boost
lasted, how soon the rank got the CPU), what each boost displaced (the rank
of the other job on the CPU: spinning or not, and whether its own peer on
the other node was on CPU at that moment, i.e. whether the boost broke a
co-run), and per job the co-run share."""
import bisect, collections, json, sys


def pct(xs, p):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


d = json.load(open(sys.argv[1] + '/timeline.json'))
t0 = max(n['start_ns'] for n in d)
t1 = min(n['end_ns'] for n in d)
runs_of, rank_of, spins_of = {}, {}, {}
for n in d:
    sw = sorted(n['switches'], key=lambda s: s['ts_ns'])
    cnt = collections.Counter((s['next_tid'], s['next_job']) for s in sw if s['next_job'])
    for (tid, job), _ in cnt.most_common():
        rank_of.setdefault((n['node'], job), tid)
    for (node, job), tid in rank_of.items():
        if node != n['node']:
            continue
        ins = [s['ts_ns'] for s in sw if s['next_tid'] == tid]
        outs = [s['ts_ns'] for s in sw if s['prev_tid'] == tid]
        runs = []
        for t in ins:
            o = next((u for u in outs if u > t), None)
            if o:
                runs.append((t, o))
        runs_of[(node, job)] = runs
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


for job in sorted({j for _, j in runs_of}):
    if len(nodes) == 2 and all((nd, job) in runs_of for nd in nodes):
        co = overlap(runs_of[(nodes[0], job)], runs_of[(nodes[1], job)]) / (t1 - t0)
        print(f"job {job}: co-run {co:.2f} of the recording")
