// What the calling process holds: its GPUs, by the rule in devices.hpp (each known device
// file probed with open(), the job's runtime variables read through Slurm), and its CPUs.
// Called once per step in slurmstepd (step_planning.cpp), where it gives what every task
// finds when Slurm binds no GPU per task, and by a task that plans for itself.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "context.hpp"
#include "devices.hpp"

namespace numabind::spank {

TaskGpus gpus_held(spank_t sp, const State& st);

// The step's CPUs and memory nodes as the calling process sees them: its cpuset within
// Slurm's allocation (`note`: why the allocation was not used). Throws Error.
AllowedSets cpus_allowed(const State& st, std::string& note);

// What the other local tasks learn of a task that found `gpus`.
Published published_of(const TaskGpus& gpus);

}  // namespace numabind::spank
