# Same as blocking_cost_busy.sh, but no wakeup preempts: the spinners are
# SCHED_OTHER (nice 0) and the ping-pong processes SCHED_BATCH, which the
# kernel never lets preempt at wakeup (check_preempt_wakeup_fair); a woken
# process is only enqueued on the busy CPU (no reschedule IPI) and runs when
# the spinner's slice ends at a tick. Its CPU per iteration against
# blocking_cost_busy.sh's (where every wakeup preempts a SCHED_IDLE spinner)
# is what the preemption costs. Slow (a tick per wakeup): 1,000 iterations.
python3 -c "import os;os.sched_setaffinity(0,{0})
while True: pass" & a=$!
python3 -c "import os;os.sched_setaffinity(0,{1})
while True: pass" & b=$!
sleep 0.3
BLOCKING_N=1000 BLOCKING_POLICY=batch python3 "$(dirname "$0")/blocking_cost.py"
kill $a $b
