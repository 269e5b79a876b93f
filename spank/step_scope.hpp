// numabind SPANK plugin: which steps are numabind's, and the NUMABIND_* variables it owns
// in their tasks. Shared by the front (spank_numabind.so) and the step engine
// (numabind_stepd.so), so that both decide alike.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <optional>
#include <string>

#include "config.hpp"

namespace numabind::spank {

// Slurm's reserved step ids (slurm.h: SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT).
inline constexpr uint32_t kBatchStep = 0xfffffffb;
inline constexpr uint32_t kExternStep = 0xfffffffc;
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;  // salloc's shell under use_interactive_step

// The job's environment as the task (or the step) will see it.
std::optional<std::string> job_getenv(spank_t sp, const std::string& name);

struct StepScope {
    bool ours = false;       // not the extern step; the batch or interactive step only with batch_step=yes
    bool job_level = false;  // the batch or the interactive step
};
StepScope step_scope(spank_t sp, const SiteConfig& site);

// Every NUMABIND_* variable is either the plugin's or gone: nothing of the user's, of an
// earlier step or of a bound batch shell survives into a task. `mode_none`: then
// NUMABIND_MODE=none (an explicit --numa-binding=none, or a task left unbound).
void clear_variables(spank_t sp, bool mode_none);

// slurmd's node name (its own environment, not the user's), else the short host name.
std::string node_name();
std::string short_hostname();

}  // namespace numabind::spank
