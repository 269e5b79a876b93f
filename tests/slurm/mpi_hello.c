/* MPI probe for the SPANK tests: MPI_Init must still work under the plugin (PMIx). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
    int rank = -1, size = 0, local = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    char cpus[256] = "?", line[512];
    FILE* f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Cpus_allowed_list: %255s", cpus) == 1) break;
    if (f) fclose(f);
    int total = 0;
    MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("M rank=%d size=%d local=%d cpus=%s sum=%d\n", rank, size, local, cpus, total);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
