"""Synthetic bench, two builds measured in the same session: mean slowdown
per cell (mix: the fine-spin job and the compute job separately), each
policy's ratio to the plain Linux of its own invocation, and the change of
that ratio. Usage: compare.py OLD.json[,OLD2.json] NEW.json[,NEW2.json]"""
import json, sys
from collections import defaultdict

def load(paths):
    cells = defaultdict(list)
    for path in paths.split(","):
        for r in json.load(open(path)):
            if r["status"] != "ok":
                continue
            job = r["job"].rsplit("-", 1)[0] if r["workload"] == "mix" else ""
            cells[(r["workload"], job, r["mpl"], r["policy"])].append(r["slowdown"])
    return {k: sum(v) / len(v) for k, v in cells.items()}

old, new = load(sys.argv[1]), load(sys.argv[2])
print("| workload | MPL | policy | old | old ÷ plain | new | new ÷ plain | change of the slowdown | change of the ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for k in sorted(old):
    w, job, mpl, pol = k
    if k not in new:
        continue
    name = f"{w} ({job})" if job else w
    if pol == "local":
        print(f"| {name} | {mpl} | plain | {old[k]:.2f} | 1 | {new[k]:.2f} | 1 | {100*(new[k]/old[k]-1):+.0f} % | |")
        continue
    po, pn = old[(w, job, mpl, "local")], new[(w, job, mpl, "local")]
    ro, rn = old[k] / po, new[k] / pn
    raw = new[k] / old[k]
    flag = " **worse**" if raw > 1.05 and rn / ro > 1.05 else ""
    print(f"| {name} | {mpl} | {pol} | {old[k]:.2f} | {ro:.2f} | {new[k]:.2f} | {rn:.2f} | {100*(raw-1):+.0f} % | {100*(rn/ro-1):+.0f} %{flag} |")
