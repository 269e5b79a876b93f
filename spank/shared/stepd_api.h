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
/* The one symbol the engine exports: a struct numabind_stepd_api. The front accepts only
 * an engine of its own build (`build`), so the struct may change between builds. */
#define NUMABIND_STEPD_SYMBOL "numabind_stepd_v1"

struct numabind_stepd_api {
    /* The build the engine comes from; the front refuses an engine of another build. */
    const char *build;
    /* slurmstepd, before the tasks fork, for a step the front decided binds: `step` is the
     * front's numabind::spank::EngineStep (step_policy.hpp: the parsed plugstack arguments
     * and the step decision; same build, checked). Returns 0; problems are reported in
     * task_init, where srun shows them. */
    int (*prepare)(spank_t sp, const void *step);
    /* slurmstepd, as the job's user before the tasks fork, once Slurm has put it in the
     * step's cgroups: the step planned once for every task. Returns 0; a step it cannot
     * plan is left to the tasks. */
    int (*plan_step)(spank_t sp);
    /* Each task, right before its program: 0, or -1 under fallback=fail. */
    int (*task_init)(spank_t sp);
    void (*exit)(void);
};

#ifdef __cplusplus
}
#endif

#endif
