#!/usr/bin/env python3
"""Old agent (main with the one-signal commit 526a922 reverted) against new
(main) on `bench mpi --columns gang,paired-gang --mpl 3`: per cell the
slowdown of each invocation (medians of 3 repetitions), and new/old of the
per-side medians, geometric mean per column. Reads mpigang-ab-{old,new}-N.json
next to this script."""
import glob, json, math, os, statistics as st

here = os.path.dirname(os.path.abspath(__file__))
cells = {}
for side in ('old', 'new'):
    for f in sorted(glob.glob(f'{here}/mpigang-ab-{side}-*.json')):
        for r in json.load(open(f)):
            if r['mpl'] > 1 and r.get('slowdown'):
                key = (r['lib'], r['workload'], r['mpl'], r['column'])
                cells.setdefault(key, {}).setdefault(side, []).append(r['slowdown'])
print('| lib | workload | MPL | column | old | new |')
print('|---|---|---|---|---|---|')
fmt = lambda v: ' / '.join(f'{x:.2f}' for x in v) if v else '-'
for k in sorted(cells):
    c = cells[k]
    print(f'| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt(c.get("old"))} | {fmt(c.get("new"))} |')
for col in sorted({k[3] for k in cells}):
    r = [st.median(c['new']) / st.median(c['old'])
         for k, c in cells.items() if k[3] == col and c.get('old') and c.get('new')]
    if r:
        g = math.exp(sum(map(math.log, r)) / len(r))
        print(f'{col}: new/old geometric mean {g:.3f} (cells {min(r):.2f}..{max(r):.2f}, n={len(r)})')
