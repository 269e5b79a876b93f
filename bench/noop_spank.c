/* The floor of any SPANK plugin, for bench/step_overhead.sh: a plugin that registers one
 * option and does nothing in any hook. What Slurm itself spends on loading a plugin and
 * calling its hooks (srun and slurmstepd) shows as this row's difference to "no plugin". */
#include <stddef.h>
#include <slurm/spank.h>

SPANK_PLUGIN(noop, 1);

static int noop_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)optarg;
    (void)remote;
    return 0;
}

static struct spank_option noop_option = {"noop-option", NULL, "does nothing", 0, 0, noop_cb};

int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    return spank_option_register(sp, &noop_option) == ESPANK_SUCCESS ? 0 : -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    (void)sp;
    (void)ac;
    (void)av;
    return 0;
}
