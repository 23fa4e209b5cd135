/* Allreduce: every iteration computes, then sums --size bytes of doubles
 * over all ranks (a collective: every rank waits for all of them). */
#include "mpibench.h"

static double *in, *out;
static int count;

static void step(const struct args *a)
{
    compute(a->compute_us);
    MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct args a = parse_args(argc, argv);
    count = a.size / sizeof(double) > 0 ? a.size / sizeof(double) : 1;
    in = calloc(count, sizeof(double));
    out = calloc(count, sizeof(double));
    run("allreduce", &a, step);
    free(in);
    free(out);
    finish();
    return 0;
}
