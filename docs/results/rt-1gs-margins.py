#!/usr/bin/env python3
"""1GS margins (docs/bench-rt.md): of every complete window of every admitted RT rank in bench rt
JSON files (needs --frame-times): window end - done time of the window's
b-th frame (cumulative), ms; negative = missed. Usage: margins.py FILE..."""
import json, sys, statistics as st
B, GAMMA_US = 30, 300_000
for path in sys.argv[1:]:
    d = json.load(open(path))
    for row in d['rows']:
        if row.get('column') != '1gs':
            continue
        m = []
        gated = ungated = 0
        for job in row.get('rt_starts', []):
            for rank in job['ranks']:
                done = rank.get('done_us') or []
                if rank.get('gate_ns'):
                    gated += 1
                else:
                    ungated += 1
                if not done:
                    continue
                w = 0
                while (w + 1) * B - 1 < len(done) and (w + 1) * GAMMA_US <= done[-1]:
                    m.append(((w + 1) * GAMMA_US - done[(w + 1) * B - 1]) / 1000)
                    w += 1
        if not m:
            print(path, row['rate_per_s'], 'no frame times'); continue
        m.sort()
        q = lambda p: m[min(len(m) - 1, int(p * len(m)))]
        print(f"{path} rate {row['rate_per_s']}: miss {row['rt_miss_rate']*100:.2f}% by_window {row['rt_missed_by_window']} "
              f"out {row.get('outside_cpu_percent')}% ranks gated/ungated {gated}/{ungated} windows {len(m)} "
              f"margin ms min {m[0]:.2f} p10 {q(0.1):.2f} median {st.median(m):.2f}")
