"""Table of the session-20 paired-gang-ahead A/B from bench mpi JSON reports."""
import json, sys
def load(p):
    return {(r['lib'], r['workload'], r['mpl'], r['column'].split('@')[0]): r for r in json.load(open(p))}
pooled = load(sys.argv[1]); runs = [load(p) for p in sys.argv[2:]]
cols = ['local', 'yield', 'gang', 'paired-gang', 'paired-gang-ahead']
def f(r): return '-' if r is None or r['status'] != 'ok' else f"{r['slowdown']:.2f}"
print('| lib | workload | plain | yield | gang | paired-gang (runs; pooled) | paired-gang-ahead (runs; pooled) | ahead ÷ paired | gang ÷ yield | gang ÷ plain | skew p99 µs paired / ahead | agent % paired / ahead |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|')
worst = []
for (lib, w, mpl, c), r in pooled.items():
    if c != 'local': continue
    g = lambda col: pooled.get((lib, w, mpl, col))
    s = lambda col: g(col)['slowdown'] if g(col) and g(col)['status'] == 'ok' else float('nan')
    pr = lambda col: ' / '.join(f(x.get((lib, w, mpl, col))) for x in runs)
    ratio = s('paired-gang-ahead') / s('paired-gang')
    worst.append((ratio, lib, w))
    gy = s('gang') / s('yield') if g('yield') and g('yield')['status'] == 'ok' else float('nan')
    gy_s = '-' if gy != gy else f'{gy:.2f}'
    sk = lambda col: f"{g(col)['skew_p99_us']:.0f}" if g(col)['skew_p99_us'] is not None else '-'
    mark = '**' if ratio > 1.05 else ''
    print(f"| {lib} | {w} | {f(g('local'))} | {f(g('yield'))} | {f(g('gang'))} | {pr('paired-gang')}; {f(g('paired-gang'))} | {pr('paired-gang-ahead')}; {f(g('paired-gang-ahead'))} | {mark}{ratio:.2f}{mark} | {gy_s} | {s('gang')/s('local'):.2f} | {sk('paired-gang')} / {sk('paired-gang-ahead')} | {g('paired-gang')['agent_cpu_percent']:.1f} / {g('paired-gang-ahead')['agent_cpu_percent']:.1f} |")
import math
print('\ngeomean ahead/paired', math.exp(sum(math.log(r) for r,_,_ in worst)/len(worst)), 'max', max(worst))
