#!/usr/bin/env python3
"""Simulates every cell of `bench local` and `bench gang` (the measured
results in docs/results/local.json and gang.json) with cosched-sim on the
machine parameters of machine.toml, and compares slowdowns cell by cell.

    python3 sim/calibration/calibrate.py [--sim target/release/cosched-sim]
        [--seeds 5] [--only WORKLOAD,...] [--policies POLICY,...] [--jobs N]
        [--out docs/results/sim/calibration.json]
    python3 sim/calibration/calibrate.py --table docs/results/sim/calibration.json

Measured cells: docs/results/local.json and gang.json, with the rows of
docs/results/local-remeasured.json (policies re-measured after they
changed) in place of local.json's for the same workload, policy and MPL.

Jobs are the benches' synthetic jobs (xtask/src/bench/local/workloads.rs):
the same compute, I/O and receive mode; every job runs the whole window, as
in the benches, and slowdown = dedicated iterations/s / shared iterations/s.
Each cell is the median over --seeds simulated runs (noise and the benches'
3 repetitions alike), job by job.
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile

from causes import CAUSES, cause

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
US = 1000
FOREVER = 2_000_000_000

# The benches' job types as simulator jobs (synth args of JobType::synth_args).
JOB_TYPES = {
    "fine-spin": dict(compute_ns=20 * US, recv="spin"),
    "coarse-spin": dict(compute_ns=2000 * US, recv="spin"),
    "blocking": dict(compute_ns=20 * US, recv="block"),
    "io-heavy": dict(compute_ns=100 * US, io_ns=2000 * US, recv="spin"),
    # One independent size-1 job per node, reported as one job.
    "compute": dict(compute_ns=1000 * US, pattern="none", solo=True),
    # Paired gang's barrier jobs (synth's barrier: gather at rank 0, release).
    "cpu-bound": dict(compute_ns=5000 * US, recv="block", pattern="barrier"),
    "io-bound": dict(compute_ns=0, io_ns=5000 * US, recv="block", pattern="barrier"),
}

# bench gang's columns: (global policy, local policy).
GANG_MODES = {
    "local": ("local", "local"),
    "dcs": ("local", "dcs"),
    "gang": ("gang", "local"),
    "paired-gang": ("paired-gang", "local"),
    "fcs": ("gang", "fcs"),
}


def job_type(label):
    return label.rsplit("-", 1)[0]


def specs_for(labels, nodes=2):
    """JobSpec list and, per label, the indices of its simulator jobs."""
    specs, index = [], {}
    for label in labels:
        t = JOB_TYPES[job_type(label)]
        copies = nodes if t.get("solo") else 1
        index[label] = []
        for _ in range(copies):
            index[label].append(len(specs))
            specs.append(
                {
                    "id": len(specs),
                    "arrival": 0,
                    "nodes": 1 if t.get("solo") else nodes,
                    "iterations": FOREVER,
                    "compute_ns": t["compute_ns"],
                    "compute_jitter": 0.0,
                    "io_ns": t.get("io_ns", 0),
                    "pattern": t.get("pattern", "ring"),
                    "message_bytes": 64,
                    "recv": t.get("recv", "spin"),
                    "kind": job_type(label),
                }
            )
    return specs, index


# Measured cells: each bench's results, then re-measurements of some
# policies (bench local --policies ...) whose rows replace that file's rows
# of the same workload, policy and MPL (each run has its own dedicated
# baselines, so a cell's slowdowns come from one run).
MEASURED = (
    ("local", ("docs/results/local.json", "docs/results/local-remeasured.json"), 2.0),
    ("gang", ("docs/results/gang.json",), 3.0),
)


def measured_cells():
    cells = {}
    for bench, paths, window in MEASURED:
        for path in paths:
            full = os.path.join(ROOT, path)
            if not os.path.exists(full):
                continue
            replaced = set()
            for row in json.load(open(full)):
                if row.get("status") != "ok" or row.get("slowdown") is None:
                    continue
                key = (bench, row["workload"], row["policy"], row["mpl"], row.get("slice_ms"))
                if key not in replaced:
                    cells.pop(key, None)
                    replaced.add(key)
                cell = cells.setdefault(key, {"window": window, "jobs": {}})
                cell["jobs"][row["job"]] = row["slowdown"]
    return cells


def simulate(sim, key, cell, seed, tmp, config):
    bench, workload, policy, mpl, slice_ms = key
    labels = list(cell["jobs"])
    specs, index = specs_for(labels)
    jobs_path = os.path.join(tmp, f"jobs-{abs(hash((key, seed)))}.json")
    json.dump(specs, open(jobs_path, "w"))
    if bench == "local":
        glob, local = "local", policy
    else:
        glob, local = GANG_MODES[policy]
    cmd = [
        sim,
        "--config", config,
        "--jobs-json", jobs_path,
        "--global", glob,
        "--local", local,
        "--mpl", str(mpl),
        "--window-ms", str(cell["window"] * 1000),
        "--cluster-seed", str(seed),
        "--progress", "false",
    ]
    if slice_ms:
        # bench gang stops (SIGSTOP) a job outside its slice: strict gang.
        cmd += ["--slice-ms", str(slice_ms), "--stop-inactive"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    jobs = out[0]["jobs"]
    result = {}
    for label, ids in index.items():
        rate = sum(jobs[i]["iterations_per_s"] for i in ids) / len(ids)
        ded = sum(jobs[i]["dedicated_iterations_per_s"] for i in ids) / len(ids)
        result[label] = {"slowdown": ded / rate if rate > 0 else float("inf"), "dedicated": ded}
    return result


def markdown(rows):
    """One line per cell: the jobs' measured and simulated slowdowns."""
    cells = {}
    for r in rows:
        key = (r["bench"], r["workload"], r["mpl"], r["policy"], r["slice_ms"] or 0)
        cells.setdefault(key, []).append(r)
    out = [
        "| bench | workload | MPL | policy | slice ms | measured | simulated | sim/measured | within ±10 % | cause |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(cells):
        rs = cells[key]
        m = " / ".join(f"{r['measured']:.2f}" for r in rs)
        s = " / ".join(f"{r['simulated']:.2f}" for r in rs)
        ratios = [r["ratio"] for r in rs]
        lo, hi = min(ratios), max(ratios)
        ok = sum(abs(x - 1) <= 0.1 for x in ratios)
        rr = f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}..{hi:.2f}"
        b, w, mpl, pol, sl = key
        why = ", ".join(sorted({CAUSES[c].split()[0] for c in map(cause, rs) if c}, key=lambda c: int(c[1:])))
        out.append(f"| {b} | {w} | {mpl} | {pol} | {sl or ''} | {m} | {s} | {rr} | {ok}/{len(rs)} | {why} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "target/release/cosched-sim"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--policies", default="")
    ap.add_argument("--jobs", type=int, default=1, help="simulations run at once")
    ap.add_argument("--out")
    ap.add_argument("--config", default=os.path.join(HERE, "machine.toml"), help="the machine model")
    ap.add_argument("--table", help="print the markdown table of an earlier --out file")
    args = ap.parse_args()
    if args.table:
        print(markdown(json.load(open(args.table))))
        return
    only = set(filter(None, args.only.split(",")))
    pols = set(filter(None, args.policies.split(",")))
    rows = []
    cells = [
        (key, cell)
        for key, cell in sorted(measured_cells().items(), key=lambda kv: str(kv[0]))
        if (not only or key[1] in only) and (not pols or key[2] in pols)
    ]
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(
        max(1, args.jobs)
    ) as pool:
        futures = [
            [pool.submit(simulate, args.sim, key, cell, seed, tmp, args.config) for seed in range(1, args.seeds + 1)]
            for key, cell in cells
        ]
        for (key, cell), fs in zip(cells, futures):
            runs = [f.result() for f in fs]
            for label, measured in cell["jobs"].items():
                sims = [r[label]["slowdown"] for r in runs]
                sim = statistics.median(sims)
                rows.append(
                    {
                        "bench": key[0], "workload": key[1], "policy": key[2],
                        "mpl": key[3], "slice_ms": key[4], "job": label,
                        "measured": measured, "simulated": sim, "runs": sims,
                        "ratio": sim / measured,
                        "dedicated_iterations_per_s": runs[0][label]["dedicated"],
                    }
                )
                r = rows[-1]
                print(
                    f"{r['bench']:5} {r['workload']:11} {r['policy']:11} {r['mpl']} "
                    f"{str(r['slice_ms'] or ''):3} {label:13} measured {measured:6.2f} "
                    f"sim {sim:6.2f} ({' '.join(f'{x:.2f}' for x in sims)}) "
                    f"ratio {sim / measured:5.2f}{'' if abs(sim / measured - 1) <= 0.1 else '  *'}",
                    flush=True,
                )
    columns = {}
    for r in rows:
        c = columns.setdefault((r["bench"], r["policy"]), [0, 0])
        c[0] += abs(r["ratio"] - 1) <= 0.1
        c[1] += 1
    for (bench, policy), (ok, n) in sorted(columns.items()):
        print(f"{bench:5} {policy:11} {ok}/{n}", file=sys.stderr)
    within = sum(abs(r["ratio"] - 1) <= 0.1 for r in rows)
    print(f"{within}/{len(rows)} job cells within +-10 %", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
