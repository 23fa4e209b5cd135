#!/usr/bin/env python3
"""The seeds' experiments at their scale through cosched-sim (issue 15 item 3).

    python3 sim/experiments/seeds.py [001|000 ...] [--sim target/release/cosched-sim]

001: Paired Gang Scheduling Fig. 10: a 16-node cluster, a stream of 500 jobs,
     every job homogeneous fine grain at ~45 % CPU (compute, then a blocking
     wait of 55 % of the iteration, then a blocking exchange with its
     neighbours), unrestricted multiprogramming (MPL 32), 1 s slices,
     strict gang (SIGSTOP outside the slice) vs paired gang, response time
     and slowdown against offered load.
000: ClusterSchedSim Fig. 8b/c and Fig. 9: 32 nodes, 100 jobs at load 0.7,
     a communication-intensive stream (spinning nearest-neighbour exchanges
     every 20 ms) and an I/O-intensive one (half of every 20 ms iteration in
     I/O), MPL 5, the seed's system parameters (seed000.toml), gang against
     the local (dynamic coscheduling) policies: response time and the CPU
     split. A run that takes over 150 s of wall time is left out.
     --kind, --load and --scheme (comma lists) run a part of it: the rows
     run replace theirs in seed000.json, the others are kept, and the SVGs
     are drawn from them all (so the set can be run in several parts).
Writes docs/results/sim/seed001.json/.svg, seed000.json, seed000-comm.svg
and seed000-io.svg.
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "docs/results/sim")


def run(sim, args, timeout=None):
    cmd = [sim, "--progress", "false", "--perf"] + args
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  gave up after {timeout} s: {' '.join(args)}", flush=True)
        return []
    return json.loads(out.stdout)


def summary(r):
    return {
        "label": r["label"],
        "response_s_mean": r["response_s"]["mean"],
        "slowdown_mean": r["slowdown"]["mean"],
        "slowdown_median": r["slowdown"]["median"],
        "utilization": r["utilization"],
        "cpu": r["cpu"],
        "makespan_s": r["makespan_s"],
        "wall_s": r["performance"]["wall_s"],
    }


def svg_lines(title, xlabel, ylabel, series, path, log_y=False):
    """series: {name: [(x, y), ...]} -> a small line chart."""
    import math

    w, h, ml, mb, mt, mr = 640, 400, 70, 50, 40, 160
    xs = [x for s in series.values() for x, _ in s]
    ys = [y for s in series.values() for _, y in s]
    f = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    x0, x1 = min(xs), max(xs)
    y0, y1 = (f(min(ys)), f(max(ys))) if log_y else (0.0, max(ys) * 1.05)
    sx = lambda x: ml + (x - x0) / ((x1 - x0) or 1) * (w - ml - mr)
    sy = lambda y: h - mb - (f(y) - y0) / ((y1 - y0) or 1) * (h - mb - mt)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w/2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{ml}" y1="{h-mb}" x2="{w-mr}" y2="{h-mb}" stroke="black"/>',
           f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h-mb}" stroke="black"/>',
           f'<text x="{(ml+w-mr)/2}" y="{h-12}" text-anchor="middle">{xlabel}</text>',
           f'<text x="16" y="{(mt+h-mb)/2}" text-anchor="middle" transform="rotate(-90 16 {(mt+h-mb)/2})">{ylabel}</text>']
    for x in sorted(set(xs)):
        out.append(f'<text x="{sx(x):.1f}" y="{h-mb+16}" text-anchor="middle">{x:g}</text>')
    for i in range(5):
        v = y0 + (y1 - y0) * i / 4
        val = 10 ** v if log_y else v
        out.append(f'<text x="{ml-6}" y="{h-mb-(h-mb-mt)*i/4+4:.1f}" text-anchor="end">{val:.3g}</text>')
    for i, (name, pts) in enumerate(series.items()):
        c = colors[i % len(colors)]
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{d}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{w-mr+10}" y="{mt+16*i+10}" fill="{c}">{name}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def seed001(sim):
    rows = []
    for load in (0.5, 0.7, 0.8, 0.9, 0.95):
        args = ["--nodes", "16", "--jobs", "500", "--load", str(load), "--max-size", "16",
                "--min-runtime-s", "5", "--max-runtime-s", "500",
                "--comm-fraction", "0", "--io-fraction", "1", "--io-share", "0.55",
                "--granularity-ms", "20", "--recv", "block", "--jitter", "0",
                "--mpl", "32", "--slice-ms", "1000", "--stop-inactive",
                "--global", "gang,paired-gang", "--local", "local"]
        for r in run(sim, args):
            s = summary(r)
            s["load"] = load
            rows.append(s)
            print(f"001 load {load} {s['label']}: response {s['response_s_mean']:.1f} s, "
                  f"slowdown {s['slowdown_mean']:.2f}, wall {s['wall_s']:.1f} s", flush=True)
    json.dump({"command": "python3 sim/experiments/seeds.py 001", "rows": rows},
              open(os.path.join(OUT, "seed001.json"), "w"), indent=1)
    series = {}
    for r in rows:
        series.setdefault(r["label"].split("/")[0], []).append((r["load"], r["response_s_mean"]))
    svg_lines("Seed 001 set-up: mean response time vs load (16 nodes, 500 jobs)",
              "offered load", "mean response time (s)", series,
              os.path.join(OUT, "seed001.svg"))


SEED000_KINDS = {
    "comm": ["--comm-fraction", "1", "--io-fraction", "0", "--recv", "spin"],
    "io": ["--comm-fraction", "0", "--io-fraction", "1", "--io-share", "0.5", "--recv", "spin"],
}
SEED000_LOADS = (0.5, 0.7, 0.9)
SEED000_SCHEMES = [("gang", "local")] + [
    ("local", p) for p in ("local", "sb", "dcs", "dcs-sb", "pb", "pb-sb", "sy")
]


def scheme_name(glob, loc):
    return "gang" if glob == "gang" else loc


def seed000(sim, kinds=None, loads=None, schemes=None):
    path = os.path.join(OUT, "seed000.json")
    everything = kinds is None and loads is None and schemes is None
    old = {"rows": [], "left_out": []}
    if not everything and os.path.exists(path):
        old = json.load(open(path))
        old.setdefault("left_out", [])
    rows, left_out = [], []
    done = set()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    for kind, extra in SEED000_KINDS.items():
        if kinds and kind not in kinds:
            continue
        for load in SEED000_LOADS:
            if loads and load not in loads:
                continue
            base = ["--config", os.path.join(HERE, "seed000.toml"), "--jobs", "100",
                    "--load", str(load), "--max-size", "32", "--min-runtime-s", "5",
                    "--max-runtime-s", "100", "--granularity-ms", "20",
                    "--stop-inactive"] + extra
            for glob, loc in SEED000_SCHEMES:
                name = scheme_name(glob, loc)
                if schemes and name not in schemes:
                    continue
                done.add((kind, load, name))
                got = run(sim, base + ["--global", glob, "--local", loc], timeout=150)
                if not got:
                    left_out.append({"workload": kind, "load": load, "scheme": name,
                                     "why": "over 150 s of wall time"})
                for r in got:
                    s = summary(r)
                    s["workload"] = kind
                    s["load"] = load
                    s["commit"] = commit
                    rows.append(s)
                    print(f"000 {kind} load {load} {s['label']}: response "
                          f"{s['response_s_mean']:.1f} s, slowdown {s['slowdown_mean']:.2f}, "
                          f"spin {s['cpu']['spinning']:.2f}, idle {s['cpu']['idle']:.2f}, "
                          f"wall {s['wall_s']:.1f} s", flush=True)

    def key(r):
        name = "gang" if r["label"].startswith("gang") else r["label"].split("/")[1]
        return (r["workload"], r["load"], name)

    order = {k: i for i, k in enumerate(SEED000_KINDS)}
    sorder = {scheme_name(g, l): i for i, (g, l) in enumerate(SEED000_SCHEMES)}
    rows += [r for r in old["rows"] if key(r) not in done]
    rows.sort(key=lambda r: (order[r["workload"]], r["load"], sorder[key(r)[2]]))
    left_out += [r for r in old["left_out"] if (r["workload"], r["load"], r["scheme"]) not in done]
    json.dump({"command": "python3 sim/experiments/seeds.py 000", "rows": rows,
               "left_out": left_out}, open(path, "w"), indent=1)
    for kind in SEED000_KINDS:
        series = {}
        for r in rows:
            if r["workload"] == kind:
                series.setdefault(key(r)[2], []).append((r["load"], r["response_s_mean"]))
        if series:
            svg_lines(f"Seed 000 set-up, {kind}-intensive: mean response time vs load "
                      "(32 nodes, MPL 5)", "offered load", "mean response time (s, log)",
                      series, os.path.join(OUT, f"seed000-{kind}.svg"), log_y=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="*", default=["001", "000"])
    ap.add_argument("--sim", default=os.path.join(ROOT, "target/release/cosched-sim"))
    ap.add_argument("--kind", help="000 only: comm,io")
    ap.add_argument("--load", help="000 only: some of 0.5,0.7,0.9")
    ap.add_argument("--scheme", help="000 only: some of gang,local,sb,dcs,dcs-sb,pb,pb-sb,sy")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if "001" in a.which:
        seed001(a.sim)
    if "000" in a.which:
        split = lambda v, f=str: [f(x) for x in v.split(",")] if v else None
        seed000(a.sim, split(a.kind), split(a.load, float), split(a.scheme))


if __name__ == "__main__":
    main()
