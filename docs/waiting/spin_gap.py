#!/usr/bin/env python3
"""Spin episodes per message wait of a real MPI job, as the cosched agent
sees them, for several spin gaps: too small a gap splits a wait loop.

Run as root from a directory holding the ping-pong built both ways:
  mpicc.openmpi -O2 -o pp_ompi pingpong.c; mpicc.mpich -O2 -o pp_mpich pingpong.c
  python3 spin_gap.py <cosched-agent> ompi|mpich 2,10,50,200
OpenMPI runs its TCP transport (poll loop), MPICH runs UCX over TCP
(epoll_wait loop); rank r is pinned to CPU r. See docs/waiting.md."""
import json, os, socket, subprocess, sys, time, signal
AGENT = sys.argv[1]; MPI = sys.argv[2]; GAPS = [int(g) for g in sys.argv[3].split(',')]
ITERS = int(os.environ.get('ITERS', '100'))
def call(sock, req):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); s.sendall((json.dumps(req)+'\n').encode())
    buf=b''
    while not buf.endswith(b'\n'): buf+=s.recv(1<<20)
    return json.loads(buf)
for gap in GAPS:
    d=f'{os.environ.get("WORKDIR", "/tmp/cosched-gap")}/g{gap}'; os.makedirs(d, exist_ok=True)
    open(f'{d}/a.toml','w').write(f'node="m"\nmetrics_listen="127.0.0.1:19465"\ncontrol_socket="{d}/s.sock"\nstate_dir="{d}/st"\npin_self=false\n[detect]\nspin_gap_us={gap}\n')
    ag=subprocess.Popen([AGENT,'--config',f'{d}/a.toml'],stderr=subprocess.DEVNULL,stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
    if MPI=='ompi':
        cmd=['mpirun.openmpi','--allow-run-as-root','-np','2','--mca','btl','tcp,self','--bind-to','none','--mca','rtc','^hwloc','sh','-c','exec taskset -c $OMPI_COMM_WORLD_RANK ' + os.path.abspath('pp_ompi') + ' %d 0.02'%ITERS]
    else:
        env['UCX_TLS']='tcp,self'; env['MPIR_CVAR_NOLOCAL']='1'
        cmd=['mpirun.mpich','-np','2','sh','-c','exec taskset -c $PMI_RANK ' + os.path.abspath('pp_mpich') + ' %d 0.02'%ITERS]
    job=subprocess.Popen(cmd,env=env,stderr=subprocess.DEVNULL,stdout=subprocess.DEVNULL)
    name='pp_ompi' if MPI=='ompi' else 'pp_mpich'
    pids=[]
    for _ in range(200):
        out=subprocess.run(['pgrep','-x',name],capture_output=True,text=True).stdout.split()
        if len(out)==2: pids=[int(p) for p in out]; break
        time.sleep(0.02)
    r=call(f'{d}/s.sock',{'op':'adopt','job_id':1,'name':'mpi','pids':pids})
    job.wait()
    time.sleep(0.5)
    jobs=call(f'{d}/s.sock',{'op':'jobs'})
    st=jobs['ok']['jobs']['jobs'][0]['stats'] if 'jobs' in jobs['ok'].get('jobs',{}) else jobs['ok']['jobs'][0]['stats']
    ag.send_signal(signal.SIGTERM); ag.wait()
    waits=st['empty_receives']+st['empty_polls']+st['yields']
    print(f"{MPI} gap={gap}us receives={st['receives']} empty_polls={st['empty_polls']} yields={st['yields']} episodes={st['spin_episodes']} episodes/receive={st['spin_episodes']/max(1,st['receives']):.2f} spin_s={st['spin_seconds']:.3f} cpu_s={st['cpu_seconds']:.3f} ns/wait={st['spin_seconds']*1e9/max(1,waits):.0f}", flush=True)
