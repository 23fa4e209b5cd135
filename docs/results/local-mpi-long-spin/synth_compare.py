"""Synthetic bench, old code vs new: mean slowdown over a cell's jobs (mix: the
fine-spin job and the compute job separately), and each policy's ratio to the
plain Linux of its own run."""
import json, sys
from collections import defaultdict

def load(path):
    cells = defaultdict(list)
    for r in json.load(open(path)):
        if r["status"] != "ok":
            continue
        job = r["job"].rsplit("-", 1)[0] if r["workload"] == "mix" else ""
        cells[(r["workload"], job, r["mpl"], r["policy"])].append(r["slowdown"])
    return {k: sum(v) / len(v) for k, v in cells.items()}

old, new = load(sys.argv[1]), load(sys.argv[2])
print("| workload | MPL | policy | old | old ÷ plain | new | new ÷ plain | change of the ratio |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted(old):
    w, job, mpl, pol = k
    if pol == "local" or k not in new:
        continue
    po, pn = old[(w, job, mpl, "local")], new[(w, job, mpl, "local")]
    ro, rn = old[k] / po, new[k] / pn
    name = f"{w} ({job})" if job else w
    flag = " **worse**" if rn / ro > 1.05 else ""
    print(f"| {name} | {mpl} | {pol} | {old[k]:.2f} | {ro:.2f} | {new[k]:.2f} | {rn:.2f} | {100*(rn/ro-1):+.0f} %{flag} |")
for k in sorted(old):
    if k[3] == "local" and k in new:
        print(f"plain {k[0]} {k[1]} MPL {k[2]}: old {old[k]:.2f}, new {new[k]:.2f}")
