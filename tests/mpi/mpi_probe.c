/* mpi_probe: what an MPI rank sees after `numabind run` exec'd it.
 *
 * Prints one line per rank on stdout (flushed, one write):
 *   MPI_PROBE world_rank=R world_size=N local_rank=L local_size=M node=H cpus=LIST
 *             numabind_device=D numabind_cpus=C mode=X
 * local_rank/local_size come from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), i.e. from
 * MPI itself, independent of any launcher variable numabind may have used. cpus is the
 * kernel's Cpus_allowed_list of this process. Exit status 0 only when MPI_Init succeeded.
 * A failing MPI_Init makes Open MPI abort with its own message and a non-zero status.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void cpus_allowed(char *out, size_t n) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[4096];
    snprintf(out, n, "?");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = '\0';
            snprintf(out, n, "%s", v);
            break;
        }
    }
    fclose(f);
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

int main(int argc, char **argv) {
    char cpus[4096];
    /* Read before MPI_Init: the binding numabind left, untouched by the MPI library. */
    cpus_allowed(cpus, sizeof cpus);
    int rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "MPI_PROBE_ERROR MPI_Init failed (%d)\n", rc);
        return 3;
    }
    int rank = -1, size = -1, lrank = -1, lsize = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    /* A collective proves the ranks can talk to each other. */
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char after[4096];
    cpus_allowed(after, sizeof after);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    printf("MPI_PROBE world_rank=%d world_size=%d local_rank=%d local_size=%d rank_sum=%d node=%s "
           "cpus=%s cpus_after_init=%s numabind_device=%s numabind_cpus=%s mode=%s slurm_nodeid=%s\n",
           rank, size, lrank, lsize, sum, host, cpus, after, env_or("NUMABIND_DEVICE", "-"),
           env_or("NUMABIND_CPUS", "-"), env_or("NUMABIND_MODE", "-"), env_or("SLURM_NODEID", "-"));
    fflush(stdout);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
