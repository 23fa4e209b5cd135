/* Overlap of communication and computation the way many codes write it:
 * every iteration posts a ring exchange (MPI_Irecv from the left, MPI_Isend
 * to the right), then computes in --chunk-us pieces, calling MPI_Testall
 * between pieces; once its computation is done a rank keeps calling
 * MPI_Testall until the exchange completes. The waiting is the
 * application's own loop, not the library's blocking wait, so a library
 * setting that changes how MPI_Wait waits does not apply to it. */
#include "mpibench.h"

static int rank, size;
static char *send_buf, *recv_buf;

static void step(const struct args *a)
{
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Request req[2];
    MPI_Irecv(recv_buf, a->size, MPI_BYTE, left, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(send_buf, a->size, MPI_BYTE, right, 0, MPI_COMM_WORLD, &req[1]);
    double left_us = a->compute_us;
    int done = 0;
    while (!done || left_us > 0) {
        if (left_us > 0) {
            double piece = left_us < a->chunk_us ? left_us : a->chunk_us;
            compute(piece);
            left_us -= piece;
        }
        if (!done)
            MPI_Testall(2, req, &done, MPI_STATUSES_IGNORE);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct args a = parse_args(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    send_buf = calloc(a.size, 1);
    recv_buf = calloc(a.size, 1);
    run("test-loop", &a, step);
    finish();
    return 0;
}
