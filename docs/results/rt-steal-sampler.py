#!/usr/bin/env python3
"""Samples /proc/stat's cpu lines every 50 ms with their CLOCK_MONOTONIC instant (docs/bench-rt.md,
session 19): the hypervisor's steal per CPU (8th number, USER_HZ ticks) on the clock of the
agents' timelines and the RT frames. Runs until killed. Usage: rt-steal-sampler.py OUT"""
import sys, time

with open(sys.argv[1], 'w') as out:
    while True:
        t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        with open('/proc/stat') as f:
            lines = [line.strip() for line in f if line.startswith('cpu')]
        out.write(f"{t} " + "|".join(lines) + "\n")
        out.flush()
        time.sleep(0.05)
