// numabind step engine: what Slurm says about the step beyond the GPU variables — the CPUs it
// allocated on this node, its own device files (gres.conf) and whether it constrains devices
// (slurm.conf, cgroup.conf) — read once per step in slurmstepd, before the tasks fork.
#pragma once

#include "context.hpp"

namespace numabind::spank {

// The OS CPUs of the step's allocation on this node (S_STEP_ALLOC_CORES, the job's for the
// batch and interactive steps), or empty (a note says why) when Slurm gives none or they
// cannot be mapped onto `st.model`.
IdSet allocated_cpus(spank_t sp, State& st);

// Accelerators whose device file numabind does not know get Slurm's own from gres.conf
// (File=, in gres index order, the order Slurm's GPU variables count in) when it lists one
// per accelerator; `st.devices_constrained` says whether Slurm's device cgroup chooses.
void use_slurm_device_files(State& st);

}  // namespace numabind::spank
