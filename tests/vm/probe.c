/*
 * probe: report what binding a process actually got, as the kernel sees it.
 *
 *   probe [MIB]
 *
 * Prints key=value lines:
 *   pid=                 process id
 *   cpus=                Cpus_allowed_list from /proc/self/status
 *   mems_allowed=        Mems_allowed_list (the cpuset, NOT the memory policy)
 *   cpu=                 CPU the probe runs on right now
 *   mempolicy=           task policy: default|preferred|bind|interleave|local|
 *                        preferred_many|weighted_interleave|unknown(N)
 *   mempolicy_flags=     static_nodes,relative_nodes (empty if none)
 *   mempolicy_nodes=     node list of the task policy (e.g. 0-1,4; empty if none)
 *   touched_mib=         MIB (default 16) of anonymous memory written
 *   vma_policy=          policy column of that mapping in /proc/self/numa_maps
 *   first_page_node=     node of the mapping's first page (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR)
 *   pages_by_node=       N<node>=<pages> from numa_maps for that mapping, comma separated
 *   pages_total=         sum of the above
 *   NUMABIND_*=          every NUMABIND_* environment variable, sorted
 *   <VAR>=               CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
 *                        ZE_AFFINITY_MASK, OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND, SLURM_PROCID,
 *                        SLURM_LOCALID, SLURM_STEP_GPUS, SLURM_CPUS_PER_TASK when set
 * With NBPROBE_OPEN=F0,F1,... (device files) also:
 *   opens=               indexes of the files open(2) lets it open (success, or ENXIO/ENODEV:
 *                        a device file without a driver behind it that a device cgroup allows)
 *   open_errno=          per file: 0 or the errno name (EPERM: denied by the device cgroup)
 * With NBPROBE_CGROUP=1 also:
 *   cgroup_cpus=         the task's cgroup v1 cpuset (cpuset.cpus of /proc/self/cpuset's
 *                        path) or cgroup v2 cpuset.cpus.effective; "-" if none is mounted
 *
 * Needs no libnuma: get_mempolicy is called through syscall(2). Build statically:
 *   gcc -static -O2 -o probe probe.c
 * Exit status: 0, or 1 if a system call failed (an error= line says which).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAXNODE 1024
#define WORDBITS (8 * sizeof(unsigned long))

#ifndef MPOL_F_NODE
#define MPOL_F_NODE (1 << 0)
#endif
#ifndef MPOL_F_ADDR
#define MPOL_F_ADDR (1 << 1)
#endif
#define NB_MPOL_F_STATIC_NODES (1 << 15)
#define NB_MPOL_F_RELATIVE_NODES (1 << 14)

extern char **environ;
static int failed;

static long nb_get_mempolicy(int *mode, unsigned long *nmask, unsigned long maxnode,
                             void *addr, unsigned long flags)
{
    return syscall(SYS_get_mempolicy, mode, nmask, maxnode, addr, flags);
}

static const char *mode_name(int mode, char *buf, size_t len)
{
    static const char *names[] = {"default", "preferred", "bind", "interleave",
                                  "local", "preferred_many", "weighted_interleave"};
    if (mode >= 0 && mode < (int)(sizeof(names) / sizeof(names[0])))
        return names[mode];
    snprintf(buf, len, "unknown(%d)", mode);
    return buf;
}

/* "0-1,4" style list of the set bits */
static void print_list(const char *key, const unsigned long *mask, int nbits)
{
    int first = 1;
    printf("%s=", key);
    for (int i = 0; i < nbits; i++) {
        if (!(mask[i / WORDBITS] >> (i % WORDBITS) & 1))
            continue;
        int j = i;
        while (j + 1 < nbits && (mask[(j + 1) / WORDBITS] >> ((j + 1) % WORDBITS) & 1))
            j++;
        printf("%s%d", first ? "" : ",", i);
        if (j > i)
            printf("-%d", j);
        first = 0;
        i = j;
    }
    printf("\n");
}

static void status_field(const char *field, const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[4096];
    size_t n = strlen(field);
    if (!f) {
        printf("error=open /proc/self/status: %s\n", strerror(errno));
        failed = 1;
        return;
    }
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            char *v = line + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            printf("%s=%s\n", key, v);
            break;
        }
    }
    fclose(f);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* which of the comma-separated device files open(2) lets this process open */
static void probe_opens(const char *list)
{
    char *copy = strdup(list), *save = NULL, *tok;
    char opens[4096] = "", errs[4096] = "";
    int i = 0;
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save), i++) {
        int fd = open(tok, O_RDONLY | O_NONBLOCK | O_CLOEXEC), err = fd < 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
        char one[64];
        if (err == 0 || err == ENXIO || err == ENODEV) {
            snprintf(one, sizeof one, "%s%d", opens[0] ? "," : "", i);
            strncat(opens, one, sizeof opens - strlen(opens) - 1);
        }
        snprintf(one, sizeof one, "%s%s", i ? "," : "",
                 err == 0 ? "0" : err == EPERM ? "EPERM" : err == ENXIO ? "ENXIO" :
                 err == ENODEV ? "ENODEV" : err == ENOENT ? "ENOENT" : err == EACCES ? "EACCES" : "other");
        strncat(errs, one, sizeof errs - strlen(errs) - 1);
    }
    printf("opens=%s\nopen_errno=%s\n", opens, errs);
    free(copy);
}

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(buf, (int)len, f))
        buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* the cpuset cgroup the process is in (what a task plugin allows the step) */
static void probe_cgroup_cpus(void)
{
    char line[4096], path[8192], val[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    const char *out = "-";
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        int v1 = strstr(ctrls, "cpuset") != NULL, v2 = ctrls[0] == 0;
        if (v1)
            snprintf(path, sizeof path, "/sys/fs/cgroup/cpuset%s/cpuset.cpus", cg);
        else if (v2)
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpuset.cpus.effective", cg);
        else
            continue;
        if (read_line(path, val, sizeof val) == 0) {
            out = val;
            if (v1)
                break;
        }
    }
    if (f)
        fclose(f);
    printf("cgroup_cpus=%s\n", out);
}

int main(int argc, char **argv)
{
    long mib = 16;
    if (argc > 1) {
        char *end;
        mib = strtol(argv[1], &end, 10);
        if (*end || mib < 0) {
            fprintf(stderr, "usage: %s [MIB]\n", argv[0]);
            return 2;
        }
    }

    printf("pid=%d\n", (int)getpid());
    status_field("Cpus_allowed_list", "cpus");
    status_field("Mems_allowed_list", "mems_allowed");
    printf("cpu=%d\n", sched_getcpu());

    int mode = -1;
    unsigned long mask[MAXNODE / WORDBITS];
    char buf[64];
    memset(mask, 0, sizeof mask);
    if (nb_get_mempolicy(&mode, mask, MAXNODE, NULL, 0) != 0) {
        printf("error=get_mempolicy: %s\n", strerror(errno));
        failed = 1;
    } else {
        int flags = mode & (NB_MPOL_F_STATIC_NODES | NB_MPOL_F_RELATIVE_NODES);
        mode &= ~(NB_MPOL_F_STATIC_NODES | NB_MPOL_F_RELATIVE_NODES);
        printf("mempolicy=%s\n", mode_name(mode, buf, sizeof buf));
        printf("mempolicy_flags=%s%s%s\n",
               flags & NB_MPOL_F_STATIC_NODES ? "static_nodes" : "",
               (flags & NB_MPOL_F_STATIC_NODES) && (flags & NB_MPOL_F_RELATIVE_NODES) ? "," : "",
               flags & NB_MPOL_F_RELATIVE_NODES ? "relative_nodes" : "");
        print_list("mempolicy_nodes", mask, MAXNODE);
    }

    /* touch the memory */
    size_t len = (size_t)mib << 20;
    printf("touched_mib=%ld\n", mib);
    if (len > 0) {
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            printf("error=mmap: %s\n", strerror(errno));
            failed = 1;
        } else {
            long pg = sysconf(_SC_PAGESIZE);
            for (size_t off = 0; off < len; off += pg)
                p[off] = (char)off;

            int node = -1;
            if (nb_get_mempolicy(&node, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR) != 0) {
                printf("error=get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR): %s\n", strerror(errno));
                failed = 1;
            } else {
                printf("first_page_node=%d\n", node);
            }

            FILE *f = fopen("/proc/self/numa_maps", "r");
            char line[8192];
            char want[32];
            int found = 0;
            snprintf(want, sizeof want, "%lx ", (unsigned long)p);
            if (!f) {
                printf("error=open /proc/self/numa_maps: %s\n", strerror(errno));
                failed = 1;
            } else {
                /* the mapping may have been merged with a neighbour: accept a line
                 * whose start is p, else the line whose start is closest below p */
                char best[8192] = "";
                unsigned long best_start = 0;
                while (fgets(line, sizeof line, f)) {
                    unsigned long start = strtoul(line, NULL, 16);
                    if (strncmp(line, want, strlen(want)) == 0) {
                        snprintf(best, sizeof best, "%s", line);
                        found = 1;
                        break;
                    }
                    if (start <= (unsigned long)p && start >= best_start) {
                        best_start = start;
                        snprintf(best, sizeof best, "%s", line);
                    }
                }
                fclose(f);
                if (!found && best[0])
                    found = 2;
                if (!found) {
                    printf("error=mapping not in numa_maps\n");
                    failed = 1;
                } else {
                    char *save = NULL, *tok;
                    long total = 0;
                    int first = 1;
                    best[strcspn(best, "\n")] = 0;
                    tok = strtok_r(best, " ", &save); /* address */
                    tok = strtok_r(NULL, " ", &save); /* policy */
                    printf("vma_policy=%s\n", tok ? tok : "");
                    printf("pages_by_node=");
                    while ((tok = strtok_r(NULL, " ", &save))) {
                        if (tok[0] == 'N' && tok[1] >= '0' && tok[1] <= '9' && strchr(tok, '=')) {
                            printf("%s%s", first ? "" : ",", tok);
                            total += strtol(strchr(tok, '=') + 1, NULL, 10);
                            first = 0;
                        }
                    }
                    printf("\npages_total=%ld\n", total);
                    if (found == 2)
                        printf("numa_maps_note=mapping merged with a neighbour\n");
                }
            }
            munmap(p, len);
        }
    }

    const char *open_list = getenv("NBPROBE_OPEN");
    if (open_list)
        probe_opens(open_list);
    if (getenv("NBPROBE_CGROUP"))
        probe_cgroup_cpus();

    /* environment */
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char **vars = calloc(n + 1, sizeof *vars);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "NUMABIND_", 9) == 0)
            vars[k++] = *e;
    qsort(vars, k, sizeof *vars, cmp_str);
    for (size_t i = 0; i < k; i++)
        printf("%s\n", vars[i]);
    free(vars);
    static const char *extra[] = {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                  "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
                                  "OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "SLURM_PROCID",
                                  "SLURM_LOCALID", "SLURM_STEP_GPUS", "SLURM_CPUS_PER_TASK"};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        const char *v = getenv(extra[i]);
        if (v)
            printf("%s=%s\n", extra[i], v);
    }
    /* NBPROBE_THEN=PROGRAM: run it next in this same task (an OpenMP program under the
     * binding the probe just reported). */
    const char *then = getenv("NBPROBE_THEN");
    if (then && *then) {
        fflush(stdout);
        execl(then, then, (char *)NULL);
        printf("then_error=%s: %s\n", then, strerror(errno));
        return 1;
    }
    return failed;
}
