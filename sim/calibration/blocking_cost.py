# CPU cost of a blocking UDP receive + its wakeup, across the two CPUs:
# (a) two processes on CPU 0 and 1 ping-pong with blocking recvfrom;
# (b) one process sends to itself and reads the queued datagram (same
#     syscalls, never blocks). Per-iteration CPU time (schedstat), a - b.
# BLOCKING_N sets the iterations (default 20000); BLOCKING_POLICY=batch runs
# both as SCHED_BATCH, whose wakeups never preempt (blocking_cost_nopreempt.sh).
import os, socket, sys, time
N = int(os.environ.get('BLOCKING_N', '20000'))
if os.environ.get('BLOCKING_POLICY') == 'batch':
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
def cpu_ns():
    return int(open('/proc/self/schedstat').read().split()[0])
def pingpong(cpu, me, peer, first):
    os.sched_setaffinity(0, {cpu})
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', me))
    time.sleep(0.2)
    c0 = cpu_ns(); t0 = time.time()
    for i in range(N):
        if first: s.sendto(b'x'*64, ('127.0.0.1', peer)); s.recvfrom(100)
        else: s.recvfrom(100); s.sendto(b'x'*64, ('127.0.0.1', peer))
    c1 = cpu_ns(); w = time.time() - t0
    print(f"blocking cpu{cpu}: {(c1-c0)/N/1e3:.2f} us CPU/iter, {w/N*1e6:.1f} us wall/iter", flush=True)
def selfsend():
    os.sched_setaffinity(0, {1})
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 47003))
    c0 = cpu_ns()
    for i in range(N):
        s.sendto(b'x'*64, ('127.0.0.1', 47003)); s.recvfrom(100)
    print(f"no block: {(cpu_ns()-c0)/N/1e3:.2f} us CPU/iter", flush=True)
if os.fork() == 0:
    pingpong(1, 47002, 47001, False); os._exit(0)
pingpong(0, 47001, 47002, True); os.wait()
selfsend()
