#!/usr/bin/env python3
"""1GS slice switches applied late on both nodes at once (docs/bench-rt.md, session 19), from
the bench's --timeline files, against the hypervisor's steal (/proc/stat sampled every 50 ms
during the invocation). A switch's lateness is its applied instant minus slice*Q minus the
median of that difference over the node's 20 neighbouring recorded switches (the grid; 1GS
keeps it). Usage: rt-1gs-late-switches.py TIMELINE_DIR STEAL_FILE (the file rt-steal-sampler.py writes)"""
import glob, json, os, statistics as st, sys

Q = 10_000_000
tldir, steal_file = sys.argv[1], sys.argv[2]
samples = []
for line in open(steal_file):
    ts, rest = line.split(' ', 1)
    c = {p.split()[0]: [int(x) for x in p.split()[1:]] for p in rest.strip().split('|')}
    samples.append((int(ts), c['cpu0'][7], c['cpu1'][7]))

def steal_in(t):
    """steal jiffies (cpu0, cpu1) in the 50 ms sample interval holding t"""
    for a, b in zip(samples, samples[1:]):
        if a[0] <= t < b[0]:
            return b[1] - a[1], b[2] - a[2]
    return None

tot_late = tot = 0
hit = [0, 0]
base = [0, 0]
for path in sorted(glob.glob(os.path.join(tldir, '1gs-*.json'))):
    nodes = json.load(open(path))
    lat = {}
    for n in nodes:
        sl = [s for s in n['slices'] if s.get('number')]
        offs = [s['ts_ns'] - s['number']['slice'] * Q for s in sl]
        for i, s in enumerate(sl):
            ref = st.median(offs[max(0, i - 10):i + 11])
            lat.setdefault((s['number']['epoch'], s['number']['slice']), {})[n['node']] = ((offs[i] - ref) / 1e6, s['ts_ns'])
    late = []
    for key, per in sorted(lat.items()):
        if len(per) < 2:
            continue
        tot += 1
        l = [v[0] for v in per.values()]
        planned = min(v[1] for v in per.values()) - min(l) * 1e6 - 5e6   # the broadcast's due instant (lead 5 ms)
        s = steal_in(planned + 2.5e6)
        if s:
            base[0] += s[0] > 0; base[1] += s[1] > 0
        if min(l) > 1.0:
            late.append((key[1], l, s))
            if s:
                hit[0] += s[0] > 0; hit[1] += s[1] > 0
    tot_late += len(late)
    print(os.path.basename(path), f"{len(lat)} switches, late on both nodes (> 1 ms): {len(late)}")
    for k, l, s in late:
        print(f"   slice {k}: late ms {', '.join(f'{x:.2f}' for x in l)}; steal jiffies in its 50 ms sample cpu0 {s[0] if s else '?'} cpu1 {s[1] if s else '?'}")
print(f"all: {tot_late} of {tot} switches late on both nodes; steal > 0 in the sample: cpu0 {hit[0]}, cpu1 {hit[1]} of them; "
      f"over all switches cpu0 {base[0]}, cpu1 {base[1]} of {tot} ({100*base[0]/max(tot,1):.0f} %, {100*base[1]/max(tot,1):.0f} %)")
