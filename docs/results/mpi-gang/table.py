#!/usr/bin/env python3
"""Markdown table of the confirmation run (openmpi.json, mpich.json in this
directory): per lib, workload and MPL, the dedicated time, plain Linux, the
yield mode, gang and paired gang at 10 ms, and issue 12's gang target (<= 2.1
at MPL 2, <= 3.15 at MPL 3, and below the yield mode where there is one)."""
import json, os
here = os.path.dirname(os.path.abspath(__file__))
rows = []
for lib in ('openmpi', 'mpich'):
    path = os.path.join(here, lib + '.json')
    if os.path.exists(path):
        rows += json.load(open(path))
cells, dedicated = {}, {}
for r in rows:
    if r.get('slowdown') is None:
        continue
    if r['mpl'] == 1:
        dedicated[(r['lib'], r['workload'])] = r['per_iteration_s']
        continue
    cells.setdefault((r['lib'], r['workload'], r['mpl']), {})[r['column']] = r['slowdown']
LIMIT = {2: 2.1, 3: 3.15}
print('| lib | workload | MPL | dedicated µs/iter | plain | yield | gang 10 ms | paired 10 ms | gang target | paired target |')
print('|---|---|---|---|---|---|---|---|---|---|')
for (lib, w, mpl), c in sorted(cells.items()):
    f = lambda k: f"{c[k]:.2f}" if k in c else 'n/a'
    gang = next((k for k in c if k.startswith('gang')), None)
    paired = next((k for k in c if k.startswith('paired')), None)

    def verdict(k):
        if k is None:
            return 'n/a'
        ok = c[k] <= LIMIT[mpl] and ('yield' not in c or c[k] < c['yield'])
        return 'met' if ok else 'missed'
    d = dedicated.get((lib, w))
    print(f"| {lib} | {w} | {mpl} | {d * 1e6:.1f} | {f('local')} | {f('yield')} | "
          f"{f(gang) if gang else 'n/a'} | {f(paired) if paired else 'n/a'} | "
          f"{verdict(gang)} | {verdict(paired)} |")
