#!/usr/bin/env python3
"""1GS pipeline lag (docs/bench-rt.md, session 17): for the 2-rank RT jobs
of bench rt JSON files (needs --frame-times), per rank the window-end margin
(window end - done time of the window's b-th frame, ms), and the lag of rank 1
behind rank 0 (done time of the same frame, ms): over all frames, at each
window's b-th frame, and at the first frame of every run of rows (a frame of
rank 0 done > 20 ms after its previous one). Usage: pipeline-lag.py FILE..."""
import json, sys, statistics as st
B, GAMMA_US, GAP_US = 30, 300_000, 20_000
q = lambda a, p: sorted(a)[min(len(a) - 1, int(p * len(a)))]
for path in sys.argv[1:]:
    d = json.load(open(path))
    for row in d['rows']:
        if row.get('column') != '1gs':
            continue
        margin = {0: [], 1: []}
        lag_all, lag_b, lag_run, late_runs = [], [], [], []
        for j, job in enumerate(row.get('rt_starts', [])):
            ranks = job['ranks'][:2]
            if len(ranks) < 2 or not all(r.get('done_us') for r in ranks):
                continue
            d0, d1 = ranks[0]['done_us'], ranks[1]['done_us']
            off_us = (ranks[1]['first_frame_ns'] - ranks[0]['first_frame_ns']) / 1000
            for i, done in enumerate((d0, d1)):
                w = 0
                while (w + 1) * B - 1 < len(done) and (w + 1) * GAMMA_US <= done[-1]:
                    margin[i].append(((w + 1) * GAMMA_US - done[(w + 1) * B - 1]) / 1000)
                    w += 1
            n = min(len(d0), len(d1))
            lag = [(d1[k] + off_us - d0[k]) / 1000 for k in range(n)]
            lag_all += lag
            lag_b += [lag[k] for k in range(B - 1, n, B)]
            for k in range(1, n):
                if d0[k] - d0[k - 1] > GAP_US:
                    lag_run.append(lag[k])
                    if lag[k] > 4:
                        late_runs.append((j, k, round(lag[k], 2)))
        if not lag_all:
            continue
        print(f"{path} rate {row['rate_per_s']}: miss {row['rt_miss_rate']*100:.2f}%")
        for i in margin:
            if margin[i]:
                print(f"  rank {i} margin ms min {min(margin[i]):.2f} p10 {q(margin[i], .1):.2f} median {st.median(margin[i]):.2f}")
        for name, a in (('all frames', lag_all), ('b-th frames', lag_b), ('first of a run', lag_run)):
            print(f"  lag {name}: n {len(a)} p50 {st.median(a):.2f} p90 {q(a, .9):.2f} p99 {q(a, .99):.2f} max {max(a):.2f}")
        print(f"  runs whose first frame rank 1 finished > 4 ms after rank 0: {len(late_runs)} of {len(lag_run)} {late_runs}")
