# Same as blocking_cost.py, with a SCHED_IDLE spinner on each CPU so that
# neither CPU ever goes idle (no vCPU halt and wake-up).
python3 -c "import os;os.sched_setaffinity(0,{0});os.sched_setscheduler(0,os.SCHED_IDLE,os.sched_param(0))
while True: pass" & a=$!
python3 -c "import os;os.sched_setaffinity(0,{1});os.sched_setscheduler(0,os.SCHED_IDLE,os.sched_param(0))
while True: pass" & b=$!
sleep 0.3
python3 "$(dirname "$0")/blocking_cost.py"
kill $a $b
