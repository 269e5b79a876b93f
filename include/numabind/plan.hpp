// The planner: topology + request in, one binding per local task out.
// Pure: no I/O, no syscalls, deterministic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/idset.hpp"
#include "numabind/topology.hpp"

namespace numabind {

enum class Mode { None, Node, Socket, Exclusive, CoreComplex };
enum class MemPolicy { None, Prefer, Bind, Interleave };

Mode parse_mode(std::string_view text);            // throws UsageError naming valid choices
MemPolicy parse_mem_policy(std::string_view text);  // likewise
std::string to_string(Mode mode);
std::string to_string(MemPolicy policy);
extern const char* const kModeChoices;       // "none, node, socket, exclusive, core-complex"
extern const char* const kMemPolicyChoices;  // "prefer, bind, interleave, none"

struct PlanRequest {
    Mode mode = Mode::Node;
    MemPolicy mem = MemPolicy::Prefer;
    int ntasks = 1;
    // Physical accelerator indexes visible to the tasks (task r uses entry r mod size).
    // Empty: all accelerators.
    std::vector<int> visible_devices;
    // Per-task visible devices (Slurm --gpus-per-task): when set for a task it
    // overrides visible_devices for that task, which uses its entry 0... r-th modulo.
    std::vector<std::vector<int>> per_task_devices;
    IdSet allowed_cpus;  // empty: every PU of the topology
    IdSet allowed_mems;  // OS NUMA indexes the task may allocate on; empty: all
};

struct TaskPlan {
    int local_rank = 0;
    const Accelerator* device = nullptr;  // points into NodePlan::accelerators
    IdSet cpus;
    std::vector<int> mems;  // OS NUMA indexes
    MemPolicy mem = MemPolicy::None;
    std::vector<std::string> warnings;
};

struct NodePlan {
    Mode mode = Mode::None;
    std::vector<Accelerator> accelerators;
    std::vector<TaskPlan> tasks;
    std::vector<std::string> warnings;
    NodePlan() = default;
    NodePlan(const NodePlan& other);
    NodePlan& operator=(const NodePlan& other);
};

// Plans every local task of the node. Throws Error when no binding is possible
// (no accelerator for a GPU mode, fewer allowed PUs than tasks, bad device index).
NodePlan plan_node(const Topology& topo, const std::vector<Accelerator>& accelerators,
                   const PlanRequest& request);

}  // namespace numabind
