#!/usr/bin/env python3
"""Why a calibration cell is outside +-10 %: every such cell of
docs/results/sim/calibration.json belongs to one cause, and each cause is
a section of docs/simulator.md ("Cells outside +-10 %, by cause") with the
measurement behind it. `calibrate.py --table` prints the cause beside
every cell outside; this script prints the cells of each cause:

    python3 sim/calibration/causes.py docs/results/sim/calibration.json

A cell outside that no rule below matches is printed as `unexplained`
(and the script exits 1), so a new calibration cannot leave a cell out
without a reason written down.
"""
import json
import sys

SPIN_BLOCK = ("sb", "dcs-sb", "pb-sb", "pb")

# Cause key -> the heading of its paragraph in docs/simulator.md.
CAUSES = {
    "away-cost": "C1 what a task's return costs after time away",
    "drift": "C2 the same cell measured 8-11 % apart",
    "spread": "C3 the cell's own spread",
    "fcs-version": "C4 FCS measured before it was dormant",
    "dcs-spin": "C5 DCS ranks spin 3x as long",
    "sy-step": "C6 SY's returned pair stays in step",
    "mix-split": "C7 the mix's CPU split under spin-block policies",
    "sb-step": "C8 SB at MPL 2 delivers more than measured",
    "io-phase": "C9 the phase of two I/O jobs' sleeps",
    "slot-owner": "C10 which job owns FCS's slot",
    "io-plain": "C11 plain Linux io-heavy MPL 3, an agent's presence",
}


def outside(row):
    return abs(row["ratio"] - 1) > 0.1


def cause(row):
    """The cause key of a cell outside +-10 % (None when inside)."""
    if not outside(row):
        return None
    bench, work, pol, mpl = row["bench"], row["workload"], row["policy"], row["mpl"]
    job = row["job"]
    runs = row.get("runs") or [row["simulated"]]
    if bench == "gang":
        if work == "io":
            return "io-phase"
        if pol == "fcs":
            return "slot-owner"
        if pol == "dcs":
            return "dcs-spin"
        return None
    if work == "blocking":
        # Re-measured on 2026-11-27 (local-remeasured.json) with no level set.
        if pol in ("pb", "sy") and mpl == 3:
            return "drift"
        return "away-cost"
    if work == "io-heavy" and pol == "local":
        return "io-plain"
    if pol == "fcs" and work in ("coarse-spin", "io-heavy"):
        return "fcs-version"
    if pol in ("fcs", "local") and (work == "fine-spin" or job.startswith("fine-spin")):
        if min(runs) * 0.95 <= row["measured"] <= max(runs) * 1.05:
            return "spread"
        return None
    if pol == "dcs":
        return "dcs-spin"
    if pol == "sy":
        return "sy-step"
    if pol == "sb" and mpl == 2 and work in ("fine-spin", "mix"):
        return "sb-step"
    if work == "mix" and pol in SPIN_BLOCK:
        return "mix-split"
    return None


def main():
    rows = json.load(open(sys.argv[1]))
    groups = {}
    for r in rows:
        if outside(r):
            groups.setdefault(cause(r) or "unexplained", []).append(r)
    total = sum(len(v) for v in groups.values())
    print(f"{total} of {len(rows)} cells outside +-10 %")
    for key in list(CAUSES) + ["unexplained"]:
        rs = groups.get(key, [])
        if not rs:
            continue
        print(f"\n{key} ({CAUSES.get(key, 'no reason written down')}): {len(rs)} cells")
        for r in rs:
            sl = f" {r['slice_ms']} ms" if r["slice_ms"] else ""
            print(
                f"  {r['bench']} {r['workload']} MPL {r['mpl']} {r['policy']}{sl} {r['job']}: "
                f"measured {r['measured']:.2f}, simulated {r['simulated']:.2f} "
                f"(seeds {min(r['runs']):.2f}-{max(r['runs']):.2f}), {r['ratio']:.2f}"
            )
    sys.exit(1 if "unexplained" in groups else 0)


if __name__ == "__main__":
    main()
