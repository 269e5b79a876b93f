/* numabind SPANK plugin: the interface between the front (spank_numabind.so, loaded by srun,
 * sbatch, salloc and every slurmstepd) and the step engine (numabind_stepd.so, loaded by the
 * front only in a slurmstepd whose step binds). The front links neither hwloc nor the
 * planner, so that commands and steps that do not bind pay only for a small plugin. */
#ifndef NUMABIND_SPANK_STEPD_API_H
#define NUMABIND_SPANK_STEPD_API_H

#include <slurm/spank.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's file, beside the front's own. */
#define NUMABIND_STEPD_FILE "numabind_stepd.so"
/* The one symbol the engine exports: a struct numabind_stepd_api. A change of this
 * interface gets a new name. */
#define NUMABIND_STEPD_SYMBOL "numabind_stepd_v1"

struct numabind_stepd_api {
    /* The build the engine comes from; the front refuses an engine of another build. */
    const char *build;
    /* slurmstepd, before the tasks fork: the plugstack arguments, and the --numa-binding
     * value as slurmstepd passed it (NULL: not given). Returns 0; problems are reported in
     * task_init, where srun shows them. */
    int (*prepare)(spank_t sp, int ac, char **av, const char *option_value);
    /* Each task, right before its program: 0, or -1 under fallback=fail. */
    int (*task_init)(spank_t sp);
    void (*exit)(void);
};

#ifdef __cplusplus
}
#endif

#endif
