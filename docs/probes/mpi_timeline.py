"""What both analyses of docs/probes/mpi_timeline_probe.sh's output share:
the recording, each job's rank per node (the task of the job switched in
most), that rank's runs on the CPU, percentiles, and the co-run share (the
time both ranks of a job were on CPU at once)."""
import collections, json


def pct(xs, p):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def load(outdir):
    """The nodes' recordings and the span all of them cover (t0, t1)."""
    d = json.load(open(outdir + '/timeline.json'))
    return d, max(n['start_ns'] for n in d), min(n['end_ns'] for n in d)


def sorted_switches(node):
    return sorted(node['switches'], key=lambda s: s['ts_ns'])


def ranks(sw):
    """Job -> its rank's tid on this node: the task of the job switched in most."""
    cnt = collections.Counter((s['next_tid'], s['next_job']) for s in sw if s['next_job'])
    ranks = {}
    for (tid, job), _ in cnt.most_common():
        ranks.setdefault(job, tid)
    return ranks


def runs(sw, tid):
    """The task's switch-in instants and its runs (switch-in, switch-out)."""
    ins = [s['ts_ns'] for s in sw if s['next_tid'] == tid]
    outs = [s['ts_ns'] for s in sw if s['prev_tid'] == tid]
    out = []
    for t in ins:
        o = next((u for u in outs if u > t), None)
        if o:
            out.append((t, o))
    return ins, out


def overlap(a, b, t0, t1):
    i = j = tot = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0], t0), min(a[i][1], b[j][1], t1)
        tot += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def print_co_runs(runs_of, nodes, t0, t1):
    """Per job on two nodes: the share of the recording both ranks ran at once."""
    for job in sorted({j for _, j in runs_of}):
        if len(nodes) == 2 and all((nd, job) in runs_of for nd in nodes):
            co = overlap(runs_of[(nodes[0], job)], runs_of[(nodes[1], job)], t0, t1) / (t1 - t0)
            print(f"job {job}: co-run {co:.2f} of the recording")
