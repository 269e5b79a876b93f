// numabind step engine (numabind_stepd.so): the state of one slurmstepd, shared with the
// tasks it forks, and the hooks the front hands to it (stepd_api.h).
#pragma once

// spank.h declares the hooks without C linkage of its own.
extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "code_pages.hpp"
#include "node_share.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/topology.hpp"
#include "policy/config.hpp"
#include "policy/step_policy.hpp"
#include "step_plan.hpp"
#include "shared/messages.hpp"
#include "shared/said_once.hpp"

namespace numabind::spank {

// How long a task waits for the other local tasks' device sets, from the first arrival.
inline constexpr int kShareTimeoutMs = 2000;

struct State {
    // From the front (step_policy.hpp): the plugstack arguments and what this step does.
    SiteConfig site;
    StepDecision decision;

    // slurmstepd, once per step before the tasks fork (they inherit it).
    bool active = false;         // set only once `model` is loaded
    std::string node_name;
    std::string prepare_error;   // a step-level failure, raised in task_init (where srun shows it)
    std::vector<std::string> notes;  // step-level notes (a missing device file ...), said once
    // The step's GPUs on this node as slurmstepd set them before forking (each task's own
    // SLURM_STEP_GPUS is later narrowed to its GPUs under --gpus-per-task).
    std::optional<std::string> step_gpus;
    int min_cpus = 0;            // Slurm's CPUs per task (--cpus-per-task); 1 under --overcommit
    double prepare_us = 0;       // topology load time, for the detailed verbose line
    Topology model;              // the node (no hwloc topology is kept: see stepd_prepare)
    std::string model_source;    // where it came from, for messages
    std::vector<Accelerator> accelerators;
    std::vector<std::string> device_files;  // per accelerator; "" where not known
    std::optional<bool> devices_constrained;  // Slurm's device cgroup, read where a file is unknown
    IdSet allocated;                        // the step's CPUs as Slurm allocated them (empty: unknown)
    int local_tasks = 1;                    // Slurm's local task count
    NodeShare share;                        // created before the tasks fork
    StepPlan step_plan;                     // made in slurmstepd as the user, before the fork
    SaidOnce said;                          // step-level messages, each once (likewise)
    CodeRange code;                         // the engine's code, mapped again in each task
};

State& state();

// Hooks (stepd.cpp).
int stepd_prepare(spank_t sp);    // slurmstepd, before the tasks fork
int stepd_plan_step(spank_t sp);  // slurmstepd as the user, in the step's cgroups, before the fork
int stepd_task_init(spank_t sp);  // the task, as the user, right before execve
void stepd_exit();

}  // namespace numabind::spank
