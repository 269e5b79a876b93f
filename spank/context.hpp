// numabind step engine (numabind_stepd.so): the state of one slurmstepd, shared with the
// tasks it forks, and the hooks the front hands to it (stepd_api.h).
#pragma once

// spank.h declares the hooks without C linkage of its own.
extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "messages.hpp"
#include "node_share.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/topology.hpp"

namespace numabind::spank {

// How long a task waits for the other local tasks' device sets, from the first arrival.
inline constexpr int kShareTimeoutMs = 2000;

struct State {
    SiteConfig site;

    // --numa-binding as the front passed it (stepd_api.h).
    bool option_given = false;
    UserChoice choice;
    std::string option_error;  // a bad value that reached slurmstepd

    // slurmstepd, decided once per step before the tasks fork (they inherit it).
    bool ours = false;               // a step the plugin handles (not extern; batch only with batch_step)
    bool active = false;             // bind this step's tasks: set only once `model` is loaded
    bool explicit_choice = false;    // --numa-binding given (not the site default)
    bool explicit_none = false;      // --numa-binding=none: export NUMABIND_MODE=none only
    std::string skipped_reason;      // why a site default was not applied (for verbose)
    Mode mode = Mode::None;
    MemPolicy mem = MemPolicy::Prefer;
    bool verbose = false;
    std::string node_name;
    std::string prepare_error;       // raised in task_init: Slurm does not report earlier failures to srun
    // The step's GPUs on this node as slurmstepd set them before forking (each task's
    // own SLURM_STEP_GPUS is later narrowed to its GPUs under --gpus-per-task).
    std::optional<std::string> step_gpus;
    double prepare_us = 0;           // topology load time, for the verbose line
    Topology model;                  // the node (no hwloc topology is kept: see stepd_prepare)
    std::string model_source;        // where it came from, for messages
    std::vector<Accelerator> accelerators;
    std::vector<std::string> device_files;  // per accelerator; all known or none
    NodeShare share;                        // created before the tasks fork
};

State& state();

// Hooks (stepd.cpp).
int stepd_prepare(spank_t sp);  // slurmstepd, before the tasks fork
int stepd_task_init(spank_t sp);  // the task, as the user, right before execve
void stepd_exit();

}  // namespace numabind::spank
