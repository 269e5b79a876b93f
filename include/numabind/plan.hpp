// The planner: topology + request in, one binding per local task out.
// Pure: no I/O, no syscalls, deterministic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/idset.hpp"
#include "numabind/nics.hpp"
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

// Exclusive and core-complex: the modes that split a pool's CPUs among its tasks instead of
// sharing the home, so that a task's CPUs depend on the other tasks'.
bool disjoint(Mode mode);

// How tasks that share the visible devices divide them when the devices outnumber the tasks.
// Blocks: contiguous blocks (a task drives several). LocalRank: task r owns the r-th device
// alone, torch.numa.binding's rule ("the accelerator whose local index equals the worker's
// local rank"), which is the GPU a torchrun worker computes on with cuda:LOCAL_RANK.
enum class DeviceRule { Blocks, LocalRank };
std::string to_string(DeviceRule rule);  // "blocks", "local-rank"

struct PlanRequest {
    Mode mode = Mode::Node;
    MemPolicy mem = MemPolicy::Prefer;
    int ntasks = 1;
    // Physical accelerator indexes visible to all tasks, in the runtime's order; shared
    // among the tasks by assign_devices(). Empty: all accelerators in PCI order.
    std::vector<int> visible_devices;
    // A task's own device list (Slurm per-task GPUs, a per-task CUDA_VISIBLE_DEVICES):
    // a non-empty entry r means task r owns exactly these devices.
    std::vector<std::vector<int>> per_task_devices;
    DeviceRule device_rule = DeviceRule::Blocks;  // fewer tasks than shared devices
    IdSet allowed_cpus;  // empty: every PU of the topology
    IdSet allowed_mems;  // OS NUMA indexes the task may allocate on; empty: all
    // The CPUs each task was given by its launcher (Slurm's --cpus-per-task): no task gets
    // fewer; a home too small is extended to the nearest NUMA nodes. 0: no minimum.
    int min_cpus = 0;
    // One hardware thread per core (Slurm's --hint=nomultithread): the first allowed PU of
    // each core, in every mode.
    bool one_thread_per_core = false;
};

// Which devices each local task owns (physical indexes). A task with its own list owns
// all of it. The others share `shared` (n devices): ntasks >= n gives task r device
// r mod n (what frameworks do with local_rank % ngpus); fewer tasks than devices gives
// contiguous blocks in list order, sizes differing by at most one, larger blocks first
// (DeviceRule::Blocks), or device r alone (DeviceRule::LocalRank: the rest stay unused).
// Pure; does not validate indexes.
std::vector<std::vector<int>> assign_devices(int ntasks, const std::vector<int>& shared,
                                             const std::vector<std::vector<int>>& per_task,
                                             DeviceRule rule = DeviceRule::Blocks);

struct TaskPlan {
    int local_rank = 0;
    const Accelerator* device = nullptr;  // the first owned device; points into NodePlan::accelerators
    std::vector<int> devices;             // every owned device (physical indexes), device first
    IdSet cpus;
    std::vector<int> mems;  // OS NUMA indexes
    MemPolicy mem = MemPolicy::None;
    // The fabric NICs nearest its devices (nics.hpp), in PCI order; none without devices.
    std::vector<Nic> nics;
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
