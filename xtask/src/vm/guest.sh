#!/bin/busybox sh
# /init of the `cargo xtask vm-test` guests (busybox ash). One initramfs for
# all three VMs; the kernel command line says which one this is:
#   cosched.role=coordinator|agent cosched.name=n1 cosched.ip=10.77.0.11
#   cosched.coord=10.77.0.10
# Everything the host reads is a line starting with "VMTEST " on the serial
# console:
#   VMTEST KERNEL <release>          VMTEST TP <category/event> yes|no
#   VMTEST FEATURE <name> <value>    VMTEST CHECK <name> PASS|FAIL <detail>
#   VMTEST DATA <name> <text>        VMTEST LOG <agent or coordinator log line>
#   VMTEST DONE (agent VMs, after phase 2 started) / VMTEST END (coordinator)
# The host decides the gang checks from the DATA lines; the others are
# decided here, where the processes are.
/bin/busybox mkdir -p /proc /sys /dev /run /tmp /usr/bin /sbin
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /sys/kernel/tracing /sys/fs/bpf /sys/fs/cgroup /var/lib/cosched /run/cosched
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null

arg() { sed -n "s/.*cosched\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
ROLE=$(arg role)
NAME=$(arg name)
IP=$(arg ip)
COORD=$(arg coord)

say() { echo "VMTEST $*"; }
check() { say CHECK "$@"; }
finish() { say "$1"; sync; poweroff -f; }

# --- what this kernel has -------------------------------------------------
say KERNEL "$(uname -r)"
for tp in sched/sched_switch sched/sched_process_fork sched/sched_process_exit \
    sock/sock_recv_length sock/sock_send_length sock/sk_data_ready sock/inet_sock_set_state \
    syscalls/sys_enter_poll syscalls/sys_enter_ppoll syscalls/sys_enter_select \
    syscalls/sys_enter_pselect6 syscalls/sys_enter_epoll_wait syscalls/sys_enter_epoll_pwait \
    syscalls/sys_enter_sched_yield; do
    if [ -d "/sys/kernel/tracing/events/$tp" ]; then say TP "$tp" yes; else say TP "$tp" no; fi
done
if [ -e /sys/kernel/btf/vmlinux ]; then say FEATURE btf yes; else say FEATURE btf no; fi
if [ -d /sys/kernel/sched_ext ]; then
    say FEATURE sched_ext "$(cat /sys/kernel/sched_ext/state 2>/dev/null || echo present)"
else
    say FEATURE sched_ext no
fi
say FEATURE cpus "$(nproc)"

# --- network: virtio modules (built in on newer kernels), the address -----
for m in virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci \
    failover net_failover virtio_net; do
    for f in /lib/modules/$m.ko /lib/modules/$m.ko.xz; do
        [ -e "$f" ] || continue
        case $f in
        *.xz) unxz -c "$f" >/tmp/$m.ko && insmod /tmp/$m.ko 2>/dev/null ;;
        *) insmod "$f" 2>/dev/null ;;
        esac
    done
done
i=0
while ! ip link show eth0 >/dev/null 2>&1 && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
ip link set lo up
ip link set eth0 up
ip addr add "$IP/24" dev eth0
if ip link show eth0 >/dev/null 2>&1; then
    check network PASS "eth0 $IP"
else
    check network FAIL "no eth0 (virtio_net did not load)"
fi

# --- helpers ----------------------------------------------------------------
# Waits up to $1 tenths of a second for command "$2..." to succeed.
wait_for() {
    n=$1; shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        usleep 100000
        n=$((n - 1))
    done
    return 1
}
# A process that exists and is not a zombie (PID 1, this script, reaps late).
alive() { [ -e "/proc/$1/stat" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
metrics() { wget -qO- "http://127.0.0.1:$1/metrics" 2>/dev/null; }
# Sum of a metric's samples whose line contains every further word.
metric() {
    name=$1; port=$2; shift 2
    metrics "$port" | grep "^$name" | {
        while read -r line; do
            keep=1
            for w in "$@"; do case $line in *"$w"*) ;; *) keep=0 ;; esac; done
            [ $keep = 1 ] && echo "$line"
        done
    } | awk '{s += $NF} END {printf "%d\n", s}'
}
# The log's last lines, for the host's report.
log_tail() { tail -n "${2:-15}" "$1" | while read -r line; do say LOG "$line"; done; }
# Children of a process.
children() {
    for d in /proc/[0-9]*; do
        read -r l 2>/dev/null <"$d/stat" || continue
        set -- $l
        [ "$4" = "$PARENT" ] && echo "$1"
    done
}
threads_of() { for p in "$@"; do ls "/proc/$p/task" 2>/dev/null; done; }
# "policy rt_priority nice" of a thread (fields 41, 40, 19 of its stat).
sched_of() {
    read -r l 2>/dev/null <"/proc/$1/stat" || return 1
    set -- $l
    echo "${41} ${40} ${19}"
}
# A two-rank cosched-synth job on this VM (UDP over loopback) of $3 seconds
# (default 600): prints the pid of the shell that holds both ranks.
start_job() {
    name=$1; port=$2; secs=${3:-600}
    peers="127.0.0.1:$port,127.0.0.1:$((port + 1))"
    taskset -c 0 sh -c "cosched-synth --job $name --rank 0 --size 2 --peers $peers --recv spin --compute-us 20 --duration $secs >/tmp/$name.0 2>&1 &
           cosched-synth --job $name --rank 1 --size 2 --peers $peers --recv spin --compute-us 20 --duration $secs >/tmp/$name.1 2>&1 &
           wait" >/dev/null 2>&1 &
    echo $!
}
# watch PRIO SECONDS TIDS...: looks at the threads from CPU 1 at SCHED_FIFO 80
# (above the agent's 50 and every boost; the node, agent and jobs, is CPU 0)
# until one runs at SCHED_FIFO (at rt priority PRIO unless PRIO is "any");
# prints "TID PRIO" of it, or nothing after SECONDS. With KILL=PID set, it
# SIGKILLs that process the moment it sees the boost (or at the end).
cat >/tmp/watch.sh <<'WATCH'
prio=$1; secs=$2; shift 2
tids="$*"
read -r up _ </proc/uptime
end=$((${up%.*} + secs))
i=0
while :; do
    for t in $tids; do
        read -r l 2>/dev/null </proc/$t/stat || continue
        set -- $l
        if [ "${41}" = 1 ] && { [ "$prio" = any ] || [ "${40}" = "$prio" ]; }; then
            [ -n "$KILL" ] && kill -9 "$KILL"
            echo "$t ${40}"
            exit 0
        fi
    done
    i=$((i + 1))
    if [ $((i % 50)) = 0 ]; then
        read -r up _ </proc/uptime
        [ "${up%.*}" -ge $end ] && break
    fi
done
[ -n "$KILL" ] && kill -9 "$KILL"
exit 1
WATCH
watch() { taskset -c 1 chrt -f 80 env KILL="$KILL" sh /tmp/watch.sh "$@"; }

agent_config() {
    cat <<EOF
node = "$NAME"
cpus = [0]
policy = "$1"
metrics_listen = "0.0.0.0:9464"
control_socket = "/run/cosched/agent.sock"
state_dir = "/var/lib/cosched"

[detect]
# A wait lasts until the task has been on CPU this long since its last empty
# wait: TCG runs the receive loop ~20x slower than hardware (default 200).
spin_gap_us = 5000

[dcs]
boost_prio = $2
EOF
    if [ -n "$3" ]; then
        cat <<EOF

[coordinator]
address = "$COORD:7400"
secret_file = "/etc/cosched/secret"
heartbeat_interval_ms = 500
heartbeat_timeout_ms = 5000
reconnect_min_ms = 50
reconnect_max_ms = 500
stop_inactive = true
EOF
    fi
}

# Starts the agent; AGENT = its pid. Fails (with the log) if it exits or has
# no control socket within 60 s.
start_agent() {
    rm -f /run/cosched/agent.sock
    cosched-agent --config /etc/cosched/agent.toml >/tmp/agent.log 2>&1 &
    AGENT=$!
    wait_for 600 sh -c "[ -S /run/cosched/agent.sock ] || [ ! -e /proc/$AGENT ] || grep -q ') Z ' /proc/$AGENT/stat"
    [ -S /run/cosched/agent.sock ] && alive $AGENT
}

# --- an agent VM ------------------------------------------------------------
agent_vm() {
    mkdir -p /etc/cosched
    agent_config dcs 12 >/etc/cosched/agent.toml
    if ! start_agent; then
        first=$(grep -m1 -i 'error' /tmp/agent.log)
        check attach FAIL "the agent did not start: ${first:-no error line}"
        log_tail /tmp/agent.log 20
        finish DONE
    fi
    runs=$(metric cosched_ebpf_program_runs_total 9464 'program="sched_switch"')
    detectors=$(metrics 9464 | grep '^cosched_wait_detector_active' | sed 's/cosched_wait_detector_active{detector="\([^"]*\)"} /\1=/' | tr '\n' ' ')
    check attach PASS "agent up; sched_switch program runs $runs; detectors $detectors"

    # Adoption: two spinning jobs started here, then given to the agent.
    JA=$(start_job a 21000)
    JB=$(start_job b 21100)
    usleep 500000
    out_a=$(cosched node adopt --pid "$JA" --name a 2>&1)
    out_b=$(cosched node adopt --pid "$JB" --name b 2>&1)
    jobs=$(cosched node jobs 2>&1 | tr '\n' ' ' | tr -s ' ')
    PARENT=$JA; RA=$(children)
    PARENT=$JB; RB=$(children)
    if cosched node jobs --json 2>/dev/null | grep -q '"a"' && [ -n "$RA" ]; then
        check adopt PASS "ranks $(echo $RA) and $(echo $RB); jobs: $jobs"
    else
        check adopt FAIL "adopt a: $out_a; adopt b: $out_b; jobs: $jobs"
    fi

    # Observation: the eBPF programs counted the ranks' switches and arrivals.
    sleep 2
    msgs=$(metric cosched_job_messages_received_total 9464 'job="a"')
    sw=$(metric cosched_job_context_switches_total 9464 'job="a"')
    if [ "${msgs:-0}" -gt 0 ] && [ "${sw:-0}" -gt 0 ]; then
        check observe PASS "job a: $msgs messages received, $sw context switches"
    else
        check observe FAIL "job a: messages ${msgs:-none}, context switches ${sw:-none}"
    fi

    # A DCS boost on a real task: a rank seen at SCHED_FIFO 12.
    T="$(threads_of $RA $RB)"
    seen=$(watch any 20 $T)
    case $seen in
    *" 12") check dcs_boost PASS "task ${seen%% *} seen at SCHED_FIFO 12 (dcs.boost_prio)" ;;
    "") check dcs_boost FAIL "no rank seen at SCHED_FIFO; $(metrics 9464 | grep -E '^cosched_(actions_total|policy_decisions_total)' | tr '\n' ' ')" ;;
    *) check dcs_boost FAIL "unexpected boost: $seen" ;;
    esac

    # Config reload: boost_prio 12 -> 13 by SIGHUP; boosts follow.
    agent_config dcs 13 >/etc/cosched/agent.toml
    kill -HUP "$AGENT"
    wait_for 100 sh -c "[ \"\$(wget -qO- http://127.0.0.1:9464/metrics | grep '^cosched_config_reloads_total{outcome=\"accepted\"}' | awk '{print \$NF}')\" -ge 1 ] 2>/dev/null"
    ok=$(metric cosched_config_reloads_total 9464 'outcome="accepted"')
    seen=$(watch 13 20 $T)
    if [ "${ok:-0}" -ge 1 ] && [ -n "$seen" ]; then
        check reload PASS "reloads accepted $ok; task ${seen%% *} then boosted at SCHED_FIFO 13"
    else
        check reload FAIL "reloads accepted ${ok:-none}; boost at 13 seen: ${seen:-no}"
        log_tail /tmp/agent.log 10
    fi

    # SIGKILL the agent while a rank is boosted: its guardian puts every task
    # back (SCHED_OTHER, nice 0) and the ranks keep running.
    KILL=$AGENT
    killed=$(watch any 20 $T)
    KILL=
    killed=${killed%% *}
    wait "$AGENT" 2>/dev/null
    sleep 3
    bad=""
    for t in $T; do
        s=$(sched_of "$t") || continue
        [ "$s" = "0 0 0" ] || bad="$bad $t($s)"
    done
    live=0
    for p in $RA $RB; do alive "$p" && live=$((live + 1)); done
    if [ -z "$bad" ] && [ $live = 4 ] && ! alive "$AGENT"; then
        check sigkill_restore PASS "agent killed while task ${killed:-none} was boosted; all $(echo $T | wc -w) threads back at SCHED_OTHER nice 0; 4 ranks alive"
    else
        check sigkill_restore FAIL "killed while ${killed:-no task} boosted; not restored:${bad:- none}; ranks alive $live/4"
        log_tail /tmp/agent.log 10
    fi
    kill -9 $RA $RB $JA $JB 2>/dev/null

    # Phase 2: the agent again (after the crash), joined to the coordinator.
    agent_config local 12 coordinator >/etc/cosched/agent.toml
    if start_agent; then
        check rejoin PASS "agent restarted after SIGKILL, joining $COORD:7400"
    else
        check rejoin FAIL "the agent did not restart"
        log_tail /tmp/agent.log 20
    fi
    say DONE
    # The coordinator VM drives the gang jobs. Once they run, record a
    # second of this node's timeline (on its own clock): the host puts n1's
    # and n2's recordings on the coordinator's clock with its offset
    # estimates (as `cosched timeline --coordinator-clock` does) and checks
    # that the same numbered slice switch lines up. The host stops this VM.
    if wait_for 3000 sh -c "[ \"\$(wget -qO- http://127.0.0.1:9464/metrics | grep '^cosched_gang_mode ' | awk '{print \$NF}')\" = 1 ]"; then
        sleep 1
        if cosched node timeline --seconds 1 --max-events 4000 --json-file /tmp/timeline.json >/tmp/timeline.txt 2>&1; then
            say DATA timeline "$(cat /tmp/timeline.json)"
        else
            say DATA timeline-error "$(tr '\n' ' ' </tmp/timeline.txt)"
        fi
    else
        say DATA timeline-error "gang mode never started on this node"
    fi
    while true; do sleep 60; done
}

# --- the coordinator VM -------------------------------------------------------
coordinator_vm() {
    mkdir -p /etc/cosched
    cat >/etc/cosched/coordinator.toml <<EOF
nodes = ["n1", "n2"]
listen = "0.0.0.0:7400"
admin_socket = "/run/cosched/coordinator.sock"
metrics_listen = "0.0.0.0:9465"
secret_file = "/etc/cosched/secret"
state_file = "/var/lib/cosched/coordinator-state.json"
policy = "gang"
slice_ms = 50
heartbeat_interval_ms = 500
heartbeat_timeout_ms = 5000
EOF
    cosched-coordinator --config /etc/cosched/coordinator.toml >/tmp/coordinator.log 2>&1 &
    C=$!
    if wait_for 300 test -S /run/cosched/coordinator.sock && alive $C; then
        check coordinator PASS "listening on $IP:7400"
    else
        check coordinator FAIL "did not start"
        log_tail /tmp/coordinator.log 20
        finish END
    fi
    joined() { [ "$(cosched --json nodes 2>/dev/null | tr -d ' \n' | grep -o '"connected":true' | wc -l)" -ge 2 ]; }
    # The agents first run their own checks (about a minute under TCG).
    if wait_for 3000 joined; then
        check nodes_joined PASS "n1 and n2 connected over virtio"
    else
        check nodes_joined FAIL "$(cosched nodes 2>&1 | tr '\n' ' ')"
        finish END
    fi
    submit() {
        cosched --timeout 30 --json submit --name "$1" --nodes 2 -- /bin/cosched-synth \
            --proto udp --recv spin --compute-us 20 --duration 8 2>&1 | tr -d ' \n' |
            grep -o '"id":[0-9]*' | head -n1 | cut -d: -f2
    }
    A=$(submit a)
    B=$(submit b)
    say DATA jobs "a=$A b=$B"
    sleep 6
    for n in 11 12; do
        wget -qO- "http://${IP%.*}.$n:9464/metrics" 2>/dev/null | grep '^cosched_gang_job_cpu_seconds_total' |
            while read -r line; do say DATA "gang-cpu-$n" "$line"; done
    done
    say DATA status "$(cosched --json status 2>&1 | tr -d '\n')"
    say DATA nodes "$(cosched --json nodes 2>&1 | tr -d '\n')"
    done_jobs=0
    for id in $A $B; do
        wait_for 600 sh -c "cosched --json job $id 2>/dev/null | tr -d ' \n' | grep -q '\"state\":\"completed\"'" &&
            done_jobs=$((done_jobs + 1))
    done
    if [ -n "$A" ] && [ -n "$B" ] && [ $done_jobs = 2 ]; then
        check gang_jobs_completed PASS "jobs $A and $B completed on n1+n2"
    else
        check gang_jobs_completed FAIL "ids '$A' '$B', completed $done_jobs/2; $(cosched jobs --all 2>&1 | tr '\n' ' ')"
        log_tail /tmp/coordinator.log 10
    fi
    finish END
}

# --- the sched_ext comparison (`cargo xtask vm-test --scx`) -----------------
# The same two 2-rank jobs on CPU 0 under each mode of cosched.modes, one
# after the other, for cosched.secs seconds each; cosched-scx measures
# arrival -> running of the receivers in every mode (the probe), and in mode
# scx is also the scheduler. Prints "VMTEST SCX <mode> <loader line>" and
# "VMTEST SCX <mode> SYNTH <rank 0's summary>" per job.
scx_vm() {
    secs=$(arg secs)
    port=22000
    for mode in $(arg modes | tr ',' ' '); do
        port=$((port + 200))
        case $mode in scx) what=sched ;; scx-fifo) what=fifo ;; *) what=probe ;; esac
        cosched-scx $what $((secs + 120)) >/tmp/scx.$mode 2>&1 &
        LOADER=$!
        if ! wait_for 600 grep -q '^SCX \(READY\|ERROR\)' /tmp/scx.$mode; then
            say SCX $mode "SCX ERROR the loader did not start in 60 s"
        fi
        if [ $mode = agent ]; then
            agent_config dcs 12 >/etc/cosched/agent.toml
            start_agent || say SCX $mode "SCX ERROR the agent did not start: $(grep -m1 -i error /tmp/agent.log)"
        fi
        JA=$(start_job a $port "$secs")
        JB=$(start_job b $((port + 100)) "$secs")
        if [ $mode = agent ]; then
            usleep 300000
            cosched node adopt --pid "$JA" --name a >/dev/null 2>&1 || say SCX $mode "SCX ERROR adopt a failed"
            cosched node adopt --pid "$JB" --name b >/dev/null 2>&1 || say SCX $mode "SCX ERROR adopt b failed"
        fi
        # The jobs' shells are PID 1's (this script's) children only by
        # adoption: wait for them through /proc.
        while alive $JA || alive $JB; do usleep 200000; done
        kill -INT $LOADER 2>/dev/null
        wait $LOADER
        grep '^SCX \(RESULT\|ERROR\)' /tmp/scx.$mode | while read -r line; do say SCX $mode "$line"; done
        grep -v '^SCX ' /tmp/scx.$mode | tail -n 5 | while read -r line; do say LOG "$line"; done
        for j in a b; do say SCX $mode "SYNTH $(grep iterations /tmp/$j.0)"; done
        if [ $mode = agent ]; then kill $AGENT; wait $AGENT; fi
    done
    finish END
}

case $ROLE in
scx) scx_vm ;;
coordinator) coordinator_vm ;;
agent) agent_vm ;;
*) say CHECK role FAIL "no cosched.role on the command line"; finish END ;;
esac
