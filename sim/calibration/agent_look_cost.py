#!/usr/bin/env python3
"""The agent's CPU per look (`agent_look_cpu_ns` in machine.toml), from
bench local's own counters (docs/results/local.json, re-measured rows from
local-remeasured.json in their place):

    python3 sim/calibration/agent_look_cost.py

Under DCS every look of the agent acts once: an arrival reported for a
preempted receiver boosts it, the boosted task's next wait (a reported spin
start) ends the boost. So a DCS cell's looks per node and second are its
level changes (`actions`, summed over the cell's jobs: one rank of each job
per node, over the 2 s window), and the agent's CPU beyond what it uses
with nothing to act on (the same workload and MPL under plain Linux,
`local`) grows with them: a least-squares line through the DCS cells, extra agent
CPU (ms/s) against looks/s, has the CPU per look as its slope and what the
agent spends per second whatever it acts on (its ticks) as its intercept.
Prints every DCS cell and the fit.
"""
import json
import os
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WINDOW_S = 2.0
NODES = 2


def cells():
    out = {}
    for name in ("local.json", "local-remeasured.json"):
        path = os.path.join(ROOT, "docs/results", name)
        if not os.path.exists(path):
            continue
        replaced = set()
        for row in json.load(open(path)):
            if row.get("status") != "ok":
                continue
            key = (row["workload"], row["policy"], row["mpl"])
            if key not in replaced:
                out.pop(key, None)
                replaced.add(key)
            out.setdefault(key, []).append(row)
    return out


def main():
    all_cells = cells()
    points = []
    for (workload, policy, mpl), rows in sorted(all_cells.items()):
        if policy != "dcs":
            continue
        plain = all_cells.get((workload, "local", mpl))
        actions = sum(r.get("actions") or 0 for r in rows)
        if not plain or actions <= 0:
            continue
        looks_per_s = actions / WINDOW_S / NODES
        extra = (rows[0]["agent_cpu_percent"] - plain[0]["agent_cpu_percent"]) / 100.0
        points.append((looks_per_s, extra * 1e3))
        print(
            f"{workload:11} MPL {mpl}: agent CPU {rows[0]['agent_cpu_percent']:.2f} % "
            f"(plain {plain[0]['agent_cpu_percent']:.2f} %), {looks_per_s:6.0f} looks/s "
            f"per node, {extra * 1e3:5.1f} ms/s more"
        )
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    print(
        f"fit over {len(points)} DCS cells: {slope * 1e3:.1f} us per look "
        f"+ {intercept:.1f} ms/s whatever the looks"
    )


if __name__ == "__main__":
    main()
