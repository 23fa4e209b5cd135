#!/usr/bin/env python3
"""Analyses docs/probes/mpi_gang_trace.sh's OUTDIR: per node and slice of a
job (from the agent's SIGCONT of its rank to its next SIGSTOP), how long
until the rank ran, first sent and first received; the two nodes' skew at
the same slice start; the rank's sends per slice; and where the node's CPU
went inside the slices (the job's rank thread, its other threads, the
other job, the job's own daemon, the agent, anything else, idle)."""
import collections
import re
import statistics
import sys

out = sys.argv[1]
tasks = {}  # tid -> (job, node, pid, comm)
for line in open(f"{out}/tasks.txt"):
    f = line.split()
    if len(f) >= 5:
        tasks[int(f[3])] = (f[0], int(f[1][1:]), int(f[2]), " ".join(f[4:]))
agents = set()
try:
    for line in open(f"{out}/agents.txt"):
        f = line.split()
        agents.add(int(f[2]))
except FileNotFoundError:
    pass
# The rank of each (job, node): the process whose main thread sends most;
# found below from the trace (the daemon, orted or hydra's proxy, sends
# nothing in the timed part).
pids = collections.defaultdict(set)
for tid, (job, node, pid, comm) in tasks.items():
    pids[(job, node)].add(pid)

HEAD = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):?\s*(.*)$")
SW = re.compile(r"prev_pid=(\d+).*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)")
SIG = re.compile(r"sig=(\d+) .*pid=(\d+)")
RET = re.compile(r"-> (0x[0-9a-f]+|-?\d+)")

events = []
for line in open(f"{out}/trace.txt"):
    m = HEAD.match(line)
    if not m:
        continue
    comm, tid, cpu, ts, ev, rest = m.groups()
    events.append((float(ts), int(cpu), int(tid), ev, rest))
events.sort()
t_begin, t_end = events[0][0], events[-1][0]

sends = collections.defaultdict(list)  # tid -> times
recvs = collections.defaultdict(list)
conts = collections.defaultdict(list)  # (job, node) -> times
stops = collections.defaultdict(list)
switches = collections.defaultdict(list)  # cpu -> (t, prev, next)
for ts, cpu, tid, ev, rest in events:
    if ev == "sched_switch":
        m = SW.search(rest)
        if m:
            switches[cpu].append((ts, int(m.group(1)), int(m.group(3))))
    elif ev == "signal_generate":
        m = SIG.search(rest)
        if m and int(m.group(2)) in tasks:
            job, node, _, _ = tasks[int(m.group(2))]
            sig = int(m.group(1))
            if sig == 18:
                conts[(job, node)].append(ts)
            elif sig == 19:
                stops[(job, node)].append(ts)
    elif ev.startswith("sys_") and rest.startswith("("):
        sends[tid].append(ts)
    elif ev.startswith("sys_") and rest.startswith("->"):
        m = RET.search(rest)
        if m and int(m.group(1), 0) > 0:
            recvs[tid].append(ts)

rank = {}
for key, ps in pids.items():
    best = max(ps, key=lambda p: len(sends.get(p, ())))
    rank[key] = best


def group(times, gap=0.002):
    """Signals to one process's threads close together: one switch."""
    out = []
    for t in times:
        if not out or t - out[-1][-1] > gap:
            out.append([t])
        else:
            out[-1].append(t)
    return [g[0] for g in out]


def first_after(times, t, until):
    for x in times:
        if x >= t:
            return x if x < until else None
    return None


def q(xs):
    if not xs:
        return "n/a"
    xs = sorted(xs)
    return f"med {statistics.median(xs)*1e3:.3f} ms, p90 {xs[int(0.9*(len(xs)-1))]*1e3:.3f}, max {xs[-1]*1e3:.3f} (n={len(xs)})"


print(f"trace {out}: {t_end - t_begin:.3f} s")
starts = {}
for (job, node), ts in sorted(conts.items()):
    starts[(job, node)] = group(ts)
jobs = sorted({j for j, _ in pids})
for job in jobs:
    for node in (0, 1):
        r = rank.get((job, node))
        if r is None:
            continue
        s = starts.get((job, node), [])
        ends = group(stops.get((job, node), []))
        to_run, to_send, to_recv, per_slice, slice_len = [], [], [], [], []
        for t in s:
            until = min([e for e in ends if e > t] or [t_end])
            if until >= t_end:
                continue
            runs = [x[0] for x in switches[node] if x[2] == r]
            a = first_after(runs, t, until)
            b = first_after(sends[r], t, until)
            c = first_after(recvs[r], t, until)
            if a is not None:
                to_run.append(a - t)
            if b is not None:
                to_send.append(b - t)
            if c is not None:
                to_recv.append(c - t)
            per_slice.append(sum(1 for x in sends[r] if t <= x < until))
            slice_len.append(until - t)
        print(f"{job} n{node} rank {r}: {len(s)} slice starts")
        print(f"   SIGCONT -> rank on CPU : {q(to_run)}")
        print(f"   SIGCONT -> first send  : {q(to_send)}")
        print(f"   SIGCONT -> first recv  : {q(to_recv)}")
        print(f"   slice length (CONT->STOP): {q(slice_len)}")
        if per_slice:
            print(f"   sends per slice: median {statistics.median(per_slice)}")
# Skew: the same job's slice start on n0 and n1.
for job in jobs:
    a, b = starts.get((job, 0), []), starts.get((job, 1), [])
    skew = []
    for t in a:
        near = min(b, key=lambda x: abs(x - t), default=None)
        if near is not None and abs(near - t) < 0.004:
            skew.append(near - t)
    print(f"{job}: slice start n1 - n0: {q([abs(x) for x in skew])}; signed median "
          f"{statistics.median(skew)*1e6 if skew else float('nan'):.0f} us")

# Where each CPU's time went, attributed by the slice it fell in.
def who(tid, node, slice_job):
    if tid == 0:
        return "idle"
    if tid in agents:
        return "agent"
    t = tasks.get(tid)
    if t is None:
        return "other"
    job, tnode, pid, comm = t
    if job != slice_job:
        return "other job"
    if tid == rank.get((job, tnode)):
        return "rank main thread"
    if pid == rank.get((job, tnode)):
        return "rank's other threads"
    return "job's daemon"

for node in (0, 1):
    sl = []
    for job in jobs:
        for t in starts.get((job, node), []):
            sl.append((t, job))
    sl.sort()
    use = collections.Counter()
    for (t0, job), nxt in zip(sl, sl[1:] + [(t_end, None)]):
        if nxt[1] is None:
            break
        t1 = nxt[0]
        sw = switches[node]
        cur = None
        last = t0
        for ts, prev, nxt_tid in sw:
            if ts < t0:
                cur = nxt_tid
                continue
            if ts >= t1:
                break
            if cur is not None:
                use[who(cur, node, job)] += ts - last
            cur, last = nxt_tid, ts
        if cur is not None:
            use[who(cur, node, job)] += t1 - last
    total = sum(use.values())
    if total:
        print(f"n{node} CPU inside slices: " + ", ".join(
            f"{k} {v/total*100:.1f}%" for k, v in use.most_common()))


# Steady state (the trace without MARGIN s at either end, where jobs start
# and end), per node: each task kind's share of the CPU, how often it got
# the CPU and for how long each time. "rank main" is what the job needs;
# with a ping-pong, time taken from it on either node stalls both ranks.
margin = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
lo, hi = t_begin + margin, t_end - margin
names = {}
for ts, cpu, tid, ev, rest in events:
    if ev == "sched_switch":
        m = re.search(r"next_comm=(.*?) next_pid=(\d+)", rest)
        if m:
            names[int(m.group(2))] = m.group(1)
mains = set(rank.values())


def kind(tid):
    if tid == 0:
        return "idle"
    if tid in agents:
        return "agent:" + names.get(tid, "?")
    t = tasks.get(tid)
    if t is None:
        return "other:" + names.get(tid, "?")
    if tid in mains:
        return "rank main"
    if t[2] in mains:
        return "rank's other threads"
    return "daemon:" + t[3]


for node in (0, 1):
    use, cnt = collections.Counter(), collections.Counter()
    sw = switches[node]
    for (t0, _, nxt), (t1, _, _) in zip(sw, sw[1:]):
        a, b = max(t0, lo), min(t1, hi)
        if b > a:
            use[kind(nxt)] += b - a
            cnt[kind(nxt)] += 1
    tot = sum(use.values())
    if tot:
        print(f"n{node} steady state ({tot:.3f} s): " + ", ".join(
            f"{k} {v/tot*100:.2f}% ({cnt[k]/tot:.0f}/s x {v/cnt[k]*1e6:.0f} us)"
            for k, v in use.most_common(9)))
