/* Test helper SPANK plugins for the tests/slurm scripts, one per -D flag:
 *   -DHELPER_SLOW   plugin "nbslow": plugstack argument rank=R,ms=M makes local task R sleep M ms
 *                   in task_init (listed before numabind: that task reaches numabind late)
 *   -DHELPER_VISIBLE plugin "nbvisible", -DHELPER_NARROW plugin "nbnarrow": see below
 *                   (tests/slurm/step_plan_test.sh)
 *   -DHELPER_FAKE   plugin "numabind": a stand-in a user could load through their own SLURM_CONF;
 *                   registers --numa-binding and accepts any value, so a raw value reaches the
 *                   real plugin in slurmstepd (log-forging regression) */
#include <slurm/spank.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HELPER_SLOW
SPANK_PLUGIN(nbslow, 1);
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    int rank = -1, ms = 0, me = -1;
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "rank=", 5) == 0) rank = atoi(av[i] + 5);
        if (strncmp(av[i], "ms=", 3) == 0) ms = atoi(av[i] + 3);
    }
    if (spank_get_item(sp, S_TASK_ID, &me) == ESPANK_SUCCESS && me == rank) usleep((useconds_t)ms * 1000);
    return 0;
}
#endif

#ifdef HELPER_FAKE
SPANK_PLUGIN(numabind, 1);
static int accept_anything(int val, const char *optarg, int remote) { (void)val; (void)optarg; (void)remote; return 0; }
struct spank_option fake_option = {"numa-binding", "any", "accepts anything", 1, 0, accept_anything};
int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)ac; (void)av;
    if (spank_context() == S_CTX_LOCAL) spank_option_register(sp, &fake_option);
    return 0;
}
#endif

#ifdef HELPER_VISIBLE
/* plugin "nbvisible": plugstack argument rank=R,visible=V sets CUDA_VISIBLE_DEVICES=V for local
 * task R in task_init (listed before numabind: that task finds other GPUs than slurmstepd did). */
SPANK_PLUGIN(nbvisible, 1);
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    int rank = -1, me = -1;
    const char *visible = NULL;
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "rank=", 5) == 0) rank = atoi(av[i] + 5);
        if (strncmp(av[i], "visible=", 8) == 0) visible = av[i] + 8;
    }
    if (visible && spank_get_item(sp, S_TASK_ID, &me) == ESPANK_SUCCESS && me == rank)
        spank_setenv(sp, "CUDA_VISIBLE_DEVICES", visible, 1);
    return 0;
}
#endif

#ifdef HELPER_NARROW
/* plugin "nbnarrow" (cgroup v1 cpuset, root): plugstack argument rank=R,cpus=LIST moves local
 * task R in task_init_privileged into a child cpuset of its own holding only LIST (a site
 * plugin that narrows one task after slurmstepd planned the step); task_exit removes it. */
#include <stdio.h>
#include <sys/stat.h>
SPANK_PLUGIN(nbnarrow, 1);
static int narrow_args(int ac, char **av, const char **cpus) {
    int rank = -1;
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "rank=", 5) == 0) rank = atoi(av[i] + 5);
        if (strncmp(av[i], "cpus=", 5) == 0) *cpus = av[i] + 5;
    }
    return rank;
}
static int child_dir(char *out, size_t len) {  /* the step's cpuset dir + "/nbnarrow" */
    char path[512] = "";
    FILE *f = fopen("/proc/self/cpuset", "r");
    if (!f) return -1;
    if (!fgets(path, sizeof path, f)) path[0] = 0;
    fclose(f);
    path[strcspn(path, "\n")] = 0;
    if (strstr(path, "/nbnarrow")) *strstr(path, "/nbnarrow") = 0;
    return snprintf(out, len, "/sys/fs/cgroup/cpuset%s/nbnarrow", path) < (int)len ? 0 : -1;
}
static int put(const char *dir, const char *file, const char *value) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    int rc = fputs(value, f) < 0;
    return (fclose(f) != 0 || rc) ? -1 : 0;
}
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av) {
    const char *cpus = NULL;
    int me = -1, rank = narrow_args(ac, av, &cpus);
    char dir[600], mems[256] = "", parent[700], pid[32];
    if (!cpus || spank_get_item(sp, S_TASK_ID, &me) != ESPANK_SUCCESS || me != rank || child_dir(dir, sizeof dir)) return 0;
    snprintf(parent, sizeof parent, "%.*s/cpuset.mems", (int)(strlen(dir) - strlen("/nbnarrow")), dir);
    FILE *f = fopen(parent, "r");
    if (f) { if (!fgets(mems, sizeof mems, f)) mems[0] = 0; fclose(f); }
    mkdir(dir, 0755);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (put(dir, "cpuset.mems", mems) || put(dir, "cpuset.cpus", cpus) || put(dir, "tasks", pid)) {
        slurm_error("nbnarrow: cannot move task %d into %s", me, dir);
        return 0;
    }
    /* slurmstepd may attach the task to the step's cgroup once more after this hook began:
     * move it again until it has stayed moved for 0.5 s (3 s at most). */
    for (int stable = 0, tries = 0; stable < 25 && tries < 150; tries++) {
        char now[512] = "";
        usleep(20000);
        FILE *f2 = fopen("/proc/self/cpuset", "r");
        if (f2) { if (!fgets(now, sizeof now, f2)) now[0] = 0; fclose(f2); }
        if (strstr(now, "/nbnarrow")) stable++;
        else if (put(dir, "tasks", pid) == 0) stable = 0;
    }
    return 0;
}
int slurm_spank_task_exit(spank_t sp, int ac, char **av) {  /* slurmstepd, still in the step's cpuset */
    const char *cpus = NULL;
    char dir[600];
    (void)sp;
    (void)narrow_args(ac, av, &cpus);
    if (cpus && !child_dir(dir, sizeof dir)) rmdir(dir);
    return 0;
}
#endif
