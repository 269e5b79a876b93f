/* nb_api_probe — a C program using only numabind.h, for the C API tests here and in the
 * multi-NUMA VM guest (which has no Python). It starts threads BEFORE binding, optionally
 * touches memory on a chosen node first, calls numabind_bind, then reads back from the
 * kernel what every thread got: /proc/self/task/TID/status (Cpus_allowed_list),
 * /proc/self/task/TID/numa_maps (the thread's memory policy) and move_pages(2) for the
 * touched buffer.
 *
 * nb_api_probe [--threads N] [--touch-mib M --touch-node K] [--reset-thread]
 *              [--hold FILE] [KEY=VALUE]...      (KEY: numabind_options_set keys)
 * Output, one key=value per line: status=, error=, result=<json>, thread=TID cpus=.. policy=..,
 * buffer_pages_by_node=N0=..,N1=.., buffer_numa_maps=<line>, reset_tid=TID, bind_ms= (numabind_bind's
 * wall time).
 * --reset-thread: after binding, one thread sets its own affinity back to every CPU the
 * process may use (as OpenMP runtimes do). --hold FILE: then write "ready" to FILE and wait
 * until stdin reaches EOF (for `numabind show --pid`). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "numabind/numabind.h"

#define MPOL_DEFAULT_ 0
#define MPOL_BIND_ 2

static volatile int stop_threads = 0;
static pthread_mutex_t reset_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reset_cond = PTHREAD_COND_INITIALIZER;
static int reset_wanted = 0, reset_done = 0;
static long reset_tid = 0;

static void *worker(void *arg) {
    long index = (long)arg;
    while (!stop_threads) {
        if (index == 0) {
            pthread_mutex_lock(&reset_lock);
            if (reset_wanted && !reset_done) {
                /* Back to everything the process may use: the cpuset, read from /proc/self/status. */
                cpu_set_t all;
                CPU_ZERO(&all);
                long n = sysconf(_SC_NPROCESSORS_CONF);
                for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
                sched_setaffinity(0, sizeof all, &all);
                reset_tid = syscall(SYS_gettid);
                reset_done = 1;
                pthread_cond_broadcast(&reset_cond);
            }
            pthread_mutex_unlock(&reset_lock);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void read_field(const char *path, const char *field, char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096];
    size_t len = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            char *v = line + len + 1;
            while (*v == ' ' || *v == '\t') ++v;
            v[strcspn(v, "\n")] = '\0';
            snprintf(out, size, "%s", v);
            break;
        }
    }
    fclose(f);
}

/* The thread's own memory policy: the policy column of its first file mapping. */
static void thread_policy(const char *tid, char *out, size_t size) {
    char path[512], line[8192];
    snprintf(path, sizeof path, "/proc/self/task/%s/numa_maps", tid);
    snprintf(out, size, "?");
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, " file=")) continue;
        char *p = strchr(line, ' ');
        if (!p) break;
        ++p;
        char *end = strstr(p, " file=");
        *end = '\0';
        snprintf(out, size, "%s", p);
        break;
    }
    fclose(f);
}

static void print_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512], cpus[4096], policy[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        read_field(path, "Cpus_allowed_list", cpus, sizeof cpus);
        thread_policy(e->d_name, policy, sizeof policy);
        printf("thread=%s cpus=%s policy=%s\n", e->d_name, cpus, policy);
    }
    closedir(d);
}

static void print_buffer(char *buf, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    size_t count = bytes / (size_t)page;
    void **pages = calloc(count, sizeof *pages);
    int *status = calloc(count, sizeof *status);
    int per_node[64] = {0}, other = 0;
    for (size_t i = 0; i < count; ++i) pages[i] = buf + i * (size_t)page;
    /* nodes == NULL: move_pages only reports where each page is. */
    if (syscall(SYS_move_pages, 0, count, pages, NULL, status, 0) != 0) {
        printf("buffer_pages_by_node=error:%s\n", strerror(errno));
    } else {
        for (size_t i = 0; i < count; ++i) {
            if (status[i] >= 0 && status[i] < 64) per_node[status[i]]++;
            else other++;
        }
        printf("buffer_pages_by_node=");
        int first = 1;
        for (int n = 0; n < 64; ++n)
            if (per_node[n]) {
                printf("%sN%d=%d", first ? "" : ",", n, per_node[n]);
                first = 0;
            }
        if (other) printf("%sunmapped=%d", first ? "" : ",", other);
        printf("\n");
    }
    free(pages);
    free(status);
    char want[32], line[8192];
    snprintf(want, sizeof want, "%lx ", (unsigned long)buf);
    FILE *f = fopen("/proc/self/numa_maps", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            line[strcspn(line, "\n")] = '\0';
            printf("buffer_numa_maps=%s\n", line);
        }
    }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    int nthreads = 0, touch_mib = 0, touch_node = -1, reset = 0;
    const char *hold = NULL;
    numabind_options *opts = numabind_options_new();
    char err[512] = "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("version=%s api=%d\n", numabind_version(), numabind_api_version());
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--touch-mib") && i + 1 < argc) touch_mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--touch-node") && i + 1 < argc) touch_node = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reset-thread")) reset = 1;
        else if (!strcmp(argv[i], "--hold") && i + 1 < argc) hold = argv[++i];
        else {
            char *eq = strchr(argv[i], '=');
            if (!eq) {
                fprintf(stderr, "nb_api_probe: bad argument %s\n", argv[i]);
                return 64;
            }
            *eq = '\0';
            int st = numabind_options_set(opts, argv[i], eq + 1, err, sizeof err);
            if (st != NUMABIND_OK) {
                printf("status=%d\nerror=%s\n", st, err);
                return 0;
            }
        }
    }
    pthread_t *threads = calloc((size_t)(nthreads + 1), sizeof *threads);
    for (long t = 0; t < nthreads; ++t) pthread_create(&threads[t], NULL, worker, (void *)t);

    char *buf = NULL;
    size_t bytes = (size_t)touch_mib << 20;
    if (touch_mib > 0) {
        unsigned long mask[64] = {0};
        if (touch_node >= 0) {
            mask[touch_node / 64] = 1UL << (touch_node % 64);
            if (syscall(SYS_set_mempolicy, MPOL_BIND_, mask, 4096) != 0) printf("touch_policy_error=%s\n", strerror(errno));
        }
        buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (size_t i = 0; i < bytes; i += 4096) buf[i] = 1;
        syscall(SYS_set_mempolicy, MPOL_DEFAULT_, NULL, 0);
        printf("before:\n");
        print_buffer(buf, bytes);
    }

    numabind_result *res = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = numabind_bind(opts, &res, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("status=%d\nerror=%s\n", st, st == NUMABIND_OK ? "" : err);
    printf("bind_ms=%.1f\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    if (res) {
        printf("result=%s\nresult_threads=%d\nresult_pages_moved=%ld\n", numabind_result_json(res),
               numabind_result_threads(res), numabind_result_pages_moved(res));
        numabind_result_free(res);
    }
    numabind_options_free(opts);
    if (reset && nthreads > 0) {
        pthread_mutex_lock(&reset_lock);
        reset_wanted = 1;
        while (!reset_done) pthread_cond_wait(&reset_cond, &reset_lock);
        pthread_mutex_unlock(&reset_lock);
        printf("reset_tid=%ld\n", reset_tid);
    }
    printf("after:\n");
    print_threads();
    if (buf) print_buffer(buf, bytes);
    if (hold) {
        FILE *f = fopen(hold, "w");
        if (f) {
            fputs("ready\n", f);
            fclose(f);
        }
        char c;
        while (read(0, &c, 1) > 0) {
        }
    }
    stop_threads = 1;
    for (int t = 0; t < nthreads; ++t) pthread_join(threads[t], NULL);
    free(threads);
    return 0;
}
