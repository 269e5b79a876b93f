// `numabind show`: the calling process's placement against its device.
#include "numabind/placement_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "numabind/local_rank.hpp"
#include "numabind/report.hpp"
#include "numabind/visible.hpp"

namespace numabind {

PlacementReport current_placement_report(const std::string& topology, const std::string& device_match,
                                         const Notify& note) {
    PlacementReport r;
    r.pid = static_cast<int>(getpid());
    r.placement = current_placement();
    const Placement& p = r.placement;
    auto topo_ptr = load_topology(topology, true, note);
    const Topology& m = topo_ptr->model();
    auto accs = find_accelerators(m, make_matcher(device_match));
    r.cpu_numa_nodes = m.cpu_nodes_intersecting(p.cpus);

    // The process's device: NUMABIND_DEVICE if numabind bound it, else the visible
    // device of its local rank.
    const Accelerator* device = nullptr;
    if (auto d = getenv_lookup("NUMABIND_DEVICE"); d && !d->empty()) {
        int idx = parse_nonnegative(*d, "NUMABIND_DEVICE");
        if (idx < static_cast<int>(accs.size())) {
            device = &accs[idx];
            r.device_source = "NUMABIND_DEVICE";
        }
    }
    if (!device && !accs.empty()) {
        VisibleDevices vis = visible_from_env(accs, getenv_lookup, nvml_uuid_resolver());
        std::vector<int> visible = vis.restricted ? vis.indexes : std::vector<int>{};
        if (!vis.restricted)
            for (const auto& a : accs) visible.push_back(a.index);
        int rank = 0;
        std::string rank_source = "default";
        if (auto lr = local_rank_from_env(getenv_lookup)) {
            rank = lr->rank;
            rank_source = lr->source;
        }
        if (!visible.empty()) {
            device = &accs[visible[rank % visible.size()]];
            r.device_source = (vis.restricted ? vis.source : std::string("all accelerators")) + ", local rank " +
                              std::to_string(rank) + " (" + rank_source + ")";
        }
    }
    if (device) {
        for (int n : r.cpu_numa_nodes) {
            if (std::find(device->home_nodes.begin(), device->home_nodes.end(), n) == device->home_nodes.end()) {
                r.warnings.push_back("CPUs " + p.cpus.to_string() + " include NUMA node " + std::to_string(n) +
                                     " but device " + std::to_string(device->index) + " (" + device->pci +
                                     ") is on node(s) " + join(device->home_nodes));
                break;
            }
        }
        if (p.mem_policy != "default" && p.mem_policy != "local") {
            for (int n : p.mem_nodes.ids()) {
                if (std::find(device->home_nodes.begin(), device->home_nodes.end(), n) == device->home_nodes.end()) {
                    r.warnings.push_back("memory policy " + p.mem_policy + " uses node " + std::to_string(n) +
                                         " but device " + std::to_string(device->index) + " is on node(s) " +
                                         join(device->home_nodes));
                    break;
                }
            }
        }
        r.device = *device;
    } else {
        r.warnings.push_back(accs.empty() ? "no accelerator found on this node" : "no device for this process");
    }
    return r;
}

nlohmann::ordered_json placement_to_json(const PlacementReport& r) {
    nlohmann::ordered_json dev = nullptr;
    if (r.device)
        dev = nlohmann::ordered_json{{"index", r.device->index}, {"pci", r.device->pci},
                                     {"numa_nodes", r.device->home_nodes}, {"source", r.device_source}};
    return nlohmann::ordered_json{{"pid", r.pid},
                                  {"cpus", r.placement.cpus.ids()},
                                  {"cpu_numa_nodes", r.cpu_numa_nodes},
                                  {"mem_policy", r.placement.mem_policy},
                                  {"mem_nodes", r.placement.mem_nodes.ids()},
                                  {"device", dev},
                                  {"warnings", r.warnings}};
}

std::string placement_to_text(const PlacementReport& r) {
    const Placement& p = r.placement;
    std::ostringstream out;
    out << "cpus:       " << p.cpus.to_string() << " (NUMA node(s) " << join(r.cpu_numa_nodes) << ")\n";
    out << "memory:     " << p.mem_policy
        << (p.mem_nodes.empty() ? std::string() : " on node(s) " + p.mem_nodes.to_string()) << "\n";
    if (r.device)
        out << "device:     " << r.device->index << " (" << r.device->pci << ") on NUMA node(s) "
            << join(r.device->home_nodes) << " [" << r.device_source << "]\n";
    else
        out << "device:     none\n";
    for (const std::string& w : r.warnings) out << "warning: " << w << "\n";
    return out.str();
}

}  // namespace numabind
