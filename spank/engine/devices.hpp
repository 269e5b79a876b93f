// numabind SPANK plugin: which accelerators a task really holds, and how the local tasks'
// device sets become one request for the node plan. Pure (no Slurm calls, no I/O).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/visible.hpp"
#include "numabind/accelerators.hpp"

namespace numabind::spank {

// What a task knows about its GPUs.
struct GpuFacts {
    // Physical indexes of the accelerators whose device file is known and that the task can
    // open (PCI order); nullopt when no device file is known at all.
    std::optional<std::vector<int>> held;
    // Accelerators whose device file is not known (no driver information, a device_files=
    // entry that does not exist), when `held` has a value.
    std::vector<int> unknown;
    // The step's GPUs as slurmstepd saw them before the tasks forked (SLURM_STEP_GPUS,
    // SLURM_JOB_GPUS in the batch and interactive steps): Slurm's gres indexes.
    std::optional<std::string> step_gpus;
    // Whether Slurm keeps a task from opening GPUs not its own (TaskPlugin task/cgroup and
    // ConstrainDevices=yes); nullopt when its configuration could not be read.
    std::optional<bool> devices_constrained;
};

struct TaskGpus {
    bool gpu_step = false;     // Slurm gave the step GPUs (or the task's runtime names some)
    // false: `devices` is the step's whole list as every task sees it, shared among the tasks
    // by assign_devices; true: the task's own GPUs.
    bool per_task = true;
    std::vector<int> devices;  // physical indexes, the runtime's order
    std::string source;        // how they were found, for verbose and messages
    std::vector<std::string> warnings;
    std::optional<std::vector<int>> opened;  // the accelerators the task can open (known files only)
};

// The rule (docs/SITE.md, "Which GPUs a task holds"):
//  - every device file known: the task's GPUs are the accelerators it can open, in PCI
//    order, with CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES /
//    ZE_AFFINITY_MASK applied on top (their indexes count over that list); one rule with
//    and without ConstrainDevices.
//  - some files unknown, per device: when the task opens more known accelerators than the
//    step has GPUs, devices are not constrained and the variable is Slurm's gres index over
//    all accelerators; with one file unknown, the variable's length tells whether that GPU
//    is among the task's (it then counts over the known ones it opens plus that one).
//  - files unknown and Slurm does not constrain devices (its slurm.conf and cgroup.conf say
//    so): the variable is Slurm's gres index over all accelerators.
//  - otherwise (no file known, or several unknown): Slurm's per-task variables are local
//    indexes that say nothing about which GPU a task has (a v1 device cgroup reads
//    "a *:* rwm" even when it denies devices), so the tasks share the step's list; where a
//    task's variable names fewer GPUs than the step has, a warning says the identity is a
//    guess and how to give it (device_files=).
// A task that sees as many GPUs as the step has is given the step's list to share
// (per_task false). A step is a GPU step when Slurm named GPUs for it, a runtime variable is
// set, or the task can open only some of the (all known) accelerators. Throws UsageError for
// a bad variable or step list.
TaskGpus resolve_task_gpus(const std::vector<Accelerator>& accelerators, const GpuFacts& facts,
                           const EnvLookup& env, const UuidResolver& resolver);

// One local task's contribution, as exchanged through the node share.
struct Published {
    enum class State { Devices, Missing, Late };  // Late: not published in time
    State state = State::Missing;
    bool per_task = true;
    std::vector<int> devices;
    // The task found what slurmstepd expected and took its entry of the step's plan
    // (step_plan.hpp): its CPUs are that entry's, whatever the others find.
    bool committed = false;
};

struct NodeDevices {
    std::vector<int> shared;                     // PlanRequest::visible_devices
    std::vector<std::vector<int>> per_task;      // PlanRequest::per_task_devices
    std::vector<int> stand_ins;                  // tasks planned on GPUs nobody holds
};

// Every local task computes the same request from the same published sets:
//  - every list published is the step's shared list (per_task false), or every task
//    published in time and all published the same list: it is shared among all tasks by
//    the ownership rule (task r -> r mod n, or blocks), late tasks included;
//  - otherwise each task with its own list owns it; a task without one (not published in
//    time, holding none, or with only the step's list) is planned on the accelerators no
//    task holds (all of them when every one is held), so that the others keep their sets
//    disjoint from it, and only on the step's when a task published the step's list. One
//    task's own list is never taken for the step's.
NodeDevices combine_node_devices(int accelerator_count, const std::vector<Published>& tasks);

}  // namespace numabind::spank
