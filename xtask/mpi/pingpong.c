/* Ping-pong, fine grain: ranks 2k and 2k+1 exchange a message per
 * iteration (blocking send and receive) after computing; an odd last rank
 * only computes. Every wait is for one peer's very next message, the case
 * where a descheduled peer costs most. */
#include "mpibench.h"

static int rank, size;
static char *buf;

static void step(const struct args *a)
{
    compute(a->compute_us);
    int peer = rank ^ 1;
    if (peer >= size)
        return;
    if (rank % 2 == 0) {
        MPI_Send(buf, a->size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, a->size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, a->size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, a->size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct args a = parse_args(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = calloc(a.size, 1);
    run("pingpong", &a, step);
    free(buf);
    finish();
    return 0;
}
