/* show_pid_target — a process that makes `numabind show --pid` work hard or lie:
 * names with terminal escapes, many threads, many anonymous mappings below its
 * first file mapping (so each thread's numa_maps must be walked far to find its policy),
 * optionally not dumpable. Prints "ready" when set up, then waits for stdin to close.
 *
 *   show_pid_target [--name TEXT] [--threads N] [--mappings M] [--nondumpable] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile int stop;
static const char *name = NULL;

static void *idle(void *arg) {
    (void)arg;
    if (name) pthread_setname_np(pthread_self(), name); /* at most 15 bytes: the kernel's limit */
    while (!stop) pause();
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 0, mappings = 0, nondumpable = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mappings") && i + 1 < argc) mappings = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nondumpable")) nondumpable = 1;
        else {
            fprintf(stderr, "unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (name) prctl(PR_SET_NAME, name, 0, 0, 0);
    /* Pages at low addresses come before the program's own (file) mappings in numa_maps;
     * alternate protections keep the kernel from merging them into one mapping. */
    const long page = sysconf(_SC_PAGESIZE);
    for (int m = 0; m < mappings; ++m) {
        void *want = (void *)(0x10000000UL + (unsigned long)m * 2 * (unsigned long)page);
        void *p = mmap(want, (size_t)page, m % 2 ? PROT_READ : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (m % 2 == 0) *(volatile char *)p = 1;
    }
    pthread_t t;
    for (int k = 0; k < threads; ++k) pthread_create(&t, NULL, idle, NULL);
    if (nondumpable) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}
