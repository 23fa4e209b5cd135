/* What the MPI benchmarks share: arguments, CPU-time compute, a common
 * start instant, and one machine-readable result line.
 *
 * Every program takes
 *   --iters N        timed iterations                  (default 10000)
 *   --warmup N       untimed iterations first           (default 100)
 *   --size BYTES     message size                       (default 8)
 *   --compute-us US  CPU time computed per iteration    (default 20)
 *   --chunk-us US    test-loop only: compute between MPI_Test calls (5)
 *   --start-at S     Unix time (s, fractional) at which the timed part
 *                    starts, so jobs started together by a harness measure
 *                    the same window (0: at once)
 *   --max-seconds S  stop early once a rank has run the timed part this long
 *                    (0: never), so a run's length is bounded whatever the
 *                    scheduling does to it
 *   --check-every N  with --max-seconds: every N iterations the ranks agree
 *                    (one small MPI_Allreduce) on whether to stop (50)
 * and rank 0 prints one line
 *   MPIBENCH {"prog":...,"iters":...,"elapsed_s":...,"us_per_iter":...}
 * where iters is the timed iterations done and elapsed_s the slowest rank's
 * time for them. Programs end with finish() instead of MPI_Finalize().
 */
#ifndef MPIBENCH_H
#define MPIBENCH_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(OPEN_MPI)
#define MPIBENCH_LIB "openmpi"
#elif defined(MPICH_VERSION)
#define MPIBENCH_LIB "mpich"
#else
#define MPIBENCH_LIB "unknown"
#endif

struct args {
    long iters;
    long warmup;
    long size;
    double compute_us;
    double chunk_us;
    double start_at;
    double max_seconds;
    long check_every;
};

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--iters N] [--warmup N] [--size BYTES] "
            "[--compute-us US] [--chunk-us US] [--start-at UNIX_S] "
            "[--max-seconds S] [--check-every N]\n",
            prog);
    exit(2);
}

static struct args parse_args(int argc, char **argv)
{
    struct args a = {10000, 100, 8, 20.0, 5.0, 0.0, 0.0, 50};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage(argv[0]);
        const char *k = argv[i], *v = argv[++i];
        char *end;
        double x = strtod(v, &end);
        if (*end != '\0' || x < 0)
            usage(argv[0]);
        if (!strcmp(k, "--iters"))
            a.iters = (long)x;
        else if (!strcmp(k, "--warmup"))
            a.warmup = (long)x;
        else if (!strcmp(k, "--size"))
            a.size = (long)x;
        else if (!strcmp(k, "--compute-us"))
            a.compute_us = x;
        else if (!strcmp(k, "--chunk-us"))
            a.chunk_us = x;
        else if (!strcmp(k, "--start-at"))
            a.start_at = x;
        else if (!strcmp(k, "--max-seconds"))
            a.max_seconds = x;
        else if (!strcmp(k, "--check-every"))
            a.check_every = (long)x;
        else
            usage(argv[0]);
    }
    if (a.size < 1)
        a.size = 1;
    if (a.check_every < 1)
        a.check_every = 1;
    return a;
}

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Computes for `us` of this thread's CPU time (not wall time: a rank that is
 * preempted must still do all of its work, as a real program would). */
static volatile double sink;
static void compute(double us)
{
    if (us <= 0)
        return;
    double until = thread_cpu_us() + us;
    double x = 1.0;
    while (thread_cpu_us() < until)
        for (int i = 0; i < 64; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

static double unix_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Sleeps until --start-at, then synchronises. Returns how late this rank
 * reached the start instant (s; 0 when it was early or none was given). */
static double wait_for_start(const struct args *a)
{
    double late = 0;
    if (a->start_at > 0) {
        double now = unix_now();
        if (now < a->start_at) {
            struct timespec t;
            t.tv_sec = (time_t)a->start_at;
            t.tv_nsec = (long)((a->start_at - (double)t.tv_sec) * 1e9);
            while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &t, NULL) != 0)
                ;
        } else {
            late = now - a->start_at;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return late;
}

/* Rank 0 prints the result line: the slowest rank's elapsed time. */
static void report(const char *prog, const struct args *a, long iters, double elapsed,
                   double late)
{
    int rank, size;
    double max_elapsed, max_late;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&late, &max_late, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("MPIBENCH {\"prog\":\"%s\",\"lib\":\"%s\",\"ranks\":%d,\"iters\":%ld,"
               "\"size\":%ld,\"compute_us\":%g,\"elapsed_s\":%.6f,\"us_per_iter\":%.3f,"
               "\"late_start_s\":%.6f}\n",
               prog, MPIBENCH_LIB, size, iters, a->size, a->compute_us, max_elapsed,
               iters ? max_elapsed * 1e6 / iters : 0.0, max_late);
        fflush(stdout);
    }
}

/* Runs `warmup` then `iters` calls of `step`, timed between the common start
 * and the end of this rank's last iteration; reports and returns. */
static void run(const char *prog, const struct args *a, void (*step)(const struct args *))
{
    for (long i = 0; i < a->warmup; i++)
        step(a);
    double late = wait_for_start(a);
    double t0 = MPI_Wtime();
    long done = 0;
    while (done < a->iters) {
        step(a);
        done++;
        if (a->max_seconds > 0 && done % a->check_every == 0) {
            int over = MPI_Wtime() - t0 >= a->max_seconds, stop;
            MPI_Allreduce(&over, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (stop)
                break;
        }
    }
    report(prog, a, done, MPI_Wtime() - t0, late);
}

/* Ends MPI; with MPICH, all ranks first meet in a barrier of the process
 * manager (PMI), which does not progress MPI.
 *
 * Why: MPICH 4.0.2's ch4:ucx MPI_Finalize closes every UCX endpoint with a
 * flush, waits for the flushes, then enters PMI's barrier, which does not
 * progress UCX. UCX 1.13's TCP flush is a round trip (a zero-length PUT that
 * the peer must acknowledge, needed after any send, acknowledgements
 * included). A rank whose flush the peer acknowledged while still inside an
 * earlier MPI call (say the root of the last MPI_Reduce) leaves for PMI's
 * barrier; the peer's own flush, sent when it reaches MPI_Finalize, is then
 * never acknowledged and it spins forever (seen in ~1 of 80 jobs of two
 * jobs sharing two CPUs, with descheduled ranks more often). Meeting in a
 * PMI barrier first means no rank is inside another MPI call when the
 * flushes start, and each rank's flush request reaches the peer before its
 * acknowledgement does (one connection, in order): MPICH itself later moved
 * its PMI barrier before the disconnect. Outside the measured part; speaks
 * hydra's PMI-1 wire protocol on the descriptor it passes in PMI_FD (the
 * library's own PMI functions are not exported); without PMI_FD (a
 * singleton, another process manager) it does nothing. Built with
 * -DMPIBENCH_NO_PMI_BARRIER, the programs call MPI_Finalize() straight
 * away (docs/probes/mpich_finalize_hang.sh compares the two). */
#if defined(MPICH_VERSION) && !defined(MPIBENCH_NO_PMI_BARRIER)
static void pmi_barrier(void)
{
    const char *fd_env = getenv("PMI_FD");
    if (!fd_env)
        return;
    int fd = atoi(fd_env);
    static const char in[] = "cmd=barrier_in\n";
    size_t sent = 0;
    while (sent < sizeof in - 1) {
        ssize_t n = write(fd, in + sent, sizeof in - 1 - sent);
        if (n <= 0) {
            fprintf(stderr, "mpibench: PMI barrier: write failed, finalizing without it\n");
            return;
        }
        sent += (size_t)n;
    }
    char line[256];
    size_t len = 0;
    for (;;) {
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n <= 0) {
            fprintf(stderr, "mpibench: PMI barrier: no reply, finalizing without it\n");
            return;
        }
        if (c == '\n')
            break;
        if (len < sizeof line - 1)
            line[len++] = c;
    }
    line[len] = '\0';
    if (!strstr(line, "barrier_out"))
        fprintf(stderr, "mpibench: PMI barrier: unexpected reply '%s'\n", line);
}
#endif

static void finish(void)
{
#if defined(MPICH_VERSION) && !defined(MPIBENCH_NO_PMI_BARRIER)
    pmi_barrier();
#endif
    MPI_Finalize();
}

#endif
