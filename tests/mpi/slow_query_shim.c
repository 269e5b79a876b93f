/* LD_PRELOAD shim for tests/mpi (scenario mpirun-pmix-slow-query): holds the PMIx connection
 * of one rank's binder query open for a while before PMIx_Finalize, so that the other local
 * ranks' programs are already inside MPI_Init's fence when that connection closes -- the
 * ordering that PMIx servers up to 5.0.x mishandle (openpmix#3931: the finalized client is
 * pruned from the fence under way, and the late rank's MPI_Init then waits forever).
 *   NB_SLOW_QUERY_RANK  the PMIX_RANK whose query is held
 *   NB_SLOW_QUERY_MS    for how long (default 1500)
 * Acts only in processes named "numabind" (the binder and its forked query child), never in
 * the MPI program exec'd afterwards, which inherits LD_PRELOAD. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int is_the_binder(void) {
    char comm[32] = {0};
    FILE* f = fopen("/proc/self/comm", "r");
    if (!f) return 0;
    if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return strcmp(comm, "numabind") == 0;
}

pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo) {
    pmix_status_t (*real)(const pmix_info_t[], size_t) =
        (pmix_status_t(*)(const pmix_info_t[], size_t))dlsym(RTLD_NEXT, "PMIx_Finalize");
    const char* slow = getenv("NB_SLOW_QUERY_RANK");
    const char* me = getenv("PMIX_RANK");
    if (slow && me && strcmp(slow, me) == 0 && is_the_binder()) {
        const char* ms_text = getenv("NB_SLOW_QUERY_MS");
        long ms = ms_text ? strtol(ms_text, NULL, 10) : 1500;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    return real ? real(info, ninfo) : PMIX_ERR_NOT_SUPPORTED;
}
