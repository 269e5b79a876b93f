// numabind SPANK plugin front (spank_numabind.so): what srun, sbatch, salloc and every
// slurmstepd load. It registers and checks --numa-binding and the plugstack arguments, and
// in slurmstepd decides whether the step binds at all (step_policy.hpp); only then does it
// load the step engine (stepd_api.h), which links hwloc and the planner.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "policy/config.hpp"
#include "policy/step_policy.hpp"
#include "shared/said_once.hpp"
#include "shared/stepd_api.h"

namespace numabind::spank {

struct FrontState {
    SiteConfig site;

    // --numa-binding as the option callback saw it (idempotent: last call wins).
    bool option_seen = false;   // the callback ran
    bool option_given = false;  // ... and the value parsed
    UserChoice choice;
    std::string option_error;  // a bad value that reached slurmstepd

    // slurmstepd, decided once per step before the tasks fork (they inherit it).
    EngineStep step;                             // the decision (and, for the engine, the site)
    const numabind_stepd_api* engine = nullptr;  // loaded only for a step that binds
    std::string engine_error;                    // it should bind, but the engine could not be loaded
    SaidOnce said;                               // the step's lines, once (mapped only for a step that speaks)
};

FrontState& front_state();

// Hooks by context.
int local_init(spank_t sp);           // srun, sbatch, salloc, slurmstepd: register the option
int local_init_post_opt(spank_t sp);  // srun, sbatch, salloc: validate the inherited value
int option_callback(int val, const char* optarg, int remote) noexcept;
int front_prepare(spank_t sp);   // slurmstepd, before the tasks fork
int front_user_init(spank_t sp);  // slurmstepd as the user, in the step's cgroups, before the fork
int front_task_init(spank_t sp);  // the task, right before execve
void front_exit();

}  // namespace numabind::spank
