/*
 * Reports frames through the C ABI, the way a real-time program would.
 *
 *   frames N THREADS CHILD_FRAMES INIT
 *
 * N frames split over THREADS threads (cosched_rt_init() first if INIT is
 * 1); then, if CHILD_FRAMES > 0, a forked child reports that many frames
 * and the parent one more. Prints what it saw for the test to check.
 */
#include "cosched_rt.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_THREADS 16

static long per_thread;

/* Returns how many calls failed (at most one in the whole process). */
static void *report(void *unused)
{
	long failed = 0;
	(void)unused;
	for (long i = 0; i < per_thread; i++)
		if (cosched_rt_frame_done() < 0)
			failed++;
	return (void *)failed;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	long frames = atol(argv[1]);
	int threads = atoi(argv[2]);
	long child_frames = atol(argv[3]);
	int init = atoi(argv[4]);
	if (threads < 1 || threads > MAX_THREADS || frames % threads != 0)
		return 2;

	int init_rc = init ? cosched_rt_init() : 0;
	if (!init && cosched_rt_frames() != 0)
		return 3;
	per_thread = frames / threads;
	pthread_t tids[MAX_THREADS];
	for (int t = 0; t < threads; t++)
		if (pthread_create(&tids[t], NULL, report, NULL) != 0)
			return 4;
	long failed = 0;
	for (int t = 0; t < threads; t++) {
		void *ret;
		pthread_join(tids[t], &ret);
		failed += (long)ret;
	}
	printf("pid %d frames %" PRIu64 " failed %ld init %d\n", (int)getpid(),
	       cosched_rt_frames(), failed, init_rc);
	fflush(stdout);

	if (child_frames > 0) {
		pid_t child = fork();
		if (child < 0)
			return 5;
		if (child == 0) {
			if (cosched_rt_frames() != 0)
				_exit(6);
			for (long i = 0; i < child_frames; i++)
				cosched_rt_frame_done();
			printf("child %d frames %" PRIu64 "\n", (int)getpid(),
			       cosched_rt_frames());
			fflush(stdout);
			_exit(0);
		}
		int status;
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			return 7;
		if (cosched_rt_frame_done() != 0)
			return 8;
		printf("parent frames %" PRIu64 "\n", cosched_rt_frames());
	}
	return 0;
}
