#!/usr/bin/env python3
"""Markdown table of a gang run of `bench mpi` (default: the confirmation
run, openmpi.json and mpich.json in this directory; or the JSON files given
as arguments): per lib, workload and MPL, the dedicated time, plain Linux,
the yield mode, gang and paired gang at 10 ms, and issue 12's gang target
(<= 2.1 at MPL 2, <= 3.15 at MPL 3, and below the yield mode where there is
one). With several files, a cell's dedicated time is that of the file that
holds the cell (each invocation measures its own)."""
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
paths = sys.argv[1:] or [os.path.join(here, lib + '.json') for lib in ('openmpi', 'mpich')]
cells, dedicated = {}, {}
for path in paths:
    if not os.path.exists(path):
        continue
    rows = json.load(open(path))
    # The dedicated time of the invocation that measured the cell.
    own = {(r['lib'], r['workload']): r['per_iteration_s']
           for r in rows if r['mpl'] == 1 and r.get('slowdown') is not None}
    for r in rows:
        if r.get('slowdown') is None or r['mpl'] == 1:
            continue
        key = (r['lib'], r['workload'], r['mpl'])
        cells.setdefault(key, {})[r['column']] = r['slowdown']
        if (r['lib'], r['workload']) in own:
            dedicated[key] = own[(r['lib'], r['workload'])]
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
    d = dedicated.get((lib, w, mpl))
    print(f"| {lib} | {w} | {mpl} | {d * 1e6:.1f} | {f('local')} | {f('yield')} | "
          f"{f(gang) if gang else 'n/a'} | {f(paired) if paired else 'n/a'} | "
          f"{verdict(gang)} | {verdict(paired)} |")
