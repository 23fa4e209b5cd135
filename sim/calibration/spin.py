import os, time, sys
cpu=int(sys.argv[1]); dur=float(sys.argv[2])
os.sched_setaffinity(0,{cpu})
def rd():
    s=open('/proc/self/schedstat').read().split()
    st=dict(l.split(':') for l in open('/proc/self/status') if 'ctxt' in l)
    return int(s[0]),int(s[1]),int(s[2]),int(st['nonvoluntary_ctxt_switches'].strip()),int(st['voluntary_ctxt_switches'].strip())
a=rd(); t0=time.time()
while time.time()-t0<dur: pass
b=rd(); w=time.time()-t0
d=[y-x for x,y in zip(a,b)]
print(f"cpu{cpu} wall {w:.2f}s run {d[0]/1e9:.3f}s wait {d[1]/1e6:.2f}ms slices {d[2]} nvcsw {d[3]} vcsw {d[4]} -> preempt/s {d[3]/w:.1f} lost {100*(1-d[0]/1e9/w):.2f}% mean-steal-us {(w*1e9-d[0])/max(d[3],1)/1e3:.1f}")
