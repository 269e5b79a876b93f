/* Fault injection for tests/fault/fault_matrix.sh (LD_PRELOAD): makes the kernel calls
 * numabind binds with fail or misbehave, as a restrictive cgroup, seccomp profile or
 * container runtime would.  NB_FAULT selects the fault:
 *   affinity   sched_setaffinity() fails with EPERM
 *   narrow     sched_setaffinity() succeeds but keeps only the first requested CPU
 *              (what the kernel does silently inside a narrower cpuset)
 *   mempolicy  set_mempolicy() fails with EPERM
 *   mpolswap   set_mempolicy() succeeds but installs MPOL_PREFERRED instead of the
 *              requested policy (the read-back must notice)
 * Anything else (or unset): pass through. "narrow" and "mpolswap" act on the first call
 * only, so numabind's restore after the failure reaches the kernel unaltered; "narrow" skips
 * a request for every CPU and the call right after it, which are numabind reading the cpuset
 * and putting the affinity back (kernel_allowed): a real narrower cpuset would narrow that
 * read too, and numabind would plan inside it, so the fault stands for a cpuset that changed
 * between that read and the binding. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fault(const char* name) {
    const char* f = getenv("NB_FAULT");
    return f && strcmp(f, name) == 0;
}

int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t* set) {
    if (fault("affinity")) {
        errno = EPERM;
        return -1;
    }
    static int narrowed = 0, after_read = 0;
    int every_cpu = 1;
    for (int c = 0; c < (int)(size * 8) && c < CPU_SETSIZE && every_cpu; ++c) every_cpu = CPU_ISSET_S(c, size, set);
    const int restoring = after_read;
    after_read = every_cpu;
    if (fault("narrow") && !every_cpu && !restoring && !narrowed++) {
        cpu_set_t* one = CPU_ALLOC(CPU_SETSIZE);
        size_t sz = CPU_ALLOC_SIZE(CPU_SETSIZE);
        CPU_ZERO_S(sz, one);
        for (int c = 0; c < (int)(size * 8); ++c)
            if (CPU_ISSET_S(c, size, set)) {
                CPU_SET_S(c, sz, one);
                break;
            }
        long rc = syscall(SYS_sched_setaffinity, pid, sz, one);
        CPU_FREE(one);
        return rc < 0 ? -1 : 0;
    }
    long rc = syscall(SYS_sched_setaffinity, pid, size, set);
    return rc < 0 ? -1 : 0;
}

long set_mempolicy(int mode, const unsigned long* nodemask, unsigned long maxnode) {
    if (fault("mempolicy")) {
        errno = EPERM;
        return -1;
    }
    static int swapped = 0;
    if (fault("mpolswap") && mode == 2 /* MPOL_BIND */ && !swapped++) {
        unsigned long first = 1UL; /* node 0 */
        return syscall(SYS_set_mempolicy, 1, &first, 64UL);
    }
    return syscall(SYS_set_mempolicy, mode, nodemask, maxnode);
}
