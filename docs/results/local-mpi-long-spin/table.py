"""bench mpi JSON -> the markdown tables of docs/benchmarks.md: slowdown per
column, the best local policy's ratio to plain Linux, and the policies more
than 5 % worse than plain Linux (all columns of one run)."""
import json, sys

LOCAL = ["dcs", "dcs-sb", "sb", "sy", "pb", "pb-sb", "fcs"]
rows = [r for path in sys.argv[1:] for r in json.load(open(path))]
cells = {}
for r in rows:
    if r["status"] == "ok":
        cells[(r["lib"], r["workload"], r["mpl"], r["column"])] = r["slowdown"]
keys = sorted({(l, w, m) for (l, w, m, c) in cells if m > 1})
cols = ["local", "yield"] + LOCAL
print("| lib | workload | MPL | " + " | ".join("plain" if c == "local" else c for c in cols) + " | best local, × plain | > 5 % worse than plain |")
print("|" + "---|" * (len(cols) + 5))
for l, w, m in keys:
    plain = cells.get((l, w, m, "local"))
    vals = [cells.get((l, w, m, c)) for c in cols]
    txt = ["n/a" if v is None else f"{v:.2f}" for v in vals]
    locs = {c: cells[(l, w, m, c)] for c in LOCAL if (l, w, m, c) in cells}
    best = min(locs, key=locs.get)
    ratio = plain / locs[best]
    worse = [f"{c} +{100*(v/plain-1):.0f} %" for c, v in locs.items() if v > plain * 1.05]
    print(f"| {l} | {w} | {m} | " + " | ".join(txt) + f" | {best} {ratio:.2f}× | {', '.join(worse) or 'none'} |")
