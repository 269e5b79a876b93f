// numabind SPANK plugin: which accelerators a task really holds, and how the local tasks'
// device sets become one request for the node plan. Pure (no Slurm calls, no I/O).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/visible.hpp"

namespace numabind::spank {

// What a task knows about its GPUs.
struct GpuFacts {
    // Physical indexes of the accelerators the task can open (PCI order); nullopt when the
    // device files are unknown (no driver information, no device_files=).
    std::optional<std::vector<int>> held;
    // The step's GPUs as slurmstepd saw them before the tasks forked (SLURM_STEP_GPUS,
    // SLURM_JOB_GPUS in the batch and interactive steps): Slurm's gres indexes.
    std::optional<std::string> step_gpus;
    // Whether the task's device cgroup restricts it; nullopt when it cannot be told.
    std::optional<bool> constrained;
};

struct TaskGpus {
    bool gpu_step = false;     // Slurm gave the step GPUs (or the task's runtime names some)
    bool per_task = true;      // false: `devices` is the step's list, shared by assign_devices
    std::vector<int> devices;  // physical indexes, the runtime's order
    std::string source;        // how they were found, for verbose and messages
    std::vector<std::string> warnings;
};

// The rule (docs/SITE.md, "Which GPUs a task holds"):
//  - device files known: the task's GPUs are the accelerators it can open, in PCI order,
//    with CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES /
//    ZE_AFFINITY_MASK applied on top (their indexes count over that list); one rule with
//    and without ConstrainDevices.
//  - device files unknown and the device cgroup known to be open: the runtime variable
//    counts over all accelerators (Slurm's gres index: PCI order when gres.conf is);
//    without a variable, the step's list is shared.
//  - device files unknown, devices constrained or unknown: per-task variables count over
//    the task's hidden cgroup list and say nothing; the step's list is shared.
// A step is a GPU step when Slurm named GPUs for it, a runtime variable is set, or the
// device cgroup lets the task open only some accelerators. Throws UsageError for a bad
// variable or step list.
TaskGpus resolve_task_gpus(const std::vector<Accelerator>& accelerators, const GpuFacts& facts,
                           const EnvLookup& env, const UuidResolver& resolver);

// One local task's contribution, as exchanged through the node share.
struct Published {
    enum class State { Devices, Missing, Late };  // Late: not published in time
    State state = State::Missing;
    bool per_task = true;
    std::vector<int> devices;
};

struct NodeDevices {
    std::vector<int> shared;                     // PlanRequest::visible_devices
    std::vector<std::vector<int>> per_task;      // PlanRequest::per_task_devices
    std::vector<int> stand_ins;                  // tasks planned on GPUs nobody holds
};

// Every local task computes the same request from the same published sets:
//  - all tasks that published a list published the same one (or a shared step list):
//    it is shared among all tasks by the ownership rule (task r -> r mod n, or blocks);
//  - otherwise each task owns its own list; a task without one (not published in time,
//    or holding none) is planned on the accelerators no task holds (all of them when
//    every one is held), so that the others keep their sets disjoint from it.
NodeDevices combine_node_devices(int accelerator_count, const std::vector<Published>& tasks);

}  // namespace numabind::spank
