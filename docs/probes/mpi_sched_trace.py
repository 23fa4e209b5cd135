#!/usr/bin/env python3
"""Analyses an output directory of docs/probes/mpi_sched_trace.sh: per job,
how long each rank ran and how long both ran at once (co-run); message
latency (a rank's writev to its peer's next readv) split by whether the peer
was on CPU at the send; and every agent intervention on a rank's CPU (the
rank switched out to the agent and the next rank switched in), by what the
agent did (no sched_setattr: a bare policy tick; a setattr of the rank it
preempted, X; of the rank that ran next, Y) and what ran next (the same rank,
a rank the agent just boosted, or the other job's rank unboosted)."""
import bisect, collections, glob, json, re, statistics, sys

d = sys.argv[1]
jobs = {}
for f in sorted(glob.glob(d + '/job*.log')):
    for line in open(f):
        m = re.search(r'adopted ranks (\[.*\]) as job (\d+)', line)
        if m:
            jobs[int(m.group(2))] = [r[0] for r in json.loads(m.group(1))]
pid2job = {p: j for j, ps in jobs.items() for p in ps}
peer = {}
for ps in jobs.values():
    peer[ps[0]], peer[ps[1]] = ps[1], ps[0]
line_rx = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): ([a-z_]+)[:(]? ?(.*)$')
sw_rx = re.compile(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=(\d+) prev_state=(\S+) ==> '
                   r'next_comm=(.*) next_pid=(\d+) next_prio=(\d+)')
events = []
for line in open(d + '/trace.txt'):
    if not line.startswith('#') and (m := line_rx.match(line)):
        comm, pid, cpu, t, name, rest = m.groups()
        events.append((float(t), int(cpu), int(pid), name, rest))
events.sort()
t0, t1 = events[0][0], events[-1][0]
running, ran = {}, collections.Counter()
corun = collections.Counter()
sends, recvs = [], collections.defaultdict(list)
agent_on = {}
interventions = collections.Counter()
last = t0
for t, cpu, pid, name, rest in events:
    for p in pid2job:
        if running.get(p):
            ran[p] += t - last
    for j, ps in jobs.items():
        if all(running.get(p) for p in ps):
            corun[j] += t - last
    last = t
    if name == 'sched_switch':
        pcomm, pp, _, _, ncomm, np_, nprio = sw_rx.search(rest).groups()
        pp, np_ = int(pp), int(np_)
        running[pp] = False
        if np_ in pid2job:
            running[np_] = True
        if pp in pid2job and ncomm.startswith('cosched-agent'):
            agent_on[cpu] = (pp, [])
        elif pcomm.startswith('cosched-agent') and cpu in agent_on:
            x, sets = agent_on.pop(cpu)
            if np_ not in pid2job:
                continue
            did = 'tick (no setattr)' if not sets else 'setattr ' + ','.join(
                sorted({'X' if s == x else 'Y' if s == np_ else 'other' for s in sets}))
            nxt = 'same rank' if np_ == x else 'Y boosted' if int(nprio) < 100 else 'other job, unboosted'
            interventions[(did, nxt)] += 1
    elif name == 'sys_sched_setattr' and cpu in agent_on:
        agent_on[cpu][1].append(int(re.search(r'pid: 0x([0-9a-f]+)', rest).group(1), 16))
    elif name == 'sys_writev' and pid in pid2job:
        sends.append((t, pid, bool(running.get(peer[pid]))))
    elif name == 'sys_readv' and pid in pid2job:
        recvs[pid].append(t)
span = t1 - t0
print(f'traced {span * 1e3:.0f} ms')
for j, ps in jobs.items():
    n = sum(1 for _, p, _ in sends if pid2job[p] == j)
    print(f'job {j}: ran ' + ' '.join(f'{ran[p] / span:.0%}' for p in ps)
          + f', co-run {corun[j] / span:.0%}, sends {n}')
for on in (True, False):
    lat = sorted((recvs[peer[p]][i] - t) * 1e6 for t, p, o in sends if o == on
                 for i in [bisect.bisect_left(recvs[peer[p]], t)] if i < len(recvs[peer[p]]))
    if lat:
        print(f'send -> peer readv, peer {"on" if on else "off"} CPU: n={len(lat)} '
              f'p50={lat[len(lat) // 2]:.0f} us mean={statistics.mean(lat):.0f} us '
              f'total={sum(lat) / 1e3:.0f} ms')
print('agent interventions on a rank\'s CPU (what the agent did, what ran next):')
for (did, nxt), n in sorted(interventions.items(), key=lambda kv: -kv[1]):
    print(f'  {n:5d}  {did:24s} -> {nxt}')
# Boosts: from a setattr after which the rank next runs at a real-time
# priority (prio < 100) to the rank's next setattr; did the rank answer (send)
# before its boost ended, or only receive?
seq = collections.defaultdict(list)
runs = collections.defaultdict(list)
for t, cpu, pid, name, rest in events:
    if name == 'sys_sched_setattr':
        p = int(re.search(r'pid: 0x([0-9a-f]+)', rest).group(1), 16)
        if p in pid2job:
            seq[p].append((t, 'set'))
    elif name == 'sys_writev' and pid in pid2job:
        seq[pid].append((t, 'send'))
    elif name == 'sys_readv' and pid in pid2job:
        seq[pid].append((t, 'recv'))
    elif name == 'sched_switch':
        _, _, _, _, _, np_, nprio = sw_rx.search(rest).groups()
        if int(np_) in pid2job:
            runs[int(np_)].append((t, int(nprio)))
boosts, recv_to_end = collections.Counter(), []
for p, s in seq.items():
    sets = [i for i, (_, k) in enumerate(s) if k == 'set']
    starts = [t for t, _ in runs[p]]
    for a, b in zip(sets, sets[1:]):
        i = bisect.bisect_right(starts, s[a][0])
        if i < len(starts) and starts[i] < s[b][0] and runs[p][i][1] < 100:
            between = [(t, k) for t, k in s[a + 1:b]]
            if any(k == 'send' for _, k in between):
                boosts['answered (sent) while boosted'] += 1
            elif any(k == 'recv' for _, k in between):
                boosts['boost ended after its receive, before its answer'] += 1
                recv_to_end.append((s[b][0] - next(t for t, k in between if k == 'recv')) * 1e6)
            else:
                boosts['neither received nor sent'] += 1
if boosts:
    print('boosts (rank ran at a real-time priority until its next setattr):')
    for k, n in boosts.most_common():
        print(f'  {n:5d}  {k}')
    if recv_to_end:
        recv_to_end.sort()
        print(f'  receive -> boost end: p50 {recv_to_end[len(recv_to_end) // 2]:.0f} us')
