/* Halo exchange on a ring (a 1-D domain decomposition): every iteration
 * computes, then sends --size bytes to both neighbours and receives theirs
 * (non-blocking, then MPI_Waitall). With 2 ranks both neighbours are the
 * same peer: two messages each way. */
#include "mpibench.h"

static int rank, size;
static char *send_buf[2], *recv_buf[2];

static void step(const struct args *a)
{
    compute(a->compute_us);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Request req[4];
    MPI_Irecv(recv_buf[0], a->size, MPI_BYTE, left, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(recv_buf[1], a->size, MPI_BYTE, right, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(send_buf[0], a->size, MPI_BYTE, right, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(send_buf[1], a->size, MPI_BYTE, left, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct args a = parse_args(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 2; i++) {
        send_buf[i] = calloc(a.size, 1);
        recv_buf[i] = calloc(a.size, 1);
    }
    run("halo", &a, step);
    finish();
    return 0;
}
