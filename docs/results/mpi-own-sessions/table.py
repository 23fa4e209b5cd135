#!/usr/bin/env python3
"""Markdown table of bench mpi JSONs in this directory: slowdown medians per
lib, workload and MPL for plain Linux, the yield mode, DCS, the best other
local policy, gang and paired gang."""
import glob, json, os
here = os.path.dirname(os.path.abspath(__file__))
rows = []
for f in sorted(glob.glob(os.path.join(here, '*.json'))):
    rows += json.load(open(f))
cells = {}
for r in rows:
    s = r.get('slowdown')
    if s is None or r.get('mpl', 1) < 2:
        continue
    cells.setdefault((r['lib'], r['workload'], r['mpl']), {})[r['column']] = s
local_policies = ['sb', 'sy', 'pb', 'pb-sb', 'dcs-sb', 'fcs']
print('| lib | workload | MPL | plain | yield | dcs | best other local | gang 10 ms | paired 10 ms |')
print('|---|---|---|---|---|---|---|---|---|')
for (lib, w, mpl), c in sorted(cells.items()):
    other = min(((c[p], p) for p in local_policies if p in c), default=None)
    f = lambda k: f"{c[k]:.2f}" if k in c else 'n/a'
    gang = next((k for k in c if k.startswith('gang')), None)
    paired = next((k for k in c if k.startswith('paired')), None)
    print(f"| {lib} | {w} | {mpl} | {f('local')} | {f('yield')} | {f('dcs')} | "
          f"{other[1] + ' ' + format(other[0], '.2f') if other else 'n/a'} | "
          f"{f(gang) if gang else 'n/a'} | {f(paired) if paired else 'n/a'} |")
