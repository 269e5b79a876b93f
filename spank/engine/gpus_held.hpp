// The GPUs the calling process holds, by the rule in devices.hpp: each known device file
// probed with open(), the job's runtime variables read through Slurm. Called in each task and,
// once per step, in slurmstepd (step_planning.cpp), where it gives what every task finds when
// Slurm binds no GPU per task.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "context.hpp"
#include "devices.hpp"

namespace numabind::spank {

TaskGpus gpus_held(spank_t sp, const State& st);

// What the other local tasks learn of a task that found `gpus`.
Published published_of(const TaskGpus& gpus);

}  // namespace numabind::spank
