// The planner's view of a node: plain data, filled by an adapter (hwloc) and
// read by the pure planning code. Vectors are in hwloc's logical order.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "numabind/idset.hpp"

namespace numabind {

struct Core {
    IdSet pus;         // OS indexes of its hardware threads
    int l3 = -1;       // index into Topology::l3_groups, -1 when none
    int package = -1;  // index into Topology::packages
};

struct CacheGroup {
    IdSet pus;  // PUs sharing this cache
};

struct Package {
    int os_index = -1;
    IdSet pus;
};

struct NumaNode {
    int os_index = -1;
    // PUs the kernel counts on this node; empty for memory-only nodes (GPU memory,
    // HBM, CXL), which hwloc attaches next to the DRAM node of the same CPUs.
    IdSet pus;
    IdSet locality;       // hwloc's cpuset of the node (CPUs it is local to)
    std::string subtype;  // hwloc subtype ("GPUMemory", "MCDRAM"...), may be empty
    bool has_cpus() const { return !pus.empty(); }
};

// A network OS device of a PCI function: hwloc's OpenFabrics (RDMA verbs: mlx5_0, hfi1_0,
// an EFA device) and Network (ib0, hsi0) kinds, which is what the NIC rule (nics.hpp) needs.
struct NetDevice {
    std::string name;
    bool rdma = false;    // OpenFabrics
    std::string subtype;  // hwloc subtype ("Slingshot"), may be empty
    // RDMA ports hwloc lists (info Port<N>State), as (port number, state); 4 is ACTIVE.
    std::vector<std::pair<int, int>> ports;
};

// A PCI function as found in the topology, before accelerator matching.
struct PciDevice {
    std::string address;  // "dddd:bb:dd.f"
    uint16_t vendor = 0;
    uint16_t device = 0;
    uint16_t class_id = 0;  // base class << 8 | subclass, e.g. 0x0302
    std::string name;
    IdSet locality;         // cpuset of the first non-I/O ancestor
    bool machine_level = false;  // first non-I/O ancestor is the machine root
    int l3 = -1;                 // L3 group the device hangs below, -1 when none
    std::vector<std::string> os_devices;  // e.g. "cuda0", "rsmi3"
    // The PCI bridges above it, from the host bridge down to its parent, as indexes unique
    // within the topology (hwloc's logical index of the bridge): two functions share the
    // bridges of their common prefix.
    std::vector<int> bridges;
    std::vector<NetDevice> net_devices;
};

struct Topology {
    std::vector<Core> cores;
    std::vector<CacheGroup> l3_groups;  // L3 if present, else the highest cache level below
    std::vector<Package> packages;
    std::vector<NumaNode> numa_nodes;
    std::vector<PciDevice> pci_devices;
    // NUMA distances keyed by (os_index, os_index); empty when the topology has none.
    std::map<std::pair<int, int>, int> distances;
    std::string cache_level_name = "L3";  // what l3_groups are made of

    IdSet all_pus() const;
    const NumaNode* numa_by_os(int os_index) const;
    IdSet pus_of_nodes(const std::vector<int>& node_os_indexes) const;
    // NUMA nodes (with CPUs) whose PUs intersect `pus`.
    std::vector<int> cpu_nodes_intersecting(const IdSet& pus) const;
    std::vector<int> cpu_nodes() const;
    int distance(int from_os, int to_os) const;  // falls back to 10 same node / 20 otherwise
};

// What a process may use: the CPUs and memory nodes of its cpuset (cgroup v1 or v2, however
// nested, or the whole machine without one), as the kernel enforces them, not its current
// affinity, which a launcher (Slurm's task/affinity, mpirun) may have narrowed. Read by
// kernel_allowed() (src/sys/binding.hpp).
struct AllowedSets {
    IdSet cpus;  // OS indexes of PUs
    IdSet mems;  // OS indexes of NUMA nodes
};

// `kernel` restricted to what `topo` describes (src/core/topology.cpp). Never empty: an empty
// set means "everything" to the planner, so a topology that shares no CPU (no memory node)
// with the process throws Error naming `source`, never hands out CPUs or memory outside the
// cpuset.
AllowedSets allowed_in(const Topology& topo, const AllowedSets& kernel, const std::string& source);

// The OS CPUs of Slurm's core ids on this node (SPANK's S_STEP_ALLOC_CORES, "0-3,8"): core c
// is the c-th core of `topo` in hwloc's logical order, package by package, with every
// hardware thread of it — the way slurmd maps its abstract core ids to the machine's.
// Throws Error for a malformed list or a core beyond the topology.
IdSet cpus_of_slurm_cores(const Topology& topo, const std::string& core_list);

// The CPUs a task may use: Slurm's allocation on this node where it lies inside the cpuset,
// so that a node without a per-step cpuset (task/affinity alone, ConstrainCores=no) never
// lends a task another job's CPUs; otherwise (the allocation read against another layout
// than Slurm's) the cpuset the kernel enforces, and `note` says why. An allocation narrower
// than a cpuset that constrains (not one Slurm made, which equals the allocation) is used and
// `note` says so. Memory is the cpuset's.
AllowedSets within_allocation(const AllowedSets& kernel, const IdSet& allocated, const IdSet& node_pus,
                              std::string& note);

}  // namespace numabind
