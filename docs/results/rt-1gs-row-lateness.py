#!/usr/bin/env python3
"""1GS row lateness (docs/bench-rt.md, session 17): how far each admitted RT
job's runs of rows drift from the 60 ms cycle its first run of rows set, read
from its first rank's frame done times (bench rt JSON with --frame-times). A
run of rows starts where a frame is done more than 15 ms after the previous
one; its lateness is its start minus the nearest multiple of 60 ms after the
first run. A slice grid that moves with a late coordinator loop shows as
lateness that grows and stays; a single late switch as one late run.
Usage: rt-1gs-row-lateness.py FILE..."""
import json, statistics as st, sys

CYCLE_US, GAP_US = 60_000, 15_000
for path in sys.argv[1:]:
    d = json.load(open(path))
    for row in d['rows']:
        if row.get('column') != '1gs':
            continue
        worst = []
        for job in row.get('rt_starts', []):
            done = job['ranks'][0].get('done_us') or []
            starts = [done[i] for i in range(1, len(done)) if done[i] - done[i - 1] > GAP_US]
            if len(starts) < 3:
                continue
            late = [(s - starts[0]) - CYCLE_US * round((s - starts[0]) / CYCLE_US) for s in starts]
            worst.append(max(late) / 1000)
        if not worst:
            print(path, row['rate_per_s'], 'no frame times'); continue
        print(f"{path} rate {row['rate_per_s']}: miss {row['rt_miss_rate']*100:.2f}% jobs {len(worst)} "
              f"latest run of rows ms: max {max(worst):.1f} median over jobs {st.median(worst):.1f}")
