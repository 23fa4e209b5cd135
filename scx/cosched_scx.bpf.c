// SPDX-License-Identifier: GPL-2.0
/*
 * cosched-scx: a minimal sched_ext scheduler that makes the DCS decision
 * inside the kernel, plus the probe that measures arrival -> running for it
 * and for the agent (docs/kernels.md, "A reaction from inside the kernel").
 *
 * Probe (loaded in every mode):
 *   sock_recv_length  learns socket -> receiving thread (as the agent's
 *                     SOCK_OWNER does);
 *   sk_data_ready     stamps that thread with the arrival time (the first
 *                     arrival not yet followed by a switch-in);
 *   sched_switch      when a stamped thread is switched in: now - stamp
 *                     goes into the histogram, the stamp is cleared.
 * Scheduler (cfg[0] = 1; cfg[1] = 1 for the fair variant):
 *   sk_data_ready     also kicks the receiver's CPU (SCX_KICK_PREEMPT);
 *   enqueue           a stamped task goes to the head of its CPU's local DSQ
 *                     (SCX_ENQ_PREEMPT); everything else to one global queue;
 *   dispatch          a stamped task in the queue is taken first, then the
 *                     queue's head.
 *   FIFO variant: the queue is FIFO and a stamped task always goes first.
 *   That starves: two ping-ponging ranks hand the CPU to each other forever
 *   (measured, docs/kernels.md).
 *   Fair variant: the queue is ordered by virtual time (CPU time used, as in
 *   the kernel's scx_simple), and a stamped task goes first only while its
 *   virtual time is at most LAG_NS ahead of the running tasks' (the agent's
 *   equal-share rule with its default 5 ms / 5 % slack, per task).
 * Built against the 7.2 kernel's BTF (vmlinux.h) and libbpf 1.7 headers.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define FIFO_DSQ 0
#define LAG_NS 5000000ULL
/*
 * Log-linear histogram: 1 us buckets below 16 us, then 16 buckets per power
 * of two (at most 1/16 = 6 % wide). Index = 16 + (e - 4) * 16 + sub for
 * 2^e <= us < 2^(e+1), sub = the 4 bits below the top one.
 */
#define SUB 16
#define BUCKETS (SUB + 40 * SUB)

extern s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
extern void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice,
			       u64 enq_flags) __ksym;
extern bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym;
extern bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter,
			     struct task_struct *p, u64 dsq_id,
			     u64 enq_flags) __ksym;
extern int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id,
				u64 flags) __ksym;
extern struct task_struct *
bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym;
extern void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym;
extern void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
extern s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id,
				     u64 slice, u64 vtime, u64 enq_flags) __ksym;
extern bool scx_bpf_task_set_dsq_vtime(struct task_struct *p, u64 vtime) __ksym;
extern bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;

/* cfg[0]: 1 when the scheduler half is attached; cfg[1]: 1 = fair variant. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u64); /* struct sock * */
	__type(value, u32); /* receiving tid */
} owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32); /* tid */
	__type(value, u64); /* arrival, ns */
} arrival SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BUCKETS);
	__type(key, u32);
	__type(value, u64);
} hist SEC(".maps");

/*
 * counters: 0 stamps, 1 kicks, 2 enqueue-preempts, 3 dispatch-picks,
 * 4 receiver not found by pid
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

u64 exit_kind;
u64 vtime_now;
char exit_reason[128];

static __always_inline void count(u32 i)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline bool sched_on(void)
{
	u32 zero = 0;
	u64 *on = bpf_map_lookup_elem(&cfg, &zero);
	return on && *on;
}

static __always_inline bool fair(void)
{
	u32 one = 1;
	u64 *on = bpf_map_lookup_elem(&cfg, &one);
	return on && *on;
}

/* A stamped task may jump the queue (fair: within LAG_NS of vtime_now). */
static __always_inline bool may_go_first(struct task_struct *p, bool is_fair)
{
	return !is_fair || p->scx.dsq_vtime <= vtime_now + LAG_NS;
}

static __always_inline bool stamped(u32 tid)
{
	return bpf_map_lookup_elem(&arrival, &tid) != NULL;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(learn_owner, struct sock *sk, int ret, int flags)
{
	u64 key = (u64)sk;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *old = bpf_map_lookup_elem(&owner, &key);
	if (!old || *old != tid)
		bpf_map_update_elem(&owner, &key, &tid, BPF_ANY);
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(stamp_arrival, const struct sock *sk)
{
	u64 key = (u64)sk, now = bpf_ktime_get_ns();
	u32 *tid = bpf_map_lookup_elem(&owner, &key);
	if (!tid || *tid == (u32)bpf_get_current_pid_tgid())
		return 0;
	u32 t = *tid;
	if (bpf_map_update_elem(&arrival, &t, &now, BPF_NOEXIST))
		return 0; /* an earlier arrival is still waiting */
	count(0);
	if (!sched_on())
		return 0;
	struct task_struct *p = bpf_task_from_pid(t);
	if (!p) {
		count(4);
		return 0;
	}
	scx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_PREEMPT);
	count(1);
	bpf_task_release(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_in, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	u32 tid = next->pid;
	u64 *at = bpf_map_lookup_elem(&arrival, &tid);
	if (!at)
		return 0;
	u64 us = (bpf_ktime_get_ns() - *at) / 1000;
	bpf_map_delete_elem(&arrival, &tid);
	u32 b = us;
	if (us >= SUB) {
		u32 e = 4;
		for (int i = 0; i < 40 && (us >> (e + 1)); i++)
			e++;
		b = SUB + (e - 4) * SUB + ((us >> (e - 4)) & (SUB - 1));
		if (b >= BUCKETS)
			b = BUCKETS - 1;
	}
	u64 *n = bpf_map_lookup_elem(&hist, &b);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("struct_ops/cosched_enqueue")
void BPF_PROG(cosched_enqueue, struct task_struct *p, u64 enq_flags)
{
	bool is_fair = fair();
	u64 vtime = p->scx.dsq_vtime;

	/* A sleeper comes back at most one slice behind the others. */
	if (is_fair && vtime + SCX_SLICE_DFL < vtime_now) {
		vtime = vtime_now - SCX_SLICE_DFL;
		scx_bpf_task_set_dsq_vtime(p, vtime);
	}
	if (stamped(p->pid) && may_go_first(p, is_fair)) {
		count(2);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL,
				   enq_flags | SCX_ENQ_HEAD | SCX_ENQ_PREEMPT);
		return;
	}
	if (is_fair)
		scx_bpf_dsq_insert_vtime(p, FIFO_DSQ, SCX_SLICE_DFL, vtime,
					 enq_flags);
	else
		scx_bpf_dsq_insert(p, FIFO_DSQ, SCX_SLICE_DFL, enq_flags);
}

SEC("struct_ops/cosched_dispatch")
void BPF_PROG(cosched_dispatch, s32 cpu, struct task_struct *prev)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	bool moved = false, is_fair = fair();

	bpf_iter_scx_dsq_new(&it, FIFO_DSQ, 0);
	while ((p = bpf_iter_scx_dsq_next(&it))) {
		if (stamped(p->pid) && may_go_first(p, is_fair) &&
		    bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
			moved = scx_bpf_dsq_move(&it, p, SCX_DSQ_LOCAL, 0);
			break;
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	if (moved) {
		count(3);
		return;
	}
	scx_bpf_dsq_move_to_local(FIFO_DSQ);
}

SEC("struct_ops/cosched_running")
void BPF_PROG(cosched_running, struct task_struct *p)
{
	if (p->scx.dsq_vtime > vtime_now)
		vtime_now = p->scx.dsq_vtime;
}

SEC("struct_ops/cosched_stopping")
void BPF_PROG(cosched_stopping, struct task_struct *p, bool runnable)
{
	/* Charge the slice used, scaled by the task's weight (100 = nice 0). */
	u64 used = p->scx.slice < SCX_SLICE_DFL ? SCX_SLICE_DFL - p->scx.slice : 0;
	scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime +
					      used * 100 / p->scx.weight);
}

SEC("struct_ops.s/cosched_init")
s32 BPF_PROG(cosched_init)
{
	return scx_bpf_create_dsq(FIFO_DSQ, -1);
}

SEC("struct_ops/cosched_exit")
void BPF_PROG(cosched_exit, struct scx_exit_info *ei)
{
	exit_kind = ei->kind;
	bpf_probe_read_kernel_str(exit_reason, sizeof(exit_reason), ei->reason);
}

SEC(".struct_ops.link")
struct sched_ext_ops cosched_ops = {
	.enqueue = (void *)cosched_enqueue,
	.dispatch = (void *)cosched_dispatch,
	.running = (void *)cosched_running,
	.stopping = (void *)cosched_stopping,
	.init = (void *)cosched_init,
	.exit = (void *)cosched_exit,
	.name = "cosched",
};
