// The planner's stages, in the order plan_node() runs them. Each is a short, pure
// function with its own tests (tests/unit/stages_test.cpp):
//   1. devices_per_task  which devices each task owns        (assign_devices + checks)
//   2. home_of           the NUMA nodes and CPUs a task's devices make its home
//   3. pools_of + split  CPUs per mode: node / socket share the home; exclusive and
//                        core-complex hand out disjoint whole cores within each pool
//   4. memory_nodes      the nodes of the memory policy
#pragma once

#include <string>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"

namespace numabind::planning {

// 1. Which devices each task owns: assign_devices() over the visible list (all
// accelerators when empty), every index checked against the accelerator count.
std::vector<std::vector<int>> devices_per_task(const PlanRequest& request, int accelerator_count);

// 2. A task's home: the union of its devices' home nodes and their allowed CPUs. When
// none of those CPUs is allowed, the nearest nodes (NUMA distance) that have allowed
// CPUs, with a warning; `nodes` is empty when the allowed CPUs lie outside every node.
struct Home {
    std::vector<int> device_nodes;  // union of the owned devices' home nodes
    std::vector<int> nodes;         // nodes the CPUs come from (device_nodes or the fallback)
    IdSet cpus;                     // allowed PUs of `nodes`
    std::vector<std::string> warnings;
};
Home home_of(const Topology& topo, const std::vector<Accelerator>& accelerators, const std::vector<int>& devices,
             const IdSet& allowed);

// 2b. A home widened to `need` CPUs: the home's own CPUs first, then whole NUMA nodes by
// distance from the devices' nodes (ties: OS index), until it holds `need` allowed CPUs or
// none are left. Returns whether it grew.
bool widen_home(const Topology& topo, Home& home, const IdSet& allowed, int need);

// 2c. The first allowed PU of each core (one hardware thread per core).
IdSet one_thread_per_core(const Topology& topo, const IdSet& allowed);

// 3a. Tasks whose homes share a CPU, directly or through a chain, form a pool; exclusive
// modes never give one CPU to two tasks of a pool. Pools in order of their first task;
// tasks inside a pool in order (first owned device, rank).
std::vector<std::vector<int>> pools_of(const std::vector<Home>& homes, const std::vector<std::vector<int>>& devices);

// 3b. socket: every allowed PU of the packages the home touches.
IdSet socket_cpus(const Topology& topo, const IdSet& home_cpus, const IdSet& allowed);

// 3c. exclusive split of one home's cores among `parts` tasks: whole cores with every
// allowed SMT sibling, contiguous in logical order, edges on L3 edges where the counts
// allow. Fewer cores than tasks: hardware threads, with a warning saying how many tasks
// share a core; fewer threads than tasks: Error.
std::vector<IdSet> split_exclusive(const Topology& topo, const IdSet& home_cpus, int parts, const std::string& what,
                                   std::vector<std::string>& warnings);

// 3d. exclusive for one pool (task indexes into `homes`): groups of tasks with the same
// home, smallest home (fewest allowed cores) first; each group takes its fair share of the
// pool's still-free cores (the first g parts of an even split over the still-unserved
// tasks), capped by the free cores of its own home, the first free ones in logical order,
// split among its tasks by split_exclusive. A pool with one home is split_exclusive itself.
std::vector<IdSet> split_exclusive_pool(const Topology& topo, const std::vector<Home>& homes,
                                        const std::vector<int>& pool, std::vector<std::string>& warnings);

// 3e. core-complex for one pool: one whole L3 part per task, distinct. The L3 of an owned
// device first, then parts in the first device's home, then the rest of the home; among
// parts equally near, the most allowed cores first, then logical order. More tasks than
// parts: one home splits each part exclusively among its share of the tasks; several
// homes fall back to split_exclusive_pool. Warns when parts of unequal size are handed out.
std::vector<IdSet> split_core_complex_pool(const Topology& topo, const std::vector<Accelerator>& accelerators,
                                           const std::vector<Home>& homes,
                                           const std::vector<std::vector<int>>& devices,
                                           const std::vector<int>& pool, std::vector<std::string>& warnings);

// 3f. Tops up a task's CPUs to `need`: allowed PUs by NUMA distance from `device_nodes`
// (the nearest first, whole cores in logical order), those of no other task (`taken`)
// first, then — only when nothing else is left — shared ones. Returns how many of the added
// CPUs are shared with other tasks.
int top_up_cpus(const Topology& topo, const std::vector<int>& device_nodes, const IdSet& allowed, const IdSet& taken,
                int need, IdSet& cpus);

// 4. Memory nodes: the devices' home nodes the task may allocate on; when none is
// allowed, the allowed nodes that give it its CPUs (warned unless the policy is none).
std::vector<int> memory_nodes(const Home& home, const IdSet& allowed_mems, MemPolicy policy,
                              std::vector<std::string>& warnings);

// Splits `count` items into `parts` sizes differing by at most one, larger first.
std::vector<int> even_sizes(int count, int parts);

}  // namespace numabind::planning
