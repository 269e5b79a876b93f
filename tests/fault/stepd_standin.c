// A stand-in for slurmstepd: dlopens the built spank_numabind.so, provides the
// spank_* and slurm_* symbols it imports, calls its hooks in Slurm's order or a broken one,
// and fails the N-th allocation (malloc, calloc, realloc: interposed here, so they fail
// for the plugin, its static libstdc++ (operator new calls malloc), hwloc and libc alike),
// for every N from 1 to the last allocation the hooks make.
//
//   stepd_standin PLUGIN.so SCENARIO [--option VALUE] [--no-gpus] [--check-logs] [--only N] [-v]
//                 [-- plugstack args...]
//
// SCENARIO: slurm         init, init_post_opt, then per task (forked) task_init, then exit
//           exit-first    init, init_post_opt, exit, then the tasks' task_init
//           no-post-opt   init, then the tasks' task_init (init_post_opt never ran)
// --option VALUE: --numa-binding=VALUE as slurmstepd passes it (option callback, remote).
// --no-gpus: the job has no SLURM_STEP_GPUS. --only N: one run failing allocation N, in full.
// --check-logs: every slurm_* message must be one line of printable text, at most 1024
// bytes (user-supplied text escaped and capped).
//
// Checked for every N (and once without a failure): no process dies of a signal (a C++
// exception reaching these C frames aborts), and after task_init returns 0 each task is
// either bound exactly as NUMABIND_MODE/CPUS/MEMS/MEM_POLICY (set with spank_setenv) say,
// read back with sched_getaffinity and get_mempolicy, or, with NUMABIND_MODE absent or
// "none", exactly as it was before task_init. Exit 0 when all hold, 1 otherwise.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

// ---- allocation failure injection -------------------------------------------------------
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);

static long alloc_count;    // allocations since arming
static long fail_at;        // the one to fail (0: none)
static int armed;

static int fail_this_one(void) {
    if (!armed) return 0;
    return ++alloc_count == fail_at;
}
void* malloc(size_t n) {
    if (fail_this_one()) return errno = ENOMEM, NULL;
    return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
    if (fail_this_one()) return errno = ENOMEM, NULL;
    return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
    if (fail_this_one()) return errno = ENOMEM, NULL;
    return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }

// ---- state shared by the driver, the step process and its tasks ---------------------------
enum { kMaxLog = 64 * 1024, kMaxTasks = 2 };
struct Shared {
    long max_count;            // the most allocations any process of a run made
    int task_verdict[kMaxTasks];
    char task_detail[kMaxTasks][512];
    char crash_lib[128];       // the library a fatal signal came from (see on_fatal)
    int log_bad;               // a message broke --check-logs
    char log_example[600];
};
static struct Shared* shared;
static int verbose;
static int check_logs;

static void note_count(void) {
    if (alloc_count > shared->max_count) shared->max_count = alloc_count;
}

// Which library a fatal signal came from: the first frame of the interrupted code that is
// neither libc nor this program (a NULL dereference inside hwloc, an assert of hwloc's, or
// std::terminate in the plugin's static libstdc++). Test code: not async-signal-safe.
static const char* library_of(void* pc) {
    Dl_info info;
    if (!dladdr(pc, &info) || !info.dli_fname) return "?";
    const char* slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}
static char self_name[128];
static void on_fatal(int sig) {
    armed = 0;
    void* frames[64];
    const int n = backtrace(frames, 64);
    const char* lib = "?";
    for (int i = 1; i < n; ++i) {
        const char* l = library_of(frames[i]);
        if (strncmp(l, "libc.so", 7) == 0 || strcmp(l, self_name) == 0 || strcmp(l, "?") == 0) continue;
        lib = l;
        break;
    }
    if (shared && !shared->crash_lib[0]) snprintf(shared->crash_lib, sizeof shared->crash_lib, "%s", lib);
    signal(sig, SIG_DFL);
    raise(sig);
}

// ---- the SPANK API, as slurmstepd provides it ---------------------------------------------
struct spank_handle {
    int task;  // local task id, -1 in slurmstepd itself
};
static struct spank_handle step_handle = {-1};
static struct spank_option* registered;

enum { kMaxEnv = 32 };
static char env_name[kMaxEnv][64];
static char env_value[kMaxEnv][4096];
static int env_count;

static const char* task_env(const char* name) {
    for (int i = 0; i < env_count; ++i)
        if (strcmp(env_name[i], name) == 0) return env_value[i];
    return NULL;
}

spank_err_t spank_setenv(spank_t sp, const char* var, const char* val, int overwrite) {
    (void)sp;
    if (!var || !val) return ESPANK_BAD_ARG;
    for (int i = 0; i < env_count; ++i) {
        if (strcmp(env_name[i], var) == 0) {
            if (!overwrite) return ESPANK_ENV_EXISTS;
            snprintf(env_value[i], sizeof env_value[i], "%s", val);
            return ESPANK_SUCCESS;
        }
    }
    if (env_count == kMaxEnv || strlen(var) >= sizeof env_name[0]) return ESPANK_ERROR;
    snprintf(env_name[env_count], sizeof env_name[0], "%s", var);
    snprintf(env_value[env_count], sizeof env_value[0], "%s", val);
    ++env_count;
    return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char* var) {
    (void)sp;
    for (int i = 0; i < env_count; ++i)
        if (strcmp(env_name[i], var) == 0) env_name[i][0] = '\0';
    return ESPANK_SUCCESS;
}

static int no_gpus;  // --no-gpus: a step without SLURM_STEP_GPUS

// The job's environment as slurmstepd has it: the step's two GPUs (unless --no-gpus).
spank_err_t spank_getenv(spank_t sp, const char* var, char* buf, int len) {
    (void)sp;
    const char* value = NULL;
    if (strcmp(var, "SLURM_STEP_GPUS") == 0 && !no_gpus) value = "0,1";
    if (!value) return ESPANK_ENV_NOEXIST;
    if ((int)strlen(value) >= len) return ESPANK_NOSPACE;
    strcpy(buf, value);
    return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...) {
    va_list ap;
    va_start(ap, item);
    spank_err_t rc = ESPANK_SUCCESS;
    switch (item) {
        case S_JOB_STEPID: *va_arg(ap, uint32_t*) = 0; break;
        case S_JOB_LOCAL_TASK_COUNT: *va_arg(ap, uint32_t*) = kMaxTasks; break;
        case S_TASK_ID:
            if (sp->task < 0) rc = ESPANK_NOT_TASK;
            else *va_arg(ap, int*) = sp->task;
            break;
        case S_TASK_GLOBAL_ID:
            if (sp->task < 0) rc = ESPANK_NOT_TASK;
            else *va_arg(ap, uint32_t*) = (uint32_t)sp->task;
            break;
        default: rc = ESPANK_BAD_ARG; break;
    }
    va_end(ap);
    return rc;
}

spank_err_t spank_option_register(spank_t sp, struct spank_option* opt) {
    (void)sp;
    registered = opt;
    return ESPANK_SUCCESS;
}

spank_err_t spank_option_getopt(spank_t sp, struct spank_option* opt, char** optarg) {
    (void)sp, (void)opt, (void)optarg;
    return ESPANK_ERROR;
}

int spank_remote(spank_t sp) { return sp != NULL; }
spank_context_t spank_context(void) { return S_CTX_REMOTE; }
int spank_symbol_supported(const char* symbol) { return symbol != NULL; }
const char* spank_strerror(spank_err_t err) { return err == ESPANK_SUCCESS ? "Success" : "Generic error"; }

// slurmd's log: checked with --check-logs, shown with -v.
static void log_line(const char* level, const char* fmt, va_list ap) {
    static char msg[kMaxLog];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (verbose) dprintf(2, "[slurm_%s] %s\n", level, msg);
    if (!check_logs) return;
    size_t n = strlen(msg);
    int bad = n > 1024;
    for (size_t i = 0; i < n && !bad; ++i)
        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) bad = 1;
    if (bad && !shared->log_bad) {
        shared->log_bad = 1;
        snprintf(shared->log_example, sizeof shared->log_example, "%zu bytes: %.500s", n, msg);
    }
}
#define LOG_FN(name)                                  \
    void slurm_##name(const char* fmt, ...) {         \
        va_list ap;                                   \
        va_start(ap, fmt);                            \
        log_line(#name, fmt, ap);                     \
        va_end(ap);                                   \
    }
LOG_FN(error)
LOG_FN(info)
LOG_FN(verbose)
LOG_FN(debug)
LOG_FN(debug2)
LOG_FN(debug3)
LOG_FN(spank_log)

// ---- placement, as the kernel reports it --------------------------------------------------
struct Placement {
    cpu_set_t cpus;
    int mode;
    unsigned long nodes[16];  // 1024 nodes
};

static void read_placement(struct Placement* p) {
    memset(p, 0, sizeof *p);
    sched_getaffinity(0, sizeof p->cpus, &p->cpus);
    get_mempolicy(&p->mode, p->nodes, 1024, NULL, 0);
}

static int same_placement(const struct Placement* a, const struct Placement* b) {
    return CPU_EQUAL(&a->cpus, &b->cpus) && a->mode == b->mode &&
           (a->mode == MPOL_DEFAULT || memcmp(a->nodes, b->nodes, sizeof a->nodes) == 0);
}

// "0-3,8" into a CPU set; 0 when malformed.
static int parse_list(const char* s, cpu_set_t* out) {
    CPU_ZERO(out);
    if (!s || !*s) return 1;
    while (*s) {
        char* end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0 || a >= CPU_SETSIZE) return 0;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a || b >= CPU_SETSIZE) return 0;
        }
        for (long c = a; c <= b; ++c) CPU_SET(c, out);
        if (*end == ',') ++end;
        else if (*end) return 0;
        s = end;
    }
    return 1;
}

// Does the task have what NUMABIND_* say? Returns "" when it does, else why not.
static const char* check_reported(const struct Placement* now, const struct Placement* before, char* why, size_t len) {
    const char* cpus = task_env("NUMABIND_CPUS");
    const char* mems = task_env("NUMABIND_MEMS");
    const char* pol = task_env("NUMABIND_MEM_POLICY");
    cpu_set_t want;
    if (!cpus || !mems || !pol) return snprintf(why, len, "NUMABIND_MODE set but CPUS/MEMS/MEM_POLICY missing"), why;
    if (!parse_list(cpus, &want)) return snprintf(why, len, "NUMABIND_CPUS '%s' malformed", cpus), why;
    if (!CPU_EQUAL(&want, &now->cpus)) return snprintf(why, len, "NUMABIND_CPUS=%s but the affinity differs", cpus), why;
    cpu_set_t nodes;  // node ids fit a cpu_set_t's range here
    if (!parse_list(mems, &nodes)) return snprintf(why, len, "NUMABIND_MEMS '%s' malformed", mems), why;
    int want_mode;
    if (strcmp(pol, "none") == 0) {
        if (now->mode != before->mode) return snprintf(why, len, "MEM_POLICY=none but the policy changed"), why;
        return "";
    } else if (strcmp(pol, "bind") == 0) {
        want_mode = MPOL_BIND;
    } else if (strcmp(pol, "interleave") == 0) {
        want_mode = MPOL_INTERLEAVE;
    } else if (strcmp(pol, "prefer") == 0) {
        want_mode = CPU_COUNT(&nodes) > 1 ? 5 /* MPOL_PREFERRED_MANY */ : MPOL_PREFERRED;
        if (now->mode == MPOL_PREFERRED) want_mode = MPOL_PREFERRED;  // kernel without preferred-many
    } else {
        return snprintf(why, len, "NUMABIND_MEM_POLICY '%s' unknown", pol), why;
    }
    if (now->mode != want_mode) return snprintf(why, len, "MEM_POLICY=%s but kernel mode %d", pol, now->mode), why;
    for (int n = 0; n < 1024; ++n) {
        const int in_kernel = (now->nodes[n / 64] >> (n % 64)) & 1;
        if (in_kernel != (n < CPU_SETSIZE && CPU_ISSET(n, &nodes)) && !(want_mode == MPOL_PREFERRED && !in_kernel))
            return snprintf(why, len, "NUMABIND_MEMS=%s but the policy's node %d differs", mems, n), why;
    }
    return "";
}

// ---- one run: the step's hooks, its tasks forked -----------------------------------------
typedef int (*hook_f)(spank_t, int, char**);
static hook_f hook_init, hook_post_opt, hook_user_init, hook_task_priv, hook_task_init, hook_task_exit, hook_exit;
static int plug_ac;
static char** plug_av;
static const char* option_value;

enum Verdict { kBound = 1, kAsBefore, kRefused, kLie };

static void run_task(int task) {
    struct spank_handle h = {task};
    struct Placement before, after;
    armed = 0;
    if (!verbose) {  // the plugin's task_stderr lines (srun would relay them to the user)
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) dup2(null_fd, 2), close(null_fd);
    }
    read_placement(&before);
    armed = 1;
    if (hook_task_priv) hook_task_priv(&h, plug_ac, plug_av);
    int rc = hook_task_init ? hook_task_init(&h, plug_ac, plug_av) : 0;
    armed = 0;
    note_count();
    read_placement(&after);
    const char* mode = task_env("NUMABIND_MODE");
    char why[400] = "";
    int verdict;
    if (rc != 0) {
        verdict = kRefused;  // Slurm kills the task before exec: its placement does not matter
    } else if (mode && strcmp(mode, "none") != 0) {
        verdict = *check_reported(&after, &before, why, sizeof why) ? kLie : kBound;
    } else if (!same_placement(&after, &before)) {
        verdict = kLie;
        snprintf(why, sizeof why, "NUMABIND_MODE=%s but the task is no longer as before", mode ? mode : "(unset)");
    } else {
        verdict = kAsBefore;
    }
    shared->task_verdict[task] = verdict;
    snprintf(shared->task_detail[task], sizeof shared->task_detail[task], "task %d: rc %d, %s", task, rc, why);
    _exit(0);
}

static int wait_child(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

static const char* scenario;

static void run_step(void) {
    spank_t sp = &step_handle;
    armed = 1;
    int rc = hook_init(sp, plug_ac, plug_av);
    if (rc == 0 && option_value && registered && registered->cb) registered->cb(registered->val, option_value, 1);
    int exited = 0;
    if (strcmp(scenario, "no-post-opt") != 0) {
        hook_post_opt(sp, plug_ac, plug_av);
        if (hook_user_init) hook_user_init(sp, plug_ac, plug_av);
    }
    if (strcmp(scenario, "exit-first") == 0) {
        hook_exit(sp, plug_ac, plug_av);
        exited = 1;
    }
    // All tasks at once, as slurmstepd forks them: the plugin's tasks wait for each other
    // (one node plan per step), so running them one after another would time out.
    pid_t pids[kMaxTasks];
    for (int t = 0; t < kMaxTasks; ++t) {
        pids[t] = fork();
        if (pids[t] == 0) run_task(t);
    }
    for (int t = 0; t < kMaxTasks; ++t) {
        int status = wait_child(pids[t]);
        if (status < 0 || !WIFEXITED(status)) {
            shared->task_verdict[t] = -(WIFSIGNALED(status) ? WTERMSIG(status) : 255);
        }
        if (hook_task_exit) {
            struct spank_handle h = {t};
            hook_task_exit(&h, plug_ac, plug_av);
        }
    }
    if (!exited) hook_exit(sp, plug_ac, plug_av);
    armed = 0;
    note_count();
    _exit(0);
}

struct Tally {
    long crashes, lies, bound, as_before, refused, outside;
};

// A crash of hwloc or libxml2 on a failed allocation (hwloc 2.9 does not check all of its
// mallocs), or the runtime linker's "out of memory" exit (127) while resolving a symbol:
// slurmstepd dies the same way whatever its plugins do (Slurm's own xmalloc aborts on
// failure). Tallied and reported, not failures of numabind.
static int outside_numabind(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 127;
    return strncmp(shared->crash_lib, "libhwloc", 8) == 0 || strncmp(shared->crash_lib, "libxml2", 7) == 0;
}

// One run failing allocation `n` (0: none). Returns 0, or 1 when something broke.
static int run_once(long n, struct Tally* t) {
    memset(shared, 0, sizeof *shared);
    fail_at = n;
    alloc_count = 0;
    pid_t pid = fork();
    if (pid == 0) run_step();
    int status = wait_child(pid);
    int broke = 0;
    if (status >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && outside_numabind(status)) {
        ++t->outside;
        if (verbose) fprintf(stderr, "%s: N=%ld: died in %s (outside numabind)\n", scenario, n,
                             WIFEXITED(status) ? "the runtime linker" : shared->crash_lib);
        return 0;
    }
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ++t->crashes;
        broke = 1;
        fprintf(stderr, "%s: N=%ld: the step process died (%s %d, in %s)\n", scenario, n,
                WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                shared->crash_lib[0] ? shared->crash_lib : "?");
    }
    for (int k = 0; k < kMaxTasks; ++k) {
        int v = shared->task_verdict[k];
        if (v < 0 && (strncmp(shared->crash_lib, "libhwloc", 8) == 0 || strncmp(shared->crash_lib, "libxml2", 7) == 0)) {
            ++t->outside;
        } else if (v < 0) {
            ++t->crashes;
            broke = 1;
            fprintf(stderr, "%s: N=%ld: task %d died (signal %d, in %s)\n", scenario, n, k, -v,
                    shared->crash_lib[0] ? shared->crash_lib : "?");
        } else if (v == kLie) {
            ++t->lies;
            broke = 1;
            fprintf(stderr, "%s: N=%ld: %s\n", scenario, n, shared->task_detail[k]);
        } else if (v == kBound) {
            ++t->bound;
        } else if (v == kAsBefore) {
            ++t->as_before;
        } else if (v == kRefused) {
            ++t->refused;
            fprintf(stderr, "%s: N=%ld: note: %s (task_init failed: a required plugin kills the task)\n", scenario, n,
                    shared->task_detail[k]);
        }
    }
    if (check_logs && shared->log_bad) {
        broke = 1;
        fprintf(stderr, "%s: N=%ld: a log message is not one escaped line of at most 1024 bytes: %s\n", scenario, n,
                shared->log_example);
    }
    return broke;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PLUGIN.so slurm|exit-first|no-post-opt [--option V] [--check-logs] [-v] [-- ARGS]\n",
                argv[0]);
        return 2;
    }
    scenario = argv[2];
    if (strcmp(scenario, "slurm") && strcmp(scenario, "exit-first") && strcmp(scenario, "no-post-opt")) {
        fprintf(stderr, "unknown scenario '%s' (valid: slurm, exit-first, no-post-opt)\n", scenario);
        return 2;
    }
    int i = 3;
    long only = -1;
    for (; i < argc; ++i) {
        if (strcmp(argv[i], "--option") == 0 && i + 1 < argc) option_value = argv[++i];
        else if (strcmp(argv[i], "--check-logs") == 0) check_logs = 1;
        else if (strcmp(argv[i], "--no-gpus") == 0) no_gpus = 1;
        else if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = atol(argv[++i]);
        else if (strcmp(argv[i], "--") == 0) { ++i; break; }
        else { fprintf(stderr, "unknown argument '%s'\n", argv[i]); return 2; }
    }
    plug_ac = argc - i;
    plug_av = argv + i;

    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return perror("mmap"), 2;
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) return fprintf(stderr, "dlopen: %s\n", dlerror()), 2;
    hook_init = (hook_f)dlsym(plugin, "slurm_spank_init");
    hook_post_opt = (hook_f)dlsym(plugin, "slurm_spank_init_post_opt");
    hook_user_init = (hook_f)dlsym(plugin, "slurm_spank_user_init");
    hook_task_priv = (hook_f)dlsym(plugin, "slurm_spank_task_init_privileged");
    hook_task_init = (hook_f)dlsym(plugin, "slurm_spank_task_init");
    hook_task_exit = (hook_f)dlsym(plugin, "slurm_spank_task_exit");
    hook_exit = (hook_f)dlsym(plugin, "slurm_spank_exit");
    if (!hook_init || !hook_post_opt || !hook_task_init || !hook_exit) return fprintf(stderr, "hooks missing\n"), 2;

    snprintf(self_name, sizeof self_name, "%s", library_of((void*)main));
    void* warm[4];
    backtrace(warm, 4);  // loads libgcc_s now, not in a signal handler under a failed malloc
    for (int sig = 1; sig < 32; ++sig)
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT || sig == SIGFPE || sig == SIGILL) signal(sig, on_fatal);
    struct Tally t = {0, 0, 0, 0, 0, 0};
    if (only >= 0) {  // one run, said in full (debugging a failure the sweep reported)
        int rc = run_once(only, &t);
        printf("N=%ld: %ld allocations; bound %ld, as before %ld, refused %ld, lies %ld, crashes %ld, outside %ld\n",
               only, shared->max_count, t.bound, t.as_before, t.refused, t.lies, t.crashes, t.outside);
        for (int k = 0; k < kMaxTasks; ++k) printf("  %s\n", shared->task_detail[k]);
        return rc;
    }
    int broke = run_once(0, &t);
    const long total = shared->max_count;
    const long bound_clean = t.bound;
    for (long n = 1; n <= total; ++n) broke |= run_once(n, &t);
    printf("%s%s: %ld allocations; without a failure %ld task(s) bound; %ld runs: %ld crashes, %ld lies, "
           "%ld tasks bound as reported, %ld as before (NUMABIND_MODE none/unset), %ld refused (rc -1), "
           "%ld runs died in hwloc/libxml2/ld.so (outside numabind)\n",
           scenario, option_value ? " --option" : "", total, bound_clean, total + 1, t.crashes, t.lies, t.bound,
           t.as_before, t.refused, t.outside);
    return broke;
}
