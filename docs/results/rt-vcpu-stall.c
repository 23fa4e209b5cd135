// A stall probe per CPU (docs/bench-rt.md, session 19): one thread pinned to each CPU at
// SCHED_FIFO 99 wakes every 1 ms (absolute CLOCK_MONOTONIC) and logs each wake-up later
// than 0.5 ms: the CPU ran nothing of higher priority, so such a gap is the vCPU not running
// (hypervisor steal) or the guest kernel not preempting. Runs until SIGTERM/SIGINT, then
// writes "cpu expected_ns late_ns" lines to argv[1] and a summary to stderr.
// cc -O2 -pthread -o rt-vcpu-stall rt-vcpu-stall.c
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#define MAXLOG 200000
static volatile sig_atomic_t stop;
static struct { int cpu; long long at, late; } logv[MAXLOG];
static int nlog; static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long wakes[64];
static void on_sig(int s) { (void)s; stop = 1; }
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static void *run(void *arg) {
    int cpu = (int)(long)arg;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct sched_param p = { .sched_priority = 99 };
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p)) perror("setschedparam");
    long long next = now() + 1000000;
    while (!stop) {
        struct timespec t = { next / 1000000000LL, next % 1000000000LL };
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        long long n = now(), late = n - next;
        wakes[cpu]++;
        if (late > 500000) {
            pthread_mutex_lock(&mu);
            if (nlog < MAXLOG) { logv[nlog].cpu = cpu; logv[nlog].at = next; logv[nlog].late = late; nlog++; }
            pthread_mutex_unlock(&mu);
        }
        next += 1000000;
        while (next < n) next += 1000000;
    }
    return NULL;
}
int main(int argc, char **argv) {
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    signal(SIGTERM, on_sig); signal(SIGINT, on_sig);
    pthread_t th[64];
    for (int c = 0; c < ncpu; c++) pthread_create(&th[c], NULL, run, (void *)(long)c);
    for (int c = 0; c < ncpu; c++) pthread_join(th[c], NULL);
    FILE *f = fopen(argc > 1 ? argv[1] : "/dev/stdout", "w");
    for (int i = 0; i < nlog; i++) fprintf(f, "%d %lld %lld\n", logv[i].cpu, logv[i].at, logv[i].late);
    fclose(f);
    for (int c = 0; c < ncpu; c++) {
        long long n = 0, sum = 0, mx = 0;
        for (int i = 0; i < nlog; i++) if (logv[i].cpu == c) { n++; sum += logv[i].late; if (logv[i].late > mx) mx = logv[i].late; }
        fprintf(stderr, "cpu%d: %lld wake-ups, %lld later than 0.5 ms (%.1f ms in all, max %.2f ms)\n", c, wakes[c], n, sum / 1e6, mx / 1e6);
    }
    return 0;
}
