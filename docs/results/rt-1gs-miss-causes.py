#!/usr/bin/env python3
"""Where each missed 1GS window lost its time (docs/bench-rt.md, session 19). For every
admitted 1GS RT job with missed frames in a bench rt JSON (--frame-times), the agents'
--timeline files of its cell, and optionally the stall probe's log (rt-vcpu-stall.c: per-CPU
wake-ups of a SCHED_FIFO 99 thread later than 0.5 ms), prints per rank and missed window:
the margin (window end - done time of its b-th frame; negative = missed), and each run of
the job's rows in the window on the rank's node (frames done in it, how many by the window
end): the slice switch that started it as the agent applied it and its lateness against the slice grid (its applied instant - slice*Q - the
median of that over the node's 20 neighbouring switches), the rank's first frame of the run,
and the probe's stalls on the node's CPU from 5 ms before the row to 20 ms after it.
Usage: rt-1gs-miss-causes.py BENCH.json TIMELINE_DIR [STALL_LOG]"""
import json, os, statistics as st, sys

Q, GAP = 10_000_000, 15_000_000
bench, tldir = sys.argv[1], sys.argv[2]
stalls = [tuple(int(x) for x in l.split()) for l in open(sys.argv[3])] if len(sys.argv) > 3 else None
d = json.load(open(bench))
b, window_ns = d['workload']['frames'], d['workload']['frames'] * d['workload']['period_ns']

def grid_lateness(node):
    sl = [s for s in node['slices'] if s.get('number')]
    offs = [s['ts_ns'] - s['number']['slice'] * Q for s in sl]
    return [(s, (offs[i] - st.median(offs[max(0, i - 10):i + 11])) / 1e6) for i, s in enumerate(sl)]

for row in d['rows']:
    if row.get('column') != '1gs':
        continue
    path = os.path.join(tldir, f"1gs-{row['admission']}-{row['mix'].replace(':', 'to')}-{row['rate_per_s']:g}.json")
    if not os.path.exists(path):
        continue
    nodes = json.load(open(path))
    grids = [grid_lateness(n) for n in nodes]
    for job in row.get('rt_starts', []):
        if not sum(job['missed_by_window']):
            continue
        ff0 = job['ranks'][0]['first_frame_ns']
        tl_job = next((w['next_job'] for w in nodes[0]['switches'] if w['next_job'] and abs(w['ts_ns'] - ff0) < 5_000_000), None)
        print(f"rate {row['rate_per_s']:g} job {job['index']} (timeline job {tl_job}): missed by window {job['missed_by_window']}")
        for r, rank in enumerate(job['ranks']):
            ff = rank['first_frame_ns']
            done = [ff + u * 1000 for u in rank.get('done_us', [])]
            for w in range(len(job['missed_by_window'])):
                end = ff + (w + 1) * window_ns
                idx = (w + 1) * b - 1
                if idx >= len(done) or done[idx] <= end:
                    continue
                late_frames = sum(1 for i in range(w * b, (w + 1) * b) if i < len(done) and done[i] > end)
                print(f"  rank {r} window {w}: {late_frames} late, margin {(end - done[idx]) / 1e6:+.2f} ms; its runs of rows in the window:")
                starts = [i for i in range(len(done)) if i == 0 or done[i] - done[i - 1] > GAP]
                for n_, i in enumerate(starts):
                    first = done[i]
                    if not (end - window_ns <= first <= end):
                        continue
                    stop = starts[n_ + 1] if n_ + 1 < len(starts) else len(done)
                    in_window = sum(1 for x in done[i:stop] if x <= end)
                    node, grid = nodes[r], grids[r]
                    mine = [(s, l) for s, l in grid if first - GAP - Q <= s['ts_ns'] <= first and tl_job in (s.get('active') or [])]
                    s, glate = mine[0] if mine else (None, None)
                    row_start = s['ts_ns'] if s else first
                    other = [l for (s2, l) in grids[1 - r] if s and s2['number']['slice'] == s['number']['slice']] if len(nodes) > 1 else []
                    text = (f"    run: {stop - i} frames ({in_window} by the end), slice {s['number']['slice'] if s else '?'} applied "
                            f"{'?' if glate is None else f'{glate:+.2f}'} / {f'{other[0]:+.2f}' if other else '?'} ms off the grid (this / other node), "
                            f"first frame {(first - row_start) / 1e6:.2f} ms after it, last {(done[stop - 1] - row_start) / 1e6:.2f}, window end {(end - row_start) / 1e6:+.1f}")
                    if stalls is not None:
                        cpu = node['cpus'][0]
                        ms = [(round((a - row_start) / 1e6, 1), round(l / 1e6, 1)) for c, a, l in stalls if c == cpu and row_start - 5e6 <= a <= row_start + 2 * Q]
                        os_ = [(round((a - row_start) / 1e6, 1), round(l / 1e6, 1)) for c, a, l in stalls if c != cpu and row_start - 10e6 <= a <= row_start + 2e6 and l > 1e6]
                        text += f"; stalls on cpu{cpu} (ms from the row: ms) {ms}, > 1 ms on the other CPU at the switch {os_}"
                    print(text)
