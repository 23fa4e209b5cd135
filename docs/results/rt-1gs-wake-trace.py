#!/usr/bin/env python3
"""Where a pipeline hand-over waits (docs/bench-rt.md, session 17): reads an
ftrace text dump taken around one bench rt cell with the events
sched/sched_switch, sched/sched_waking, sched/sched_wakeup and
irq/softirq_{raise,entry,exit} enabled (as root, in /sys/kernel/tracing:
buffer_size_kb 65536, enable those events, tracing_on 1, run the bench, then
copy `trace`). Prints: the NET_RX softirq's raise -> entry delay (is the
loopback receive deferred?), and for wake-ups sent from one CPU to another
(sched_waking on the waker's CPU, sched_wakeup when the target CPU enqueues
the task) the delay between the two, for cosched-synth wakers and others,
with the task that was running on the target CPU when it finally enqueued.
Usage: wake-trace.py TRACE_TXT"""
import re, sys
pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+): (\w+): (.*)$')
wake = re.compile(r'comm=(\S+) pid=(\d+) prio=(\d+) target_cpu=(\d+)')
netrx_raised, netrx = {}, []
pending, cross = {}, {'cosched-synth': [], 'other': []}
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m:
        continue
    comm, _pid, cpu, _flags, ts, ev, rest = m.groups()
    cpu, ts = int(cpu), float(ts)
    if ev == 'softirq_raise' and 'NET_RX' in rest:
        netrx_raised.setdefault(cpu, ts)
    elif ev == 'softirq_entry' and 'NET_RX' in rest and cpu in netrx_raised:
        netrx.append((ts - netrx_raised.pop(cpu)) * 1e3)
    elif ev in ('sched_waking', 'sched_wakeup'):
        w = wake.search(rest)
        if not w:
            continue
        pid = int(w.group(2))
        if ev == 'sched_waking' and int(w.group(4)) != cpu:
            pending[pid] = (ts, 'cosched-synth' if comm == 'cosched-synth' else 'other')
        elif ev == 'sched_wakeup' and pid in pending:
            t0, kind = pending.pop(pid)
            cross[kind].append(((ts - t0) * 1e3, comm))
def summary(v):
    v = sorted(v)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
    return f"n {len(v)} p50 {q(.5):.3f} p99 {q(.99):.3f} max {v[-1]:.3f} ms, > 1 ms: {sum(x > 1 for x in v)}"
print('NET_RX raise -> entry:', summary(netrx))
for kind, a in cross.items():
    if a:
        print(f'cross-CPU waking -> wakeup, waker {kind}:', summary([x for x, _ in a]),
              '; enqueued (> 1 ms) while running:', sorted({c for x, c in a if x > 1}))
