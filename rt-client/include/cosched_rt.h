/*
 * cosched_rt.h - frame reporting for real-time jobs under cosched.
 *
 * A process of a real-time job (period d, b frames per window, work tau per
 * frame) calls cosched_rt_frame_done() each time it completes a frame. The
 * library keeps the process's frame counter in a shared file,
 * $COSCHED_RT_DIR/<pid>.frames (default /run/cosched/rt), that the cosched
 * agent reads to count frames per window and deadline misses.
 *
 * Link with -lcosched_rt (libcosched_rt.so or libcosched_rt.a; the static
 * library also needs -lpthread -ldl -lm). Every function is thread-safe
 * and may be called from any thread: the count is per process. Nothing here
 * aborts the application: when the counter file cannot be made, frames are
 * counted in the process's memory only and the reason is returned once.
 * A forked child counts its own frames, in a file of its own.
 *
 * See docs/rt-frames.md in the cosched repository.
 */
#ifndef COSCHED_RT_H
#define COSCHED_RT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Reports one finished frame of this process.
 *
 * Cost: an atomic add, an atomic max and one vDSO clock read; no system
 * call after the first call, except a sample of the process's CPU time at
 * most once per millisecond (docs/rt-frames.md has the measured cost). The first call creates the counter file
 * unless cosched_rt_init() did.
 *
 * Returns 0, or a negative errno (e.g. -ENOENT: no such directory, -EACCES:
 * not writable, -EEXIST: another user's file has this pid's name) from the
 * one call that tried to create the counter file and failed. The frame is
 * counted in memory then, and later calls return 0.
 */
int cosched_rt_frame_done(void);

/*
 * Creates the counter file now instead of at the first frame, so the agent
 * sees the process before it and the first frame's CPU time is measured from
 * here. Call it right before the first frame. Optional; idempotent.
 *
 * The first call may wait: when the agent published a first-frame gate for
 * the job ($COSCHED_RT_DIR/first-frame, under 1GS with admission control),
 * it returns at the instant the coordinator chose for the job's first frame
 * (so every window ends with room in the job's rows), or after the gate's
 * bound (at most 10 s) if no instant comes. Without a gate file it returns
 * at once. Later calls never wait.
 *
 * Returns 0 if frames reach the counter file, else the same negative errno
 * on every call.
 */
int cosched_rt_init(void);

/*
 * The instant (CLOCK_MONOTONIC ns) the first-frame gate opened at, if
 * cosched_rt_init() waited at one; 0 without a gate or if the wait gave up.
 */
uint64_t cosched_rt_first_frame_ns(void);

/*
 * Frames this process reported so far (0 before the first frame or
 * cosched_rt_init()). Counted in memory when there is no counter file.
 */
uint64_t cosched_rt_frames(void);

#ifdef __cplusplus
}
#endif

#endif /* COSCHED_RT_H */
