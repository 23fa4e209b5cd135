#!/usr/bin/env python3
"""Summarises agent_clock_offset.sh's samples: per phase and node, the
coordinator's offset estimates (true offset 0: one machine, one
CLOCK_MONOTONIC) and their stated uncertainty, in µs."""
import json
import statistics
import sys


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def node_rows(reply):
    """The node records in the coordinator's answer, however it is wrapped."""
    if isinstance(reply, list):
        if all(isinstance(x, dict) and "name" in x for x in reply):
            return reply
        return [n for x in reply for n in node_rows(x)]
    if isinstance(reply, dict):
        return [n for x in reply.values() for n in node_rows(x)]
    return []


def main():
    by = {}
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        for n in node_rows(row["nodes"]):
            off = n.get("clock_offset_ns")
            if off is None:
                continue
            key = (row["phase"], n["name"])
            by.setdefault(key, ([], []))
            by[key][0].append(off / 1e3)
            by[key][1].append((n.get("clock_uncertainty_ns") or 0) / 1e3)
    print("| phase | node | samples | offset p50 µs | |offset| p99 µs | max |offset| µs | uncertainty p50 µs |")
    print("|---|---|---|---|---|---|---|")
    for (phase, node), (offs, unc) in sorted(by.items()):
        absv = [abs(x) for x in offs]
        print(
            f"| {phase} | {node} | {len(offs)} | {statistics.median(offs):.1f} | "
            f"{pct(absv, 0.99):.1f} | {max(absv):.1f} | {statistics.median(unc):.1f} |"
        )


if __name__ == "__main__":
    main()
