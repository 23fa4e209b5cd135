# How late a sleep ends on this VM, by sleep length, on an otherwise idle
# CPU (the vCPU halts while the sleeper sleeps) and with a SCHED_IDLE spinner
# on the same CPU (it never halts): sleep_overshoot.py for each length, about
# 2 s of sleeps each. Run under the bench lock on a quiet machine:
#   flock /tmp/cosched-bench.lock sh sim/calibration/sleep_overshoot_sweep.sh [CPU]
cpu=${1:-1}
here=$(dirname "$0")
lengths="100 250 500 1000 2000 3000 5000 7500 10000"
for us in $lengths; do
    python3 "$here/sleep_overshoot.py" "$cpu" "$us" $((2000000 / (us + 100))) | sed 's/^/idle /'
done
python3 -c "import os;os.sched_setaffinity(0,{$cpu});os.sched_setscheduler(0,os.SCHED_IDLE,os.sched_param(0))
while True: pass" & spinner=$!
sleep 0.3
for us in $lengths; do
    python3 "$here/sleep_overshoot.py" "$cpu" "$us" $((2000000 / (us + 100))) | sed 's/^/busy /'
done
kill $spinner
