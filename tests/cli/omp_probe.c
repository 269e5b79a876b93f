/* What an OpenMP program sees inside its binding: its places as the runtime
 * parsed them, and from each thread of a parallel region its place and the CPU it runs on.
 * Compiled by the tests with -fopenmp (libgomp). Output lines:
 *   places N
 *   place P procs A,B,...
 *   thread T of N place P cpus C,D        (every CPU the thread was seen on, 200 samples) */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>

int main(void) {
    const int nplaces = omp_get_num_places();
    printf("places %d\n", nplaces);
    for (int p = 0; p < nplaces; ++p) {
        int ids[1024];
        const int n = omp_get_place_num_procs(p);
        if (n > 1024) return 2;
        omp_get_place_proc_ids(p, ids);
        printf("place %d procs ", p);
        for (int i = 0; i < n; ++i) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
    fflush(stdout);
#pragma omp parallel
    {
        /* Work a little between samples: a thread that could migrate gets the chance. */
        static __thread char seen[1024];
        volatile double x = 0;
        for (int i = 0; i < 200; ++i) {
            for (int k = 0; k < 10000; ++k) x += k;
            const int cpu = sched_getcpu();
            if (cpu >= 0 && cpu < 1024) seen[cpu] = 1;
        }
#pragma omp critical
        {
            printf("thread %d of %d place %d cpus ", omp_get_thread_num(), omp_get_num_threads(), omp_get_place_num());
            const char* sep = "";
            for (int c = 0; c < 1024; ++c)
                if (seen[c]) printf("%s%d", sep, c), sep = ",";
            printf("\n");
        }
    }
    return 0;
}
