#include "numabind/topology.hpp"

#include "numabind/error.hpp"
#include "numabind/topology.hpp"

#include <algorithm>

namespace numabind {

IdSet Topology::all_pus() const {
    IdSet all;
    for (const Core& c : cores) all |= c.pus;
    return all;
}

const NumaNode* Topology::numa_by_os(int os_index) const {
    for (const NumaNode& n : numa_nodes)
        if (n.os_index == os_index) return &n;
    return nullptr;
}

IdSet Topology::pus_of_nodes(const std::vector<int>& node_os_indexes) const {
    // Every node with a listed OS index (a malformed topology may repeat an index).
    IdSet out;
    for (const NumaNode& n : numa_nodes)
        if (std::find(node_os_indexes.begin(), node_os_indexes.end(), n.os_index) != node_os_indexes.end())
            out |= n.pus;
    return out;
}

std::vector<int> Topology::cpu_nodes_intersecting(const IdSet& pus) const {
    std::vector<int> out;
    for (const NumaNode& n : numa_nodes)
        if (n.has_cpus() && n.pus.intersects(pus)) out.push_back(n.os_index);
    return out;
}

std::vector<int> Topology::cpu_nodes() const {
    std::vector<int> out;
    for (const NumaNode& n : numa_nodes)
        if (n.has_cpus()) out.push_back(n.os_index);
    return out;
}

int Topology::distance(int from_os, int to_os) const {
    auto it = distances.find({from_os, to_os});
    if (it != distances.end()) return it->second;
    return from_os == to_os ? 10 : 20;  // the ACPI SLIT convention when no matrix is known
}

AllowedSets allowed_in(const Topology& topo, const AllowedSets& kernel, const std::string& source) {
    const IdSet pus = topo.all_pus();
    AllowedSets out{kernel.cpus & pus, {}};
    std::string nodes;
    for (const NumaNode& n : topo.numa_nodes) {
        if (kernel.mems.contains(n.os_index)) out.mems.insert(n.os_index);
        nodes += (nodes.empty() ? "" : ",") + std::to_string(n.os_index);
    }
    if (out.cpus.empty())
        throw Error("none of the CPUs this process may use (" + kernel.cpus.to_string() + ") is in the topology " +
                    source + " (PUs " + pus.to_string() + "); is it this machine's topology?");
    if (out.mems.empty())
        throw Error("none of the memory nodes this process may use (" + kernel.mems.to_string() +
                    ") is in the topology " + source + " (NUMA nodes " + nodes + "); is it this machine's topology?");
    return out;
}

IdSet cpus_of_slurm_cores(const Topology& topo, const std::string& core_list) {
    const IdSet cores = IdSet::parse(core_list);
    if (cores.empty()) throw Error("Slurm's core list '" + core_list + "' is empty");
    if (cores.last() >= static_cast<int>(topo.cores.size()))
        throw Error("Slurm's core list " + cores.to_string() + " names core " + std::to_string(cores.last()) +
                    " but the topology has " + std::to_string(topo.cores.size()) + " cores");
    IdSet cpus;
    for (int c : cores.ids()) cpus |= topo.cores[static_cast<size_t>(c)].pus;
    return cpus;
}

AllowedSets within_allocation(const AllowedSets& kernel, const IdSet& allocated, const IdSet& node_pus,
                              std::string& note) {
    const bool cpuset_constrains = (node_pus - kernel.cpus) != IdSet{};
    if (!allocated.empty() && allocated.is_subset_of(kernel.cpus)) {
        // A cpuset Slurm made (ConstrainCores) is the allocation itself; a wider one is not
        // Slurm's (slurmd in a container's cpuset): the allocation still bounds the tasks, said.
        if (cpuset_constrains && allocated != kernel.cpus)
            note = "Slurm's CPU allocation on this node (CPUs " + allocated.to_string() + ") is narrower than the cpuset (" +
                   kernel.cpus.to_string() + "); the tasks are bound within the allocation";
        return {allocated, kernel.mems};
    }
    const IdSet inside = allocated & kernel.cpus;
    if (cpuset_constrains || inside.empty()) {
        note = "Slurm's CPU allocation on this node (CPUs " + allocated.to_string() + ") is not inside the cpuset (" +
               kernel.cpus.to_string() + "); the cpuset is used";
        return kernel;
    }
    // No cpuset: the allocation's CPUs the kernel has online.
    return {inside, kernel.mems};
}

}  // namespace numabind
