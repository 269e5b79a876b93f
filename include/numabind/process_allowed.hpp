// What the calling process may use: the CPUs and memory nodes of its cpuset (cgroup v1 or
// v2, however nested, or the whole machine without one), as the kernel enforces them, not
// its current affinity, which a launcher (Slurm's task/affinity, mpirun) may have narrowed.
#pragma once

#include <string>

#include "numabind/idset.hpp"
#include "numabind/topology.hpp"

namespace numabind {

struct AllowedSets {
    IdSet cpus;  // OS indexes of PUs
    IdSet mems;  // OS indexes of NUMA nodes
};

// Adapter (src/sys/binding.cpp), from the kernel in a few system calls: the CPUs by asking
// for all of them with sched_setaffinity and reading back what the cpuset leaves (the
// calling thread's affinity is put back at once; when the thread may not change its affinity,
// the affinity it has, which lies inside the cpuset), the memory nodes with
// get_mempolicy(MPOL_F_MEMS_ALLOWED). Throws Error when the kernel refuses to read either.
AllowedSets kernel_allowed();

// Pure (src/core/topology.cpp): `kernel` restricted to what `topo` describes. Never empty:
// an empty set means "everything" to the planner, so a topology that shares no CPU (no
// memory node) with the process throws Error naming `source`, never hands out CPUs or
// memory outside the cpuset.
AllowedSets allowed_in(const Topology& topo, const AllowedSets& kernel, const std::string& source);

}  // namespace numabind
