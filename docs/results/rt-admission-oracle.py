#!/usr/bin/env python3
"""How few RT jobs could any admission rule reject on bench rt's 9:1 cells
(docs/bench-rt.md, "Admission: what any rule could reach")? A simulation of
the bench's arrival process: Poisson arrivals over 6 s at 2.5 and 4 jobs/s,
90 % RT; an RT job has one process on each of the 2 nodes, declares
tau = 2 ms every d = 10 ms and really does tau ~ U[1, 2] ms, for ~1.6 s.

- deterministic: every job charged its declared 20 % of a CPU, against the
  RT share 2/3 (the paper's rule: 3 jobs at a time);
- oracle@C: every job charged its true tau/d (known in advance, no margin)
  against a capacity C. C = 2/3 is the best any rule that keeps RT within
  its x/(x+y) share can do; above 2/3 the rule spends BE's share.

Usage: rt-admission-oracle.py [STREAMS]  (default 500)"""
import random
import sys

WINDOW_S, RT_FRACTION, RUN_S, D_MS, DECLARED_MS = 6.0, 0.9, 1.6, 10.0, 2.0


def stream(rate, seed):
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t > WINDOW_S:
            return out
        if rng.random() < RT_FRACTION:
            out.append((t, rng.uniform(1.0, 2.0)))


def rejections(rate, seed, capacity, known):
    running, rejected = [], 0
    charge = (lambda tau: tau) if known else (lambda tau: DECLARED_MS)
    for t, tau in stream(rate, seed):
        running = [(end, w) for end, w in running if end > t]
        if (sum(charge(w) for _, w in running) + charge(tau)) / D_MS <= capacity + 1e-12:
            running.append((t + RUN_S, tau))
        else:
            rejected += 1
    return rejected


def main():
    streams = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    share = 2 / 3
    total = {}
    for rate in (2.5, 4.0):
        arrivals = sum(len(stream(rate, s)) for s in range(streams)) / streams
        det = sum(rejections(rate, s, share, False) for s in range(streams)) / streams
        total.setdefault("det", 0.0)
        total["det"] += det
        line = [f"{rate} jobs/s: {arrivals:.1f} RT arrivals, deterministic rejects {det:.2f}"]
        for capacity in (share, 0.75, 0.8, 0.867, 1.0):
            o = sum(rejections(rate, s, capacity, True) for s in range(streams)) / streams
            total[capacity] = total.get(capacity, 0.0) + o
            line.append(f"oracle@{capacity:.3f} {o:.2f}")
        print("; ".join(line))
    print("both rates: deterministic %.2f; " % total["det"] + "; ".join(
        f"oracle@{c:.3f} {v:.2f} ({v / total['det']:.0%})"
        for c, v in total.items() if c != "det"))


if __name__ == "__main__":
    main()
