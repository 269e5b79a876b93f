/* Test helper SPANK plugins for the tests/slurm scripts, one per -D flag:
 *   -DHELPER_SLOW   plugin "nbslow": plugstack argument rank=R,ms=M makes local task R sleep M ms
 *                   in task_init (listed before numabind: that task reaches numabind late)
 *   -DHELPER_VISIBLE plugin "nbvisible": see below (tests/slurm/step_plan_test.sh)
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
