/* bind_threads_probe — numabind_bind() in a program whose threads fight it. Each scenario
 * binds, then reads back from the kernel what every thread got: sched_getaffinity(tid) and
 * the thread's own memory policy (first line of /proc/self/task/TID/numa_maps: the task
 * policy shows on a mapping without its own). A
 * "lie" is a thread the result does not list in threads_not_as_planned whose CPUs or policy
 * are not the plan's; every scenario must end with none, and with what it names below.
 *
 *   bind_threads_probe SCENARIO TOPOLOGY_XML
 *   spawn     a thread starts a short-lived thread every 300 us during 20 binds (mem=bind
 *             and mem=interleave in turn): every thread there after each bind is as planned
 *   sigwait   the program blocks SIGRTMAX-2 and SIGRTMAX-3 everywhere and consumes them with
 *             sigwaitinfo and a signalfd: numabind never sends them, every thread as planned
 *   blockall  one thread blocks every signal: the result lists exactly that thread
 *   handlers  after the first bind the program handles every real-time signal numabind could
 *             use: the second bind fires none of them and lists every other thread
 *   lateack   a thread that blocked everything during bind 1 unblocks during bind 2 (its late
 *             answer arrives then) while another blocks everything: bind 2 lists the second
 *   two       two threads call bind at once (different plans), 30 rounds: both succeed and
 *             every thread ends in one plan, never a mix
 * Prints "ok - ..." / "FAIL - ..." lines; exit 0 when all hold. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "numabind/numabind.h"

static const char *xml;
static int fails;

static void ok(int cond, const char *what, const char *detail) {
    printf("%s - %s%s%s\n", cond ? "ok  " : "FAIL", what, detail && *detail ? ": " : "", detail ? detail : "");
    if (!cond) ++fails;
    fflush(stdout);
}

static long gettid_(void) { return syscall(SYS_gettid); }
static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Binds as local rank `rank` of 2 with memory policy `mem`; returns the result JSON (malloc'd)
 * or NULL with the error printed. */
static char *bind_as(int rank, const char *mem) {
    char err[512] = "", r[8];
    numabind_options *o = numabind_options_new();
    snprintf(r, sizeof r, "%d", rank);
    numabind_options_set(o, "mode", "exclusive", err, sizeof err);
    numabind_options_set(o, "ntasks", "2", err, sizeof err);
    numabind_options_set(o, "local_rank", r, err, sizeof err);
    numabind_options_set(o, "topology", xml, err, sizeof err);
    numabind_options_set(o, "mem", mem, err, sizeof err);
    numabind_result *res = NULL;
    int st = numabind_bind(o, &res, err, sizeof err);
    numabind_options_free(o);
    if (st != 0) {
        printf("# bind(rank %d, mem=%s) failed: %s\n", rank, mem, err);
        return NULL;
    }
    char *json = strdup(numabind_result_json(res));
    numabind_result_free(res);
    return json;
}

/* The tids listed in threads_not_as_planned. */
static int listed(const char *json, long tid) {
    const char *p = strstr(json, "\"threads_not_as_planned\":[");
    if (!p) return 0;
    const char *end = strchr(p, ']');
    char want[40];
    snprintf(want, sizeof want, "\"tid\":%ld,", tid);
    const char *hit = strstr(p, want);
    return hit && hit < end;
}
static int listed_count(const char *json) {
    const char *p = strstr(json, "\"threads_not_as_planned\":[");
    if (!p) return -1;
    const char *end = strchr(p, ']');
    int n = 0;
    for (const char *q = strstr(p, "\"tid\":"); q && q < end; q = strstr(q + 1, "\"tid\":")) ++n;
    return n;
}

/* A thread's policy word ("bind:0", "interleave:0", "default") and CPU mask; policy "" when
 * the thread is gone. */
static void thread_state(long tid, char *policy, size_t n, cpu_set_t *cpus) {
    char path[64], line[512] = "";
    snprintf(path, sizeof path, "/proc/self/task/%ld/numa_maps", tid);
    FILE *f = fopen(path, "r");
    policy[0] = 0;
    if (f) {
        if (fgets(line, sizeof line, f)) {
            char *sp = strchr(line, ' ');
            if (sp) {
                size_t k = strcspn(sp + 1, " \n");
                snprintf(policy, n, "%.*s", (int)k, sp + 1);
            }
        }
        fclose(f);
    }
    CPU_ZERO(cpus);
    /* a thread that exited between the two reads is no thread to judge */
    if (sched_getaffinity((pid_t)tid, sizeof *cpus, cpus) != 0) policy[0] = 0;
}

static int all_tids(long *out, int max) {
    int n = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", getpid());
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max)
        if (e->d_name[0] != '.') out[n++] = atol(e->d_name);
    closedir(d);
    return n;
}

/* Lies of `json` for the plan (`policy_prefix` "bind"/"interleave", the caller's CPUs):
 * threads not listed whose state differs. */
static int lies(const char *json, const char *policy_prefix, const cpu_set_t *plan_cpus, char *detail, size_t dn) {
    long tids[4096];
    int n = all_tids(tids, 4096), lies = 0;
    detail[0] = 0;
    for (int i = 0; i < n; ++i) {
        char pol[64];
        cpu_set_t c;
        thread_state(tids[i], pol, sizeof pol, &c);
        if (!pol[0]) continue; /* exited */
        const int as_planned = strncmp(pol, policy_prefix, strlen(policy_prefix)) == 0 && CPU_EQUAL(&c, plan_cpus);
        if (!as_planned && !listed(json, tids[i])) {
            ++lies;
            size_t used = strlen(detail);
            if (used + 64 < dn) snprintf(detail + used, dn - used, "%s%ld:%s", used ? " " : "", tids[i], pol);
        }
    }
    return lies;
}

static void my_cpus(cpu_set_t *c) {
    CPU_ZERO(c);
    sched_getaffinity(0, sizeof *c, c);
}

/* ---------------------------------------------------------------- spawn */
static volatile int spawn_run = 1, spawn_pause = 0;
static int spawn_paused = 0; /* spawners that saw the pause (atomic add) */
static void *short_lived(void *arg) {
    (void)arg;
    sleep_us(60000); /* long enough to be read back after the bind that it lived through */
    return NULL;
}
static void *spawner(void *arg) {
    (void)arg;
    while (spawn_run) {
        if (spawn_pause) {
            __atomic_add_fetch(&spawn_paused, 1, __ATOMIC_SEQ_CST);
            while (spawn_pause) sleep_us(1000);
            __atomic_sub_fetch(&spawn_paused, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_create(&t, &a, short_lived, NULL);
        pthread_attr_destroy(&a);
        sleep_us(300);
    }
    return NULL;
}
static void scenario_spawn(void) {
    pthread_t s[1];
    for (int k = 0; k < 1; ++k) pthread_create(&s[k], NULL, spawner, NULL);
    int total_lies = 0, failed = 0, reported = 0;
    char detail[2048] = "";
    for (int round = 0; round < 20; ++round) {
        const char *mem = round % 2 ? "interleave" : "bind";
        char *json = bind_as(0, mem);
        if (!json) {
            ++failed;
            continue;
        }
        spawn_pause = 1; /* no thread starts while the states are read */
        while (__atomic_load_n(&spawn_paused, __ATOMIC_SEQ_CST) < 1) sleep_us(200);
        cpu_set_t plan;
        my_cpus(&plan);
        char d[512];
        int l = lies(json, mem, &plan, d, sizeof d);
        if (l && !detail[0]) snprintf(detail, sizeof detail, "round %d: %s", round, d);
        total_lies += l;
        reported += listed_count(json) > 0;
        if (listed_count(json) > 0) printf("# round %d lists: %.300s\n", round, strstr(json, "\"threads_not_as_planned\""));
        spawn_pause = 0;
        free(json);
    }
    spawn_run = 0;
    for (int k = 0; k < 1; ++k) pthread_join(s[k], NULL);
    sleep_us(100000); /* the last short-lived threads end before the next scenario */
    char what[160];
    snprintf(what, sizeof what, "spawn: 20 binds while a thread starts a thread every 300 us: %d failed, %d lies, %d with threads listed",
             failed, total_lies, reported);
    ok(failed == 0 && total_lies == 0, what, detail);
}

/* ---------------------------------------------------------------- sigwait */
static volatile int waiters_run = 1;
static volatile long consumed = 0;
static void *sigwaiter(void *arg) {
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMAX - 2);
    struct timespec ts = {0, 20000000};
    while (waiters_run)
        if (sigtimedwait(&s, NULL, &ts) > 0) ++consumed;
    return NULL;
}
static void *fdreader(void *arg) {
    int fd = *(int *)arg;
    struct signalfd_siginfo si;
    while (waiters_run)
        if (read(fd, &si, sizeof si) == (ssize_t)sizeof si) ++consumed;
    return NULL;
}
static void *idle(void *arg) {
    (void)arg;
    while (waiters_run) sleep_us(2000);
    return NULL;
}
static void scenario_sigwait(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMAX - 2);
    sigaddset(&s, SIGRTMAX - 3);
    pthread_sigmask(SIG_BLOCK, &s, NULL); /* every thread started from here blocks both */
    sigset_t only3;
    sigemptyset(&only3);
    sigaddset(&only3, SIGRTMAX - 3);
    int fd = signalfd(-1, &only3, SFD_NONBLOCK);
    pthread_t w, r, i1, i2;
    pthread_create(&w, NULL, sigwaiter, NULL);
    pthread_create(&r, NULL, fdreader, &fd);
    pthread_create(&i1, NULL, idle, NULL);
    pthread_create(&i2, NULL, idle, NULL);
    int total_lies = 0, failed = 0, reported = 0;
    char detail[1024] = "";
    for (int round = 0; round < 6; ++round) {
        const char *mem = round % 2 ? "interleave" : "bind";
        char *json = bind_as(0, mem);
        if (!json) {
            ++failed;
            continue;
        }
        cpu_set_t plan;
        my_cpus(&plan);
        char d[512];
        total_lies += lies(json, mem, &plan, d, sizeof d);
        if (d[0] && !detail[0]) snprintf(detail, sizeof detail, "%s", d);
        reported += listed_count(json);
        free(json);
    }
    sleep_us(50000);
    waiters_run = 0;
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    pthread_join(i1, NULL);
    pthread_join(i2, NULL);
    char what[200];
    snprintf(what, sizeof what,
             "sigwait: SIGRTMAX-2/-3 blocked and consumed by the program: %ld of numabind's signals consumed, "
             "%d failed, %d lies, %d threads listed",
             consumed, failed, total_lies, reported);
    ok(consumed == 0 && failed == 0 && total_lies == 0 && reported == 0, what, detail);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* ---------------------------------------------------------------- blockall / lateack */
static volatile int hold_run = 1;
static volatile long hold_tid[2];
static volatile int unblock_after_us[2] = {-1, -1}; /* >= 0: unblock that long after go[k] */
static volatile int go[2];
static void *holder(void *arg) {
    long k = (long)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    hold_tid[k] = gettid_();
    while (hold_run) {
        if (go[k] && unblock_after_us[k] >= 0) {
            sleep_us(unblock_after_us[k]);
            pthread_sigmask(SIG_UNBLOCK, &all, NULL);
            unblock_after_us[k] = -1;
        }
        sleep_us(1000);
    }
    return NULL;
}
static void scenario_blockall(void) {
    pthread_t h, i1;
    pthread_create(&h, NULL, holder, (void *)0);
    pthread_create(&i1, NULL, idle, NULL);
    while (!hold_tid[0]) sleep_us(1000);
    char *json = bind_as(0, "bind");
    cpu_set_t plan;
    my_cpus(&plan);
    char d[512] = "";
    int l = json ? lies(json, "bind", &plan, d, sizeof d) : -1;
    char pol[64];
    cpu_set_t c;
    thread_state(hold_tid[0], pol, sizeof pol, &c);
    char what[200];
    snprintf(what, sizeof what, "blockall: the thread blocking every signal (%ld, policy %s) is listed, and only it; %d lies",
             hold_tid[0], pol, l);
    ok(json && listed(json, hold_tid[0]) && listed_count(json) == 1 && l == 0, what, d);
    free(json);
    hold_run = 0;
    waiters_run = 0;
    pthread_join(h, NULL);
    pthread_join(i1, NULL);
}
static void scenario_lateack(void) {
    pthread_t t, u, i1;
    pthread_create(&t, NULL, holder, (void *)0);
    pthread_create(&i1, NULL, idle, NULL);
    while (!hold_tid[0]) sleep_us(1000);
    char *first = bind_as(0, "interleave"); /* T blocks everything: listed, its signal pending */
    pthread_create(&u, NULL, holder, (void *)1);
    while (!hold_tid[1]) sleep_us(1000);
    unblock_after_us[0] = 200000; /* T answers bind 1 late, 200 ms into bind 2 */
    go[0] = 1;
    char *second = bind_as(0, "bind");
    cpu_set_t plan;
    my_cpus(&plan);
    char d[512] = "";
    int l = second ? lies(second, "bind", &plan, d, sizeof d) : -1;
    char pol[64];
    cpu_set_t c;
    thread_state(hold_tid[1], pol, sizeof pol, &c);
    char what[240];
    snprintf(what, sizeof what,
             "lateack: bind 2 lists the thread that blocked everything throughout (%ld, policy %s) although a late answer "
             "to bind 1 arrived meanwhile; %d lies",
             hold_tid[1], pol, l);
    ok(first && second && listed(first, hold_tid[0]) && listed(second, hold_tid[1]) && strncmp(pol, "bind", 4) != 0 && l == 0,
       what, d);
    free(first);
    free(second);
    hold_run = 0;
    waiters_run = 0;
    pthread_join(t, NULL);
    pthread_join(u, NULL);
    pthread_join(i1, NULL);
}

/* ---------------------------------------------------------------- handlers */
static volatile long program_handler_runs = 0;
static void program_handler(int sig) {
    (void)sig;
    ++program_handler_runs;
}
static void scenario_handlers(void) {
    pthread_t i1, i2;
    pthread_create(&i1, NULL, idle, NULL);
    pthread_create(&i2, NULL, idle, NULL);
    char *first = bind_as(0, "bind");
    for (int sig = SIGRTMIN + 3; sig <= SIGRTMAX - 2; ++sig) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = program_handler;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
    char *second = bind_as(0, "interleave");
    cpu_set_t plan;
    my_cpus(&plan);
    char d[512] = "";
    int l = second ? lies(second, "interleave", &plan, d, sizeof d) : -1;
    char what[200];
    snprintf(what, sizeof what,
             "handlers: with every real-time signal handled by the program, bind 2 fired %ld of its handlers, "
             "listed %d thread(s); %d lies",
             program_handler_runs, second ? listed_count(second) : -1, l);
    ok(first && second && program_handler_runs == 0 && listed_count(second) == 2 && l == 0, what, d);
    free(first);
    free(second);
    waiters_run = 0;
    pthread_join(i1, NULL);
    pthread_join(i2, NULL);
}

/* ---------------------------------------------------------------- two */
struct binder {
    int rank;
    const char *mem;
    char *json;
    pthread_barrier_t *start;
};
static void *binder(void *arg) {
    struct binder *b = arg;
    pthread_barrier_wait(b->start);
    b->json = bind_as(b->rank, b->mem);
    return NULL;
}
static void scenario_two(void) {
    pthread_t i1, i2, i3;
    pthread_create(&i1, NULL, idle, NULL);
    pthread_create(&i2, NULL, idle, NULL);
    pthread_create(&i3, NULL, idle, NULL);
    int failed = 0, mixed = 0;
    char detail[1024] = "";
    for (int round = 0; round < 30; ++round) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        struct binder a = {0, "bind", NULL, &start}, b = {1, "interleave", NULL, &start};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, binder, &a);
        pthread_create(&tb, NULL, binder, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&start);
        if (!a.json || !b.json) ++failed;
        /* every thread (main included: bind() binds the whole process) in one plan: the same
         * CPUs and policy, and that policy one of the two */
        long tids[256];
        int n = all_tids(tids, 256);
        char first_pol[64] = "";
        cpu_set_t first_cpus;
        CPU_ZERO(&first_cpus);
        int mix = 0;
        for (int i = 0; i < n; ++i) {
            char pol[64];
            cpu_set_t c;
            thread_state(tids[i], pol, sizeof pol, &c);
            if (!pol[0]) continue;
            if (!first_pol[0]) {
                snprintf(first_pol, sizeof first_pol, "%s", pol);
                first_cpus = c;
            } else if (strcmp(pol, first_pol) != 0 || !CPU_EQUAL(&c, &first_cpus)) {
                mix = 1;
            }
        }
        if (strncmp(first_pol, "bind", 4) != 0 && strncmp(first_pol, "interleave", 10) != 0) mix = 1;
        if (mix && !detail[0]) snprintf(detail, sizeof detail, "round %d: threads in a mix of both plans", round);
        mixed += mix;
        free(a.json);
        free(b.json);
    }
    waiters_run = 0;
    pthread_join(i1, NULL);
    pthread_join(i2, NULL);
    pthread_join(i3, NULL);
    char what[160];
    snprintf(what, sizeof what, "two: 30 rounds of two threads binding at once: %d with a failed bind, %d mixed", failed,
             mixed);
    ok(failed == 0 && mixed == 0, what, detail);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s spawn|sigwait|blockall|handlers|lateack|two TOPOLOGY_XML\n", argv[0]);
        return 2;
    }
    xml = argv[2];
    const char *s = argv[1];
    if (!strcmp(s, "spawn")) scenario_spawn();
    else if (!strcmp(s, "sigwait")) scenario_sigwait();
    else if (!strcmp(s, "blockall")) scenario_blockall();
    else if (!strcmp(s, "handlers")) scenario_handlers();
    else if (!strcmp(s, "lateack")) scenario_lateack();
    else if (!strcmp(s, "two")) scenario_two();
    else {
        fprintf(stderr, "unknown scenario '%s'\n", s);
        return 2;
    }
    return fails ? 1 : 0;
}
