# How late a sleep ends: `python3 sleep_overshoot.py CPU SLEEP_US COUNT`
# pinned to CPU, quantiles of (measured wall time - requested). Run it with
# the CPU otherwise idle (the vCPU halts while the sleeper sleeps) and with
# a SCHED_IDLE spinner on it (never halts; see blocking_cost_busy.sh).
import os, time, sys, statistics
os.sched_setaffinity(0, {int(sys.argv[1])})
d = float(sys.argv[2]) / 1e6
xs = []
for i in range(int(sys.argv[3])):
    t0 = time.perf_counter_ns(); time.sleep(d); xs.append(time.perf_counter_ns() - t0 - d * 1e9)
xs.sort(); n = len(xs)
q = lambda p: xs[min(n - 1, int(p * n))] / 1e3
print(f"cpu{sys.argv[1]} sleep {sys.argv[2]}us overshoot us: p1 {q(.01):.1f} p10 {q(.1):.1f} p25 {q(.25):.1f} p50 {q(.5):.1f} p75 {q(.75):.1f} p90 {q(.9):.1f} p99 {q(.99):.1f} mean {statistics.mean(xs)/1e3:.1f} sd {statistics.pstdev(xs)/1e3:.1f}")
