// numabind SPANK plugin: what slurmstepd can read of a step before its tasks fork (the facts
// step_policy.hpp decides on), and the NUMABIND_* variables the plugin owns in its tasks.
// Shared by the front (spank_numabind.so) and the step engine (numabind_stepd.so).
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <optional>
#include <string>

#include "policy/config.hpp"
#include "policy/step_policy.hpp"

namespace numabind::spank {

// Slurm's reserved step ids (slurm.h: SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT).
inline constexpr uint32_t kBatchStep = 0xfffffffb;
inline constexpr uint32_t kExternStep = 0xfffffffc;
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;  // salloc's shell under use_interactive_step

// srun (local context) records here the SLURM_CPU_BIND / SLURM_MEM_BIND it inherited from
// the task it runs in, so that slurmstepd can tell them from values typed for this step.
inline constexpr const char* kInheritedCpuBind = "NUMABIND_SRUN_CPU_BIND";
inline constexpr const char* kInheritedMemBind = "NUMABIND_SRUN_MEM_BIND";
void record_inherited_binding();  // srun, in its own environment (sent with the step)

// The job's environment as the task (or the step) will see it.
std::optional<std::string> job_getenv(spank_t sp, const std::string& name);

StepKind step_kind(spank_t sp);
// Everything but the option (the front fills that in).
StepFacts read_step_facts(spank_t sp);
// The batch and the interactive step: their GPUs are the job's (SLURM_JOB_GPUS).
bool job_level(StepKind kind);

// Every NUMABIND_* variable is either the plugin's or gone: nothing of the user's, of an
// earlier step or of a bound batch shell survives into a task. `mode_none`: then
// NUMABIND_MODE=none (an explicit --numa-binding=none, or a task left unbound).
void clear_variables(spank_t sp, bool mode_none);
// srun's markers only (steps the plugin leaves alone).
void clear_markers(spank_t sp);

}  // namespace numabind::spank
