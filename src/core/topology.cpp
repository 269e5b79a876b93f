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

}  // namespace numabind
