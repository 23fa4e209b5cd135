#!/usr/bin/env python3
"""new/old slowdown per policy: geometric mean over jobs and cells, min..max."""
import json, glob, math, os, sys
from collections import defaultdict
d = next((a for a in sys.argv[1:] if a != '-v'), os.path.dirname(os.path.abspath(__file__)))
ratios = defaultdict(list)
cells = []
for old in sorted(glob.glob(f'{d}/*-old.json')):
    new = old.replace('-old.json', '-new.json')
    if not os.path.exists(new):
        continue
    group = os.path.basename(old)[:-9]
    bench = 'gang' if group.startswith('gang') else 'local'
    key = lambda r: (r['workload'], r['policy'], r['mpl'], r['job'], r.get('slice_ms'))
    o = {key(r): r for r in json.load(open(old)) if r.get('slowdown')}
    n = {key(r): r for r in json.load(open(new)) if r.get('slowdown')}
    for k in sorted(set(o) & set(n)):
        ratio = n[k]['slowdown'] / o[k]['slowdown']
        pol = k[1] + (f" {k[4]}ms" if k[4] else '')
        ratios[(bench, pol)].append(ratio)
        cells.append((group, k, o[k]['slowdown'], n[k]['slowdown'], ratio))
print('| bench | policy | new/old (geo mean) | cells min..max | n |')
print('|---|---|---|---|---|')
for (bench, pol), rs in sorted(ratios.items()):
    g = math.exp(sum(map(math.log, rs)) / len(rs))
    print(f'| {bench} | {pol} | {g:.3f} | {min(rs):.2f}..{max(rs):.2f} | {len(rs)} |')
if '-v' in sys.argv:
    for c in cells:
        print(c[0], c[1][:4], f'{c[2]:.2f} -> {c[3]:.2f}  x{c[4]:.3f}')
