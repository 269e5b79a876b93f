// The step's plan, made once in slurmstepd before the tasks fork (step_planning.cpp) and
// inherited by every task: what each task is expected to find, and its entry when it does.
#pragma once

#include <string>
#include <vector>

#include "devices.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"

namespace numabind::spank {

struct StepPlan {
    // The step's CPUs and memory nodes, read once: its cpuset within Slurm's allocation.
    bool allowed_known = false;
    AllowedSets allowed;
    std::string allowed_note;  // why Slurm's allocation was not used, said once by the tasks
    // Set only when every field below holds: what a task must find to take its entry.
    bool ready = false;
    std::vector<Published> expected;  // by local rank: the GPUs each task should find
    std::vector<TaskPlan> tasks;      // by local rank; empty when the step has no GPU here
    std::vector<std::string> warnings;  // the plan's, said once per step
    double planning_us = 0;             // slurmstepd's time on it, for the detailed verbose line
};

}  // namespace numabind::spank
