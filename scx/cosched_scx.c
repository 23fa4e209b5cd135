// SPDX-License-Identifier: GPL-2.0
/*
 * Loader of cosched_scx.bpf.o (embedded), built statically for the VM
 * guests by `cargo xtask vm-test --scx`.
 *
 *   cosched-scx probe SECONDS   the probe only (plain Linux, or beside the
 *                               agent with DCS)
 *   cosched-scx sched SECONDS   the probe and the sched_ext scheduler (fair)
 *   cosched-scx fifo SECONDS    the same with the FIFO variant (starves)
 *
 * After SECONDS (or SIGINT/SIGTERM) it prints one line the host parses
 * (xtask/src/vm/scx.rs):
 *   SCX RESULT mode=<m> n=<count> p50_us=<v> p90_us=<v> p99_us=<v>
 *       max_us=<v> stamps=<n> kicks=<n> enq_preempt=<n> dispatch_first=<n>
 *       no_task=<n> exit=<kind>
 * (latencies are the lower edges of log-linear buckets at most 6 % wide)
 * and on failure one "SCX ERROR <text>" line (exit status 1).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define SUB 16
#define BUCKETS (SUB + 40 * SUB)

extern const char scx_obj_start[], scx_obj_end[];
__asm__(".section .rodata\n"
	".global scx_obj_start\nscx_obj_start:\n"
	".incbin \"" SCX_OBJ "\"\n"
	".global scx_obj_end\nscx_obj_end:\n"
	".previous\n");

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Lower edge, in microseconds, of histogram bucket b (see the BPF side). */
static unsigned long long bucket_us(int b)
{
	if (b < SUB)
		return b;
	int e = 4 + (b - SUB) / SUB, sub = (b - SUB) % SUB;
	return (unsigned long long)(SUB + sub) << (e - 4);
}

static unsigned long long read_counter(int fd, unsigned int i)
{
	unsigned long long v = 0;
	bpf_map_lookup_elem(fd, &i, &v);
	return v;
}

static int fail(const char *what, int err)
{
	printf("SCX ERROR %s: %s\n", what, strerror(err < 0 ? -err : err));
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "probe") && strcmp(argv[1], "sched") &&
			  strcmp(argv[1], "fifo"))) {
		fprintf(stderr, "usage: %s probe|sched|fifo SECONDS\n", argv[0]);
		return 2;
	}
	int sched = strcmp(argv[1], "probe") != 0;
	int is_fair = !strcmp(argv[1], "sched");
	int seconds = atoi(argv[2]);
	libbpf_set_print(quiet);

	struct bpf_object *obj = bpf_object__open_mem(
		scx_obj_start, scx_obj_end - scx_obj_start, NULL);
	if (!obj)
		return fail("open", errno);
	struct bpf_map *ops = bpf_object__find_map_by_name(obj, "cosched_ops");
	if (!ops)
		return fail("no cosched_ops map", ENOENT);
	struct bpf_program *prog;
	if (!sched) {
		bpf_map__set_autocreate(ops, false);
		bpf_object__for_each_program(prog, obj)
			if (bpf_program__type(prog) == BPF_PROG_TYPE_STRUCT_OPS)
				bpf_program__set_autoload(prog, false);
	}
	int err = bpf_object__load(obj);
	if (err)
		return fail("load", err);
	int cfg = bpf_object__find_map_fd_by_name(obj, "cfg");
	unsigned int zero = 0;
	unsigned long long on = sched;
	bpf_map_update_elem(cfg, &zero, &on, BPF_ANY);
	unsigned int one = 1;
	unsigned long long fair_on = is_fair;
	bpf_map_update_elem(cfg, &one, &fair_on, BPF_ANY);
	bpf_object__for_each_program(prog, obj) {
		if (bpf_program__type(prog) == BPF_PROG_TYPE_STRUCT_OPS)
			continue;
		if (!bpf_program__attach(prog))
			return fail(bpf_program__name(prog), errno);
	}
	struct bpf_link *link = NULL;
	if (sched) {
		link = bpf_map__attach_struct_ops(ops);
		if (!link)
			return fail("attach struct_ops", errno);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("SCX READY mode=%s\n", argv[1]);
	fflush(stdout);
	for (int i = 0; i < seconds * 10 && !stop; i++)
		usleep(100000);

	int hist = bpf_object__find_map_fd_by_name(obj, "hist");
	int counters = bpf_object__find_map_fd_by_name(obj, "counters");
	static unsigned long long counts[BUCKETS];
	unsigned long long n = 0;
	int max = -1;
	for (int b = 0; b < BUCKETS; b++) {
		counts[b] = read_counter(hist, b);
		n += counts[b];
		if (counts[b])
			max = b;
	}
	unsigned long long q[3] = { 0, 0, 0 };
	const double at[3] = { 0.50, 0.90, 0.99 };
	for (int k = 0; k < 3 && n; k++) {
		unsigned long long want = (unsigned long long)(at[k] * n), seen = 0;
		if (want == 0)
			want = 1;
		for (int b = 0; b < BUCKETS; b++) {
			seen += counts[b];
			if (seen >= want) {
				q[k] = bucket_us(b);
				break;
			}
		}
	}
	/* exit_kind is the first .bss variable (0: still running). */
	unsigned long long exit_kind = 0;
	struct bpf_map *bss = bpf_object__find_map_by_name(obj, ".bss");
	if (bss) {
		size_t sz = 0;
		const unsigned long long *mem = bpf_map__initial_value(bss, &sz);
		if (mem && sz >= sizeof(*mem))
			exit_kind = mem[0];
	}
	if (link)
		bpf_link__destroy(link);
	printf("SCX RESULT mode=%s n=%llu p50_us=%llu p90_us=%llu p99_us=%llu "
	       "max_us=%llu stamps=%llu kicks=%llu enq_preempt=%llu "
	       "dispatch_first=%llu no_task=%llu exit=%llu\n",
	       argv[1], n, q[0], q[1], q[2], max < 0 ? 0 : bucket_us(max),
	       read_counter(counters, 0), read_counter(counters, 1),
	       read_counter(counters, 2), read_counter(counters, 3),
	       read_counter(counters, 4), exit_kind);
	fflush(stdout);
	bpf_object__close(obj);
	return 0;
}
