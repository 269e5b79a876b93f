/* What one page fault costs on this machine, for bench/step_overhead.sh: the step's cost is
 * mostly faults (each page slurmstepd or a task touches for the first time), and their price
 * differs by two orders between bare metal and some virtual machines.
 *   file: first read of a page-cache page of a file mapping, one per 64 KB (the kernel maps
 *         the pages around a faulting one, as for a library's code)
 *   anon: first write of a private anonymous page (a heap or stack page)
 *   copy: a write, in a forked child, to a page its parent had written (copy-on-write)
 * Usage: fault_cost FILE (at least 1 MiB, e.g. libc); prints medians in microseconds. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { kRounds = 9, kAnonPages = 1024 };

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (1 << 20)) {
        fprintf(stderr, "%s: need a readable file of at least 1 MiB\n", argv[1]);
        return 2;
    }
    const size_t flen = (size_t)st.st_size & ~(size_t)0xffff, window = 65536;
    const long page = sysconf(_SC_PAGESIZE);
    const size_t alen = (size_t)kAnonPages * (size_t)page;
    double file[kRounds], anon[kRounds], copy[kRounds];
    int pipefd[2];
    if (pipe(pipefd) != 0) return 1;
    for (int r = 0; r < kRounds; ++r) {
        volatile const char *f = mmap(NULL, flen, PROT_READ, MAP_PRIVATE, fd, 0);
        char *a = mmap(NULL, alen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (f == MAP_FAILED || a == MAP_FAILED) return 1;
        char sink = 0;
        double t0 = now_us();
        for (size_t o = 0; o < flen; o += window) sink ^= f[o];
        file[r] = (now_us() - t0) / (double)(flen / window);
        t0 = now_us();
        for (size_t o = 0; o < alen; o += (size_t)page) a[o] = sink;
        anon[r] = (now_us() - t0) / kAnonPages;
        pid_t pid = fork();
        if (pid == 0) {
            t0 = now_us();
            for (size_t o = 0; o < alen; o += (size_t)page) a[o] = 1;
            double c = (now_us() - t0) / kAnonPages;
            (void)!write(pipefd[1], &c, sizeof c);
            _exit(0);
        }
        if (pid < 0 || read(pipefd[0], &copy[r], sizeof copy[r]) != (ssize_t)sizeof copy[r]) return 1;
        waitpid(pid, NULL, 0);
        munmap((void *)f, flen);
        munmap(a, alen);
    }
    qsort(file, kRounds, sizeof(double), cmp);
    qsort(anon, kRounds, sizeof(double), cmp);
    qsort(copy, kRounds, sizeof(double), cmp);
    printf("page fault, median of %d rounds: file %.2f us, anon %.2f us, copy-on-write %.2f us\n", kRounds,
           file[kRounds / 2], anon[kRounds / 2], copy[kRounds / 2]);
    return 0;
}
