// numabind SPANK plugin: state shared by the hooks of one process (srun, sbatch,
// salloc or one slurmstepd and the tasks it forks) and the message helpers.
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
#include "node_share.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/hwloc_topology.hpp"

namespace numabind::spank {

// Slurm's reserved step ids (slurm.h: SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT).
inline constexpr uint32_t kBatchStep = 0xfffffffb;
inline constexpr uint32_t kExternStep = 0xfffffffc;
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;  // salloc's shell under use_interactive_step
// How long a task waits for the other local tasks' device sets, from the first arrival.
inline constexpr int kShareTimeoutMs = 2000;

struct State {
    SiteConfig site;

    // --numa-binding as the option callback saw it (idempotent: last call wins).
    bool option_given = false;
    UserChoice choice;
    std::string option_error;  // a bad value that reached slurmstepd

    // slurmstepd, decided once per step before the tasks fork (they inherit it).
    bool ours = false;               // a step the plugin handles (not extern; batch only with batch_step)
    bool active = false;             // bind this step's tasks: set only once `topo` is loaded
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
    std::unique_ptr<HwlocTopology> topo;
    std::vector<Accelerator> accelerators;
    std::vector<std::string> device_files;  // per accelerator; all known or none
    NodeShare share;                        // created before the tasks fork
};

State& state();

// "numabind: " + msg through slurm_error (srun's stderr and the slurmd log). Control
// characters are escaped and the line capped (log_text.hpp): no forged log lines.
void log_error(const std::string& msg);
// "numabind: " + msg through slurm_info (the slurmd log only).
void log_info(const std::string& msg);
// One write(2) of "numabind: " + msg + "\n" to the task's stderr (relayed by srun), escaped alike.
void task_stderr(const std::string& msg);

// Hooks by context.
int local_init(spank_t sp);                  // srun, sbatch, salloc: register the option
int local_init_post_opt(spank_t sp);         // srun, sbatch, salloc: validate the inherited value
int option_callback(int val, const char* optarg, int remote) noexcept;
int stepd_prepare(spank_t sp);               // slurmstepd, before the tasks fork
int stepd_task_init(spank_t sp);             // the task, as the user, right before execve
void stepd_exit();

}  // namespace numabind::spank
